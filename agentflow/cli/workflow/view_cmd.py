"""`agentflow view RUN_DIR`: write the run's self-contained HTML page; `--open` it, or `--serve` it on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer


def workflow_outline(run_dir: Path) -> dict[str, Any] | None:
    """The graph of a workflow run (from the workflow its run.json names), or None when it cannot be loaded.
    Only a record of the user's own is followed: loading a workflow may import its Python, and a folder from
    elsewhere is data (the page then draws the nodes that ran)."""
    from agentflow.errors import AgentflowError
    from agentflow.graph.define.loader import load_workflow
    from agentflow.graph.define.mermaid import outline
    from agentflow.graph.run.run_options import read_record
    from agentflow.runrecord import verified

    try:
        meta = read_record(run_dir)
        return outline(load_workflow(meta.get("workflow", ""))) if verified(meta) else None
    except (AgentflowError, OSError, ValueError):  # damaged, or moved or edited since: the nodes that ran
        return None


def serve_file(path: Path, port: int) -> None:
    """Serve one file on 127.0.0.1 until Ctrl-C (loopback only: run contents never leave the machine)."""
    import functools
    import http.server

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/", "/" + path.name):
                self.send_error(404)
                return
            self.path = "/" + path.name
            super().do_GET()

        def log_message(self, format: str, *args: Any) -> None:
            return

    handler = functools.partial(Handler, directory=str(path.parent))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        typer.echo(f"serving {path} at http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C to stop)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


def register(app: typer.Typer) -> None:
    @app.command("view")
    def view_command(
        run_dir: Path = typer.Argument(..., help="A run directory of `agentflow run`, `repair`, `bench` or `eval`."),
        output: Path = typer.Option(None, "-o", "--output", help="Where to write the page (default RUN_DIR/view.html)."),
        open_browser: bool = typer.Option(False, "--open", help="Open the page in the default browser."),
        serve: bool = typer.Option(False, "--serve", help="Serve the page on 127.0.0.1 until Ctrl-C."),
        port: int = typer.Option(0, "--port", help="Port of --serve (0: a free one)."),
    ) -> None:
        """Write one self-contained HTML page of a run (timeline, calls, graph, search tree, budget, instances)."""
        from agentflow.observe.view import write_view

        graph = workflow_outline(run_dir) if (run_dir / "run.json").is_file() else None
        path = write_view(run_dir, output, graph=graph)
        typer.echo(f"view: {path}")
        if open_browser:
            import webbrowser

            webbrowser.open(path.resolve().as_uri())
        if serve:
            serve_file(path.resolve(), port)
