"""The agent loop: render the prompts, call the model, run the tools it asks for, feed the results back,
repeat until it answers without tool calls; then read that answer as the output schema.

Every step first checks the limits (steps, wall time, the shared budget, which also admits and cuts each model
and tool call); a run that reaches one stops cleanly with the best output so far and the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from agentflow.agents.approval import Approver, call_hash, needs_approval
from agentflow.agents.approval import ask as ask_approval
from agentflow.agents.config import AgentConfig
from agentflow.agents.context import fit, prompt_counter
from agentflow.agents.loops import LoopDetection, LoopDetector
from agentflow.agents.prompts import PromptSet
from agentflow.agents.result import AgentResult, ErrorKind, StopReason, stop_text
from agentflow.agents.roles import load_agent_config
from agentflow.agents.schemas import FinalText, parse_output
from agentflow.agents.stream import AgentEvent, OnAgentEvent, TokenForwardingModel
from agentflow.agents.textproto import parse_tool_blocks
from agentflow.budget import Budget, BudgetExceeded, BudgetKind
from agentflow.errors import ConfigError, ModelError
from agentflow.events import Event
from agentflow.events.kinds import (
    AgentCompacted,
    AgentEnd,
    AgentLoop,
    AgentMaxTokensRaised,
    AgentStart,
    ApprovalRefused,
    LimitReached,
    ModelReplayed,
)
from agentflow.models.base import (
    ChatModel,
    ChatRequest,
    ChatResponse,
    Message,
    ToolCall,
    ToolSpec,
    declared,
    declared_tool_calling,
)
from agentflow.models.instrumented import InstrumentedModel
from agentflow.models.structured import OutputParseError
from agentflow.tools.context import ToolContext
from agentflow.tools.journal import args_digest
from agentflow.tools.journal import journal_key as make_journal_key

if TYPE_CHECKING:
    from agentflow.tools.journal import ToolJournal
    from agentflow.tools.registry import ToolRegistry

Task = str | Mapping[str, Any]


class Agent:
    """A configured model + prompt templates + tools + output schema. Stateless between runs: one agent can
    run many tasks, concurrently too."""

    def __init__(self, config: AgentConfig | str, *, model: ChatModel | None = None, tools: ToolRegistry | None = None,
                 overrides: Sequence[str] = (), output_type: type[BaseModel] | None = None, deps: Any = None) -> None:
        """`config` is an `AgentConfig`, a role name or a YAML path; `model`/`tools` replace the ones the
        config names (handy for tests and for sharing one model object between agents); `output_type`, a
        pydantic model class, replaces the config's `output_schema`; `deps`, the application's
        dependencies, reach the tools as `ctx.deps` (a run's own `deps=` takes precedence)."""
        self.config = (config if isinstance(config, AgentConfig) and not overrides
                       else load_agent_config(config, overrides))
        if output_type is not None and not (isinstance(output_type, type) and issubclass(output_type, BaseModel)):
            raise ConfigError(f"output_type {output_type!r} is not a pydantic model class")
        self.schema: type[BaseModel] = output_type or self.config.output_schema or FinalText
        self.prompts = PromptSet(self.config.prompt_dirs)
        self._model = model
        self._tools = tools
        self.deps = deps

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def model(self) -> ChatModel:
        if self._model is None:
            from agentflow.models.spec import load_model

            self._model = load_model(self.config.model)
        return self._model

    @property
    def tools(self) -> ToolRegistry:
        if self._tools is None:
            from agentflow.tools.registry import ToolRegistry

            self._tools = ToolRegistry.from_packs(self.config.tools)
        return self._tools

    def tool_specs(self) -> list[ToolSpec]:
        """Definitions of the tools this agent may call (loading its packs on first use)."""
        if self._tools is None and not self.config.tools:
            return []
        return self.tools.specs()

    def text_protocol(self) -> bool:
        """True when tool calls go through fenced ```tool blocks instead of the API's tool calling."""
        if self.config.tool_protocol != "auto":
            return self.config.tool_protocol == "text"
        return declared_tool_calling(self.model) is False

    def initial_messages(self, task: Task, tool_specs: list[ToolSpec]) -> list[Message]:
        """System prompt and task prompt, rendered from the agent's template files."""
        variables: dict[str, Any] = dict(task) if isinstance(task, Mapping) else {"task": task}
        schema = None if self.schema is FinalText else self.schema.model_json_schema()
        system = self.prompts.render(f"{self.config.prompt}.system.md", agent=self.name,
                                     tools=[spec.model_dump() for spec in tool_specs],
                                     text_protocol=self.text_protocol(), schema=schema,
                                     schema_name=self.schema.__name__)
        return [Message.system(system), Message.user(self.prompts.render(f"{self.config.prompt}.task.md", **variables))]

    async def run(self, task: Task, *, ctx: ToolContext | None = None, budget: Budget | None = None,
                  journal: ToolJournal | None = None, journal_key: str = "", on_event: OnAgentEvent | None = None,
                  deps: Any = None, approver: Approver | None = None) -> AgentResult:
        """Run the agent on `task` (a string, or a dict of the task template's variables).

        `on_event` (a function, sync or async) sees each model call (`step`), tool call (`tool`) and the end
        (`result`) as `AgentEvent`s. `budget` (else `ctx.budget`) is the run's shared budget: this run charges
        a child of it. Under a `journal`, each tool call is keyed by `journal_key` (the caller's prefix, e.g.
        `thread:node:step`), agent, loop step, call index, tool and arguments, so a resumed run replays effects
        that already happened. `deps` (else `ctx.deps`, else the agent's own) reach the tools as `ctx.deps`.
        `approver` asks a human about each call of a tool in `approve_tools` (`agentflow.agents.approval`);
        without one such calls are not run.
        """
        ctx = ctx or ToolContext()
        parent = budget or ctx.budget
        run_budget = parent.child() if parent is not None else Budget()
        deps = next((d for d in (deps, ctx.deps, self.deps) if d is not None), None)
        ctx = dataclasses.replace(ctx, budget=run_budget, deps=deps)
        return await _Run(self, ctx, run_budget, journal, journal_key, on_event, approver).loop(task)

    def run_sync(self, task: Task, *, ctx: ToolContext | None = None, budget: Budget | None = None,
                 on_event: OnAgentEvent | None = None, deps: Any = None) -> AgentResult:
        """`run` for synchronous code, on an event loop of its own; inside a running loop (async code,
        Jupyter) it raises: await `run` there."""
        from agentflow._sync import require_no_running_loop

        require_no_running_loop("Agent.run_sync", "agent.run(...)")
        return asyncio.run(self.run(task, ctx=ctx, budget=budget, on_event=on_event, deps=deps))

    async def run_stream(self, task: Task, *, ctx: ToolContext | None = None, budget: Budget | None = None,
                         deps: Any = None) -> AsyncIterator[AgentEvent]:
        """Run the agent on `task`, yielding `AgentEvent`s as they happen: `token` (model text as it is
        generated), `step`, `tool`, and last `result` (with the AgentResult). Leaving the loop early cancels
        the run."""
        queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        step = 0

        def token(text: str) -> None:
            queue.put_nowait(AgentEvent(kind="token", text=text, step=step + 1))

        def observe(event: AgentEvent) -> None:
            nonlocal step
            if event.kind == "step":
                step = event.step
            queue.put_nowait(event)

        forwarding = TokenForwardingModel(_uninstrumented(self.model), token)  # the run instruments it once
        streaming = Agent(self.config, model=forwarding, tools=self._tools,
                          output_type=self.schema if self.schema is not FinalText else None, deps=self.deps)

        async def drive() -> None:
            try:
                await streaming.run(task, ctx=ctx, budget=budget, on_event=observe, deps=deps)
            finally:
                queue.put_nowait(None)

        runner = asyncio.ensure_future(drive())
        try:
            while (event := await queue.get()) is not None:
                yield event
            await runner  # re-raises what the run raised
        finally:
            if not runner.done():
                runner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await runner


def _uninstrumented(model: ChatModel) -> ChatModel:
    """`model` without its `InstrumentedModel`s, for a run to instrument once (never charged twice)."""
    while isinstance(model, InstrumentedModel):
        model = model.inner
    return model


class _ContextFull(Exception):
    """The prompt does not fit the model's context window, even compacted."""


class _Run:
    """The state of one run of an agent; `loop` is the whole algorithm."""

    def __init__(self, agent: Agent, ctx: ToolContext, budget: Budget, journal: ToolJournal | None, key_prefix: str,
                 on_event: OnAgentEvent | None = None, approver: Approver | None = None) -> None:
        self.agent, self.cfg, self.ctx, self.budget = agent, agent.config, ctx, budget
        self.approver = approver
        self.journal, self.key_prefix, self.on_event = journal, key_prefix, on_event
        self.max_tokens = self.cfg.max_tokens
        self.finish_reason = "unknown"
        self.started = time.monotonic()
        self.text_protocol = agent.text_protocol()
        # a test model answers from the output schema, so it gets the schema even without `structured_output`
        self.model_reads_schema = declared(agent.model, "reads_response_schema", bool) is True
        # charges this run's budget and writes `model.call` events under the agent's name
        self.model = InstrumentedModel(_uninstrumented(agent.model), budget=budget, events=ctx.events,
                                       node_id=agent.name)
        self.messages: list[Message] = []
        self.steps = 0
        self.loops = LoopDetector(self.cfg.loop_guard)
        self.window = self.cfg.context.window or declared(agent.model, "context_window", int)
        self.count_tokens = prompt_counter(agent.model, self.cfg.context.chars_per_token)
        self.loop_error: str | None = None
        self.limit: BudgetKind | None = None
        """The budget limit that stopped the run (a `StopReason.BUDGET` stop)."""

    async def loop(self, task: Task) -> AgentResult:
        specs = self.agent.tool_specs()
        self.messages = self.agent.initial_messages(task, specs)
        self._emit(AgentStart(tools=[s.name for s in specs], text_protocol=self.text_protocol))
        retries_left = self.cfg.output_retries
        while True:
            stop = self._limit_reached(check_steps=True)
            if stop is not None:
                return await self._finish(stop)
            self.steps += 1
            try:
                reply = await self._call_model(specs)
            except ModelError as exc:
                return await self._finish(StopReason.ERROR, error=str(exc), kind="model_error")
            except _ContextFull as exc:
                return await self._finish(StopReason.CONTEXT, error=str(exc))
            except BudgetExceeded as exc:  # refused before it started, or cut at the wall-clock limit
                if exc.refused:
                    self.steps -= 1  # a refused call was never made: `steps` counts the calls made
                return await self._finish(self._budget_stop(exc.kind))
            if reply is None:
                return await self._finish(StopReason.WALL_TIME)

            calls = (parse_tool_blocks(reply.content, id_prefix=f"s{self.steps}") if self.text_protocol
                     else reply.tool_calls)
            await self._notify(AgentEvent(
                kind="step", step=self.steps, text=reply.content or "",
                tool_calls=[{"name": c.name, "arguments": c.arguments} for c in calls or []],
            ))
            self.messages.append(Message.assistant(reply.content) if self.text_protocol else reply)
            if calls:
                stop = await self._run_tools(calls)
                if stop is not None:
                    return await self._finish(stop)
                continue

            looping = self.loops.observe_answer(reply.content or "")
            try:
                output = parse_output(self.agent.schema, reply.content)
            except OutputParseError as exc:
                if looping is not None:
                    nudge = self._on_loop(looping)
                    if nudge is None:
                        return await self._finish(StopReason.LOOP, error=f"loop: {looping.what} {looping.count} times")
                    self.messages.append(Message.user(nudge))
                elif self.finish_reason == "length":  # cut by max_tokens: not the model's mistake to correct
                    if not self._raise_max_tokens():
                        limit = self.max_tokens or "the server default"
                        return await self._finish(StopReason.ERROR, kind="output_cut", error=(
                            f"the final answer was cut at the token limit ({limit} tokens) before it was "
                            "complete; raise max_tokens"))
                    self.messages.pop()
                elif retries_left <= 0:
                    why = f"final answer not readable as {self.agent.schema.__name__}: {exc}"
                    return await self._finish(StopReason.ERROR, kind="bad_output", error=why)
                else:
                    retries_left -= 1
                    self.messages.append(Message.user(self.agent.prompts.render(
                        "_output_retry.md", error=str(exc), schema_name=self.agent.schema.__name__)))
                continue
            return await self._finish(StopReason.DONE, output=output)

    def _raise_max_tokens(self) -> bool:
        """After a reply cut by max_tokens: double the limit (up to 4x the configured one) and say whether to
        ask again. Without a configured limit the cut came from the server's own, which we cannot raise."""
        configured = self.cfg.max_tokens
        if configured is None or self.max_tokens is None or self.max_tokens >= 4 * configured:
            return False
        self.max_tokens *= 2
        self._emit(AgentMaxTokensRaised(max_tokens=self.max_tokens))
        return True

    async def _notify(self, event: AgentEvent) -> None:
        maybe = self.on_event(event) if self.on_event is not None else None
        if inspect.isawaitable(maybe):
            await maybe

    def _limit_reached(self, *, check_steps: bool) -> StopReason | None:
        if check_steps and self.steps >= self.cfg.step_limit:
            return StopReason.STEP_LIMIT
        if self._wall_left() == 0:
            return StopReason.WALL_TIME
        kind = self.budget.exceeded()
        return self._budget_stop(kind) if kind is not None else None

    def _budget_stop(self, kind: BudgetKind) -> StopReason:
        self._emit(LimitReached(limit=kind, used=self.budget.used.model_dump()))
        self.limit = kind
        return StopReason.BUDGET

    def _wall_left(self) -> float | None:
        if self.cfg.wall_time_s is None:
            return None
        return max(0.0, self.cfg.wall_time_s - (time.monotonic() - self.started))

    async def _call_model(self, specs: list[ToolSpec]) -> Message | None:
        """The model's reply, or None when the wall-time limit ran out while waiting for it."""
        schema = self.agent.schema
        # A forced JSON reply would leave a text-protocol model no way to write its tool blocks.
        structured = ((self.cfg.structured_output or self.model_reads_schema) and schema is not FinalText
                      and not (self.text_protocol and specs))
        request = ChatRequest(messages=list(self.messages), tools=[] if self.text_protocol else specs,
                              response_schema=schema.model_json_schema() if structured else None,
                              response_schema_name=schema.__name__ if structured else None,
                              temperature=self.cfg.temperature, max_tokens=self.max_tokens)
        request = await self._fit_window(request)
        key = self._reply_key(request)
        journaled = self.journal.get_reply(key) if key is not None else None  # type: ignore[union-attr]
        if journaled is not None:  # this node ran before a crash: its reply is taken, the model not asked again
            response = ChatResponse.model_validate_json(journaled)
            self._emit(ModelReplayed(step=self.steps))
        else:
            try:  # wall time also bounds a model call in flight; asyncio.timeout(None) means no limit
                async with asyncio.timeout(self._wall_left()) as deadline:
                    response = await self.model.chat(request)
            except TimeoutError:
                if deadline.expired():
                    return None
                raise
            if key is not None:
                self.journal.put_reply(key, response.model_dump_json())  # type: ignore[union-attr]
        self.finish_reason = response.choices[0].finish_reason
        return response.message

    async def _fit_window(self, request: ChatRequest) -> ChatRequest:
        """The request compacted to fit the model's context window (event `agent.compacted`); `_ContextFull`
        when it cannot be: a prompt the server would reject for its length is never sent. The run's own
        messages stay whole (the result has the whole conversation)."""
        if self.window is None:
            return request
        fitted, record, fits = await fit(request, self.cfg.context, self.window, self.count_tokens)
        if record is not None:  # None: it fitted as it was
            self._emit(AgentCompacted(step=self.steps, fits=fits, **record))
            if not fits:
                raise _ContextFull(
                    f"the conversation needs {record['tokens_after']} tokens plus {record['reply_tokens']} "
                    f"for the reply, more than the model's context window of {self.window} tokens, even "
                    "after compaction; raise the window or shorten the task")
        return fitted

    def _reply_key(self, request: ChatRequest) -> str | None:
        """Where the reply to `request` is journaled: the caller's prefix (thread:node:step), this agent, its
        loop step and the request's digest (a request that differs on resume is asked anew). None without a
        journal that keeps replies."""
        if self.journal is None or not self.key_prefix or not hasattr(self.journal, "get_reply"):
            return None
        digest = args_digest(request.model_dump(mode="json", exclude={"extra"}))
        return f"{self.key_prefix}:{self.agent.name}:{self.steps}:reply:{digest}"

    async def _run_tools(self, calls: list[ToolCall]) -> StopReason | None:
        """Run the calls in order, appending one result per call; stop early when a limit is reached (the
        calls not run still get a result, as chat APIs require one per call)."""
        results: list[tuple[ToolCall, bool, str]] = []
        stop: StopReason | None = None
        nudges: list[str] = []
        for index, call in enumerate(calls):
            stop = stop or self._limit_reached(check_steps=False)
            if stop is not None:
                results.append((call, False, f"not run: the agent stopped ({stop_text(stop, self.limit)})"))
                continue
            if call.arguments_error is not None and not call.name:
                results.append((call, False, f"ToolError: {call.arguments_error}"))
                continue
            if needs_approval(self.cfg.approve_tools, call.name):
                approved, why_not = self._approve(call)
                if not approved:
                    results.append((call, False, why_not))
                    continue
            key = None if self.journal is None else make_journal_key(
                self.key_prefix, self.agent.name, self.steps, index, call.name, call.arguments)
            try:
                result = await self.agent.tools.execute(call, self.ctx, journal=self.journal, key=key,
                                                        node_id=self.agent.name)
            except BudgetExceeded as exc:  # refused, cut at the wall-clock limit, or raised by the tool itself
                stop = self._budget_stop(exc.kind)
                results.append((call, False, f"not run: the agent stopped ({stop_text(stop, self.limit)})"))
                continue
            results.append((call, result.ok, result.text))
            await self._notify(AgentEvent(kind="tool", step=self.steps, tool=call.name, ok=result.ok, text=result.text))
            looping = self.loops.observe_call(call.name, call.arguments, result.ok, result.text)
            if looping is not None:
                nudge = self._on_loop(looping)
                if nudge is None:
                    stop, self.loop_error = StopReason.LOOP, f"loop: {looping.what} {looping.count} times"
                elif nudge not in nudges:
                    nudges.append(nudge)
        if self.text_protocol:
            text = self.agent.prompts.render("_tool_results.md", results=[{"name": c.name or "?", "ok": ok, "text": t}
                                                                          for c, ok, t in results])
            # One user message: chat templates that require turns to alternate reject two in a row.
            self.messages.append(Message.user("\n\n".join([text, *nudges])))
        else:
            self.messages.extend(Message.tool(c.id, c.name, t) for c, _, t in results)
            if nudges:
                self.messages.append(Message.user("\n\n".join(nudges)))
        return stop

    def _approve(self, call: ToolCall) -> tuple[bool, str]:
        """Whether a human approved exactly this call (asked through the run's approver)."""
        if self.approver is None:
            self._emit(ApprovalRefused(tool=call.name, call_hash=call_hash(call.name, call.arguments),
                                       reason="nobody to ask: the run has no approver"))
            return False, f"not run: {call.name} needs a human's approval, and this run has nobody to ask"
        return ask_approval(self.agent.name, call, self._emit, self.approver)

    def _on_loop(self, detection: LoopDetection) -> str | None:
        """Record a detected loop (event `agent.loop`); the nudge to send the model, or None to stop the run."""
        guard = self.cfg.loop_guard
        nudge = bool(guard.nudge_message) and self.loops.should_nudge()
        action = "nudge" if nudge else guard.action if guard.action != "nudge" else "stop"
        self._emit(AgentLoop(loop=detection.kind, what=detection.what, count=detection.count, action=action,
                             step=self.steps))
        return detection.nudge(guard.nudge_message) if nudge else None

    def _best_output(self) -> BaseModel | None:
        """The latest assistant reply that parses as the output schema (used when the run stops early)."""
        if self.agent.schema is FinalText:
            return None
        for message in reversed(self.messages):
            if message.role == "assistant" and message.content:
                with contextlib.suppress(OutputParseError):
                    return parse_output(self.agent.schema, message.content)
        return None

    async def _finish(self, stop: StopReason, *, output: BaseModel | None = None, error: str | None = None,
                      kind: ErrorKind | None = None) -> AgentResult:
        """The run's result (event `agent.end`; the `result` AgentEvent)."""
        if output is None:
            output = self._best_output()
        if kind is None and stop is not StopReason.DONE:
            kind = "loop" if stop is StopReason.LOOP else "limit"
        if error is None and stop is StopReason.LOOP:
            error = self.loop_error
        result = AgentResult(error_kind=kind, output=output, messages=self.messages, steps=self.steps,
                             stop_reason=stop, limit=self.limit if stop is StopReason.BUDGET else None,
                             usage=self.budget.used, error=error)
        self._emit(AgentEnd(stop_reason=result.stop, steps=result.steps, usage=result.usage.model_dump(),
                            error=result.error, error_kind=result.error_kind, has_output=output is not None))
        await self._notify(AgentEvent(kind="result", step=self.steps, result=result))
        return result

    def _emit(self, event: Event) -> None:
        if self.ctx.events is not None:
            self.ctx.events.write(event.model_copy(update={"node_id": self.agent.name}))

