"""`agentflow graph validate|show|types WORKFLOW`: check a workflow without running it, draw it as Mermaid,
list node types.

A workflow file is code: it names Python (`fn:`, `tools:`, route `on:`, `node_types:`) that runs when the
workflow runs. These commands read that Python, they do not import it, so checking a workflow someone sent
you runs none of it; `--import-code` imports it for the exact check (only for workflows you trust).
"""

from __future__ import annotations

from typing import Any

import typer

from agentflow.cli.common import JSON_OPTION, print_json

IMPORT_CODE_OPTION = typer.Option(
    False,
    "--import-code",
    help="Also import the Python the workflow names (fn:, tools:, route on:, node_types:) to check what only "
    "an import shows. This runs that code: only for workflows you trust.",
)


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        help="Check and draw workflows (YAML path or shipped workflow name).", no_args_is_help=True
    )
    app.add_typer(sub, name="graph")

    @sub.command("validate")
    def validate_cmd(
        workflow: str = typer.Argument(..., help="YAML file or name of a shipped workflow (see workflows/)."),
        import_code: bool = IMPORT_CODE_OPTION,
        as_json: bool = JSON_OPTION,
    ) -> int:
        """Print every problem of WORKFLOW, one per line; exit 2 if there is any. The workflow's Python is
        read, not run (see --import-code); what only an import shows is printed as not checked."""
        from agentflow.graph.check.validation import validate
        from agentflow.graph.define.loader import load_workflow

        spec = load_workflow(workflow)
        notes: list[str] = []
        problems = validate(spec, import_code=import_code, notes=notes)
        if as_json:
            print_json({"workflow": spec.name, "ok": not problems,
                        "problems": [{"kind": p.kind, "message": p.message} for p in problems], "unchecked": notes})
        else:
            for p in problems:
                typer.echo(f"agentflow: error: {p.message}", err=True)
            if not problems:
                typer.echo(f"{spec.name}: ok ({len(spec.nodes)} nodes)")
            for note in notes:
                typer.echo(f"note: {note}")
        return 2 if problems else 0

    @sub.command("show")
    def show_cmd(
        workflow: str = typer.Argument(..., help="YAML file or name of a shipped workflow."),
    ) -> int:
        """Print WORKFLOW as a Mermaid flowchart."""
        from agentflow.graph.define.loader import load_workflow
        from agentflow.graph.define.mermaid import to_mermaid

        typer.echo(to_mermaid(load_workflow(workflow)), nl=False)
        return 0

    @sub.command("types")
    def types_cmd(
        workflow: str = typer.Argument(None, help="Also the node types this workflow's node_types: adds."),
        import_code: bool = IMPORT_CODE_OPTION,
        as_json: bool = JSON_OPTION,
    ) -> int:
        """List the registered node types (shipped, installed plugins, a workflow's own) and their settings.
        A workflow's own types are read from its node_types: modules, not imported (see --import-code)."""
        from agentflow.graph.compile.nodetypes import default_registry

        registry: Any = default_registry()
        notes: list[str] = []
        if workflow is not None:
            from agentflow.graph.check.static_code import CodeCheck, workflow_folder
            from agentflow.graph.define.loader import load_workflow

            spec = load_workflow(workflow)
            code = CodeCheck(workflow_folder(spec), import_code=import_code, notes=notes)
            registry = code.registry(spec)
        rows = [_type_row(registry.types[name]) for name in registry.names()]
        if as_json:
            print_json({"types": rows, "unchecked": notes})
        else:
            for row in rows:
                typer.echo(f"{row['type']:<18} {row['description']}")
                if row["note"]:
                    typer.echo(f"{'':<18} settings: {row['note']}")
                elif row["settings"]:
                    typer.echo(f"{'':<18} settings: {', '.join(row['settings'])}")
                if row["reads"] or row["writes"]:  # declared state keys of any workflow using the type
                    typer.echo(f"{'':<18} state: reads {', '.join(row['reads']) or '-'}; "
                               f"writes {', '.join(row['writes']) or '-'}")
            for note in notes:
                typer.echo(f"note: {note}")
        return 0


def _type_row(nt: Any) -> dict[str, Any]:
    """One node type for `graph types`; a type read from a workflow's text has settings None and a note."""
    from agentflow.graph.check.static_code import UNCHECKED, UncheckedType

    unchecked = isinstance(nt, UncheckedType)
    settings = None if unchecked else sorted(nt.settings.model_fields) if nt.settings is not None else []
    return {"type": nt.name, "description": nt.description, "reads": list(nt.read_keys),
            "writes": list(nt.write_keys), "settings": settings, "note": UNCHECKED if unchecked else None}
