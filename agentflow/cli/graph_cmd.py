"""`agentflow graph validate|show WORKFLOW`: check a workflow without running it, draw it as Mermaid."""

from __future__ import annotations

import typer

from agentflow.cli.common import JSON_OPTION, print_json


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        help="Check and draw workflows (YAML path or shipped workflow name).", no_args_is_help=True
    )
    app.add_typer(sub, name="graph")

    @sub.command("validate")
    def validate_cmd(
        workflow: str = typer.Argument(..., help="YAML file or name of a shipped workflow (see workflows/)."),
        as_json: bool = JSON_OPTION,
    ) -> int:
        """Print every problem of WORKFLOW, one per line; exit 2 if there is any."""
        from agentflow.graph.loader import load_workflow
        from agentflow.graph.validate import validate

        spec = load_workflow(workflow)
        problems = validate(spec)
        if as_json:
            print_json(
                {
                    "workflow": spec.name,
                    "ok": not problems,
                    "problems": [{"kind": p.kind, "message": p.message} for p in problems],
                }
            )
        else:
            for p in problems:
                typer.echo(f"agentflow: error: {p.message}", err=True)
            if not problems:
                typer.echo(f"{spec.name}: ok ({len(spec.nodes)} nodes)")
        return 2 if problems else 0

    @sub.command("show")
    def show_cmd(
        workflow: str = typer.Argument(..., help="YAML file or name of a shipped workflow."),
    ) -> int:
        """Print WORKFLOW as a Mermaid flowchart."""
        from agentflow.graph.loader import load_workflow
        from agentflow.graph.mermaid import to_mermaid

        typer.echo(to_mermaid(load_workflow(workflow)), nl=False)
        return 0

    @sub.command("types")
    def types_cmd(
        workflow: str = typer.Argument(None, help="Also the node types this workflow's node_types: adds."),
        as_json: bool = JSON_OPTION,
    ) -> int:
        """List the registered node types (shipped, installed plugins, a workflow's own) and their settings."""
        from agentflow.graph.context import RunContext
        from agentflow.graph.loader import load_workflow
        from agentflow.graph.nodetypes import default_registry

        registry = default_registry()
        if workflow is not None:
            from agentflow.graph.compile import registry_for

            registry = registry_for(load_workflow(workflow), RunContext())
        rows = []
        for name in registry.names():
            nt = registry.types[name]
            settings = sorted(nt.settings.model_fields) if nt.settings is not None else []
            rows.append({"type": name, "description": nt.description, "search": nt.search,
                         "reads": list(nt.reads), "writes": list(nt.writes), "settings": settings})
        if as_json:
            print_json({"types": rows})
        else:
            for row in rows:
                typer.echo(f"{row['type']:<18} {row['description']}")
                if row["settings"]:
                    typer.echo(f"{'':<18} settings: {', '.join(row['settings'])}")
        return 0
