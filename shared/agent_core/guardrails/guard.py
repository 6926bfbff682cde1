"""One agent's guardrail checks: scan a text for a stage, then block (raise) or mask it.

`Guardrails` (one per process, in RunDeps) gives each agent its `Guard`, sharing one Bedrock client.
Every check is an `apply_guardrail {stage}` span (agent_core/tracing.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_core.config import Settings
from agent_core.errors import GuardrailIntervened
from agent_core.guardrails.bedrock import BedrockGuardrailAdapter
from agent_core.guardrails.detectors import BuiltinAdapter
from agent_core.guardrails.findings import Finding, GuardrailAdapter, Source, masked
from agent_core.guardrails.policy import GuardrailPolicy, Stage
from agent_core.tracing import guardrail_outcome, guardrail_span

SOURCES: dict[Stage, Source] = {
    "input": "INPUT",
    "output": "OUTPUT",
    "tool_arguments": "OUTPUT",  # the model wrote them
    "tool_results": "INPUT",  # they go to the model
}
# What a block says: the check, never the text.
BLOCKED: dict[Stage, str] = {
    "input": "the message was refused by the agent's guardrail",
    "output": "the answer was stopped by the agent's guardrail",
    "tool_arguments": "a tool call was stopped by the agent's guardrail (its arguments)",
    "tool_results": "a tool call was stopped by the agent's guardrail (its result)",
}


@dataclass
class Guard:
    """The checks of one agent's policy over one adapter."""

    policy: GuardrailPolicy
    adapter: GuardrailAdapter

    def checks(self, stage: Stage) -> bool:
        return self.policy.check(stage) is not None

    async def scan(self, stage: Stage, text: str) -> list[Finding]:
        """The findings to mask in `text`; raises GuardrailIntervened when the stage's check blocks."""
        check = self.policy.check(stage)
        if check is None or not text:
            return []
        with guardrail_span(stage, self.adapter.name, len(text)) as span:
            findings = await self.adapter.scan(text, SOURCES[stage])
            labels = sorted({f.label for f in findings})
            blocks = bool(findings) and (check.action == "block" or any(f.blocked for f in findings))
            guardrail_outcome(span, "block" if blocks else "mask" if findings else "none", labels)
        if blocks:
            raise GuardrailIntervened(BLOCKED[stage], data={"stage": stage})
        return findings

    def mask(self, text: str, findings: list[Finding]) -> str:
        return masked(text, findings, self.policy.mask_style)

    async def screen(self, stage: Stage, text: str) -> str:
        """`text` as the stage lets it through: unchanged, masked, or not at all (GuardrailIntervened)."""
        return self.mask(text, await self.scan(stage, text))

    async def screen_value(self, stage: Stage, value: Any) -> Any:
        """A tool result (a string, or JSON) screened as its JSON text; masked JSON is read back when it still
        parses (a replacement inside a string keeps it valid), else the masked text is the value."""
        if isinstance(value, str) or value is None:
            return await self.screen(stage, value) if value else value
        text = json.dumps(value, ensure_ascii=False)
        findings = await self.scan(stage, text)
        if not findings:
            return value
        shown = self.mask(text, findings)
        try:
            return json.loads(shown)
        except ValueError:
            return shown


# What an agent with no `guardrails` block gets when AGENT_GUARDRAIL_ID names a Bedrock guardrail.
DEFAULT_POLICY = GuardrailPolicy(adapter="bedrock", input={"action": "mask"}, output={"action": "mask"})


@dataclass
class Guardrails:
    """Every agent's guard; the Bedrock adapter (and its client) shared by all."""

    settings: Settings
    bedrock_client: Callable[[], Any] | None = None
    _bedrock: BedrockGuardrailAdapter | None = field(default=None, init=False)

    def validate(self, policies: list[GuardrailPolicy]) -> None:
        """Refuse to start with a Bedrock policy and no guardrail id."""
        if any(p.adapter == "bedrock" for p in policies) and not self.settings.guardrail_id:
            raise ValueError("an agent's guardrails use the bedrock adapter but AGENT_GUARDRAIL_ID is not set")

    def for_policy(self, policy: GuardrailPolicy | None) -> Guard | None:
        """The guard of an agent's policy; an agent without one is checked by the configured Bedrock guardrail
        (AGENT_GUARDRAIL_ID), on its input and output (mask), or not at all."""
        if policy is None:
            if not self.settings.guardrail_id:
                return None
            policy = DEFAULT_POLICY
        return Guard(policy, self._adapter(policy))  # cheap: the Bedrock adapter (and its client) is shared

    def _adapter(self, policy: GuardrailPolicy) -> GuardrailAdapter:
        if policy.adapter == "bedrock":
            if self._bedrock is None:
                self._bedrock = BedrockGuardrailAdapter(self.settings, self.bedrock_client)
            return self._bedrock
        return BuiltinAdapter.of(policy.detectors, policy.patterns)
