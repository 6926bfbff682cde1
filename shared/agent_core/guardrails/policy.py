"""An agent's `guardrails` block: which checks run, with which adapter, and what a match does."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

Stage = Literal["input", "output", "tool_arguments", "tool_results"]
Action = Literal["block", "mask"]
Detector = Literal["email", "phone", "card", "aws_access_key"]
DETECTORS: tuple[Detector, ...] = ("email", "phone", "card", "aws_access_key")


class _Def(BaseModel):
    model_config = ConfigDict(populate_by_name=True, alias_generator=to_camel, extra="forbid")


class GuardCheck(_Def):
    """One check: `block` ends the run (`guardrail_intervened`); `mask` replaces what matched and goes on."""

    action: Action = "mask"


class GuardPattern(_Def):
    """A custom regular expression of the built-in adapter; a match is masked as `{NAME}`."""

    name: str = Field(pattern=r"^[A-Z][A-Z0-9_]{0,31}$")
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from exc
        if compiled.match(""):
            raise ValueError("the pattern matches the empty string")
        return value


class GuardrailPolicy(_Def):
    """`guardrails:` in an agent definition. A check that is absent does not run."""

    adapter: Literal["builtin", "bedrock"] = "builtin"
    detectors: list[Detector] = Field(default_factory=lambda: list(DETECTORS))  # built-in adapter only
    patterns: list[GuardPattern] = Field(default_factory=list)  # built-in adapter only
    mask_style: Literal["label", "stars"] = "label"  # `{EMAIL}` or `***`
    input: GuardCheck | None = None
    output: GuardCheck | None = None
    tool_arguments: GuardCheck | None = None
    tool_results: GuardCheck | None = None

    @field_validator("input", "output", "tool_arguments", "tool_results", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        """`output: mask` is `output: {action: mask}`."""
        return {"action": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _something_checked(self) -> GuardrailPolicy:
        if not any(self.check(stage) for stage in ("input", "output", "tool_arguments", "tool_results")):
            raise ValueError("guardrails name no check (input, output, toolArguments, toolResults)")
        return self

    def check(self, stage: Stage) -> GuardCheck | None:
        found: GuardCheck | None = getattr(self, stage)
        return found
