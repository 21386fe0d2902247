"""`agentflow models ...`: check that a model spec works."""

from __future__ import annotations

import typer

from agentflow.cli.common import JSON_OPTION, print_json


def register(app: typer.Typer) -> None:
    sub = typer.Typer(help="Model backends: check a model spec.", no_args_is_help=True)
    app.add_typer(sub, name="models")

    @sub.command("check")
    def check(
        spec: str = typer.Argument(
            ..., help="Model spec, e.g. openai:gpt-4o-mini or openai-compatible:URL#MODEL."
        ),
        prompt: str = typer.Option(
            "Reply with the single word: pong", "--prompt", help="The message to send."
        ),
        max_tokens: int = typer.Option(16, "--max-tokens", help="Upper limit of reply tokens."),
        timeout: float = typer.Option(30.0, "--timeout", help="Seconds per HTTP attempt."),
        attempts: int = typer.Option(2, "--attempts", help="Attempts for transient failures."),
        as_json: bool = JSON_OPTION,
    ) -> None:
        """Send a tiny chat request; print the reply, latency and tokens. Exit 2 bad spec, 1 unreachable."""
        import asyncio

        from agentflow.errors import ModelError
        from agentflow.models.base import ChatRequest, ChatResponse, Message
        from agentflow.models.spec import UNCONFIGURED, load_model, parse_spec

        parsed = parse_spec(spec)
        options = ({} if parsed.scheme in (*UNCONFIGURED, "local")
                   else {"timeout_s": timeout, "max_attempts": attempts, "retry_max_wait_s": 5.0})
        model = load_model(spec, **options)
        request = ChatRequest(messages=[Message.user(prompt)], max_tokens=max_tokens, temperature=0)

        async def call() -> ChatResponse:
            try:
                return await model.chat(request)
            finally:
                await model.aclose()

        try:
            response = asyncio.run(call())
        except ModelError as exc:
            message = " ".join(str(exc).split())
            if as_json:
                print_json({"spec": spec, "ok": False, "error": message})
            else:
                typer.echo(f"agentflow: error: {message}", err=True)
            raise typer.Exit(1) from None
        usage = response.usage
        if as_json:
            print_json({"spec": spec, "ok": True, "reply": response.text, "model": response.model,
                        "latency_s": round(response.latency_s, 4), "input_tokens": usage.input_tokens,
                        "output_tokens": usage.output_tokens, "cost_usd": usage.cost_usd})
            return
        cost = "unknown" if usage.cost_usd is None else f"${usage.cost_usd:.6f}"
        typer.echo(f"reply: {response.text.strip()}")
        typer.echo(
            f"model: {response.model or parsed.model}  latency: {response.latency_s:.3f}s  "
            f"tokens: {usage.input_tokens} in / {usage.output_tokens} out  cost: {cost}"
        )
