"""Output schemas of the built-in roles, and reading an agent's final answer as its schema (`parse_output`)."""

from __future__ import annotations

from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from agentflow.models.structured import OutputParseError, parse_structured

OutputT = TypeVar("OutputT", bound=BaseModel)


class _Output(BaseModel):
    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)


class PlanStep(_Output):
    """One step of a plan."""

    description: str
    """What to do in this step."""
    files: list[str] = Field(default_factory=list)
    """Files the step is expected to read or change."""


class Plan(_Output):
    """The planner's output: ordered steps that solve the task."""

    goal: str = ""
    """The task restated in one sentence."""
    steps: list[PlanStep] = Field(min_length=1)
    """Steps in the order they should be carried out."""


Severity = Literal["critical", "major", "minor", "nit"]


class Issue(_Output):
    """One problem the critic found."""

    severity: Severity
    """How bad it is: critical (wrong or broken), major, minor, nit."""
    location: str
    """Where: `path`, `path:line` or a symbol name."""
    description: str
    """What is wrong and why."""
    suggestion: str = ""
    """How to fix it, if obvious."""


class Critique(_Output):
    """The critic's output: the issues found (empty when the work looks right)."""

    issues: list[Issue] = Field(default_factory=list)
    """Issues found, most severe first."""
    summary: str = ""
    """Overall judgement in a sentence or two."""

    @property
    def blocking(self) -> list[Issue]:
        """Issues that must be fixed before the work can be accepted (critical or major)."""
        return [i for i in self.issues if i.severity in ("critical", "major")]


class Verdict(_Output):
    """The verifier's output: passed or failed, and the evidence for it."""

    verdict: Literal["passed", "failed"]
    """Whether the work solves the task."""
    evidence: list[str] = Field(min_length=1)
    """Observations that support the verdict (test output lines, file contents, commands run)."""

    @property
    def passed(self) -> bool:
        return self.verdict == "passed"


class CoderReport(_Output):
    """The coder's output. Its real output is its tool effects (edits in the sandbox); this reports on them."""

    summary: str
    """What was changed and why."""
    done: bool
    """True when the coder believes the task is complete."""


class FinalText(_Output):
    """Output of an agent configured without a schema: its final answer as text."""

    text: str


def parse_output(schema: type[OutputT], text: str | None) -> OutputT:
    """Validate the reply `text` as `schema`; raises OutputParseError with a message the model can act on."""
    if schema is FinalText:
        if not (text or "").strip():
            raise OutputParseError("the reply is empty")
        return schema.model_validate({"text": (text or "").strip()})
    return parse_structured(text or "", schema)
