"""ToolService: governance around every tool call, in a fixed order (docs/design.md), with one audit line each."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from pydantic import ValidationError

from agent_core.config import Settings
from agent_core.domain.approval import APPROVAL_WIRES, ApprovalOutcome, ApprovalPolicy, parse_policy, strictest
from agent_core.domain.models import ToolCall, ToolStatus
from agent_core.observability import NAMESPACE, logger, write_audit_line
from agent_core.tools.base import Tool, ToolContext, ToolFailure
from agent_core.tools.registry import ToolRegistry
from agent_core.tracing import tool_outcome, tool_span

AuditSink = Callable[[dict[str, Any]], None]


@dataclass
class ToolExecution:
    """The governed outcome of one call: what the model sees and what the audit records."""

    call: ToolCall
    status: ToolStatus
    reason: str = ""
    output: Any = None
    message: str = ""
    duration_ms: int = 0
    approval: ApprovalOutcome | None = None  # how the call's approval ended, when it needed one

    def model_content(self) -> str:
        """The TOOL message content: the output, or an error object naming status and reason."""
        if self.status == ToolStatus.OK:
            return self.output if isinstance(self.output, str) else json.dumps(self.output, ensure_ascii=False)
        error = {"status": self.status.value, "reason": self.reason, "message": self.message or self.reason}
        return json.dumps({"error": error}, ensure_ascii=False)

    def result_payload(self) -> Any:
        """The `result` of a tool.result event."""
        if self.status == ToolStatus.OK or self.output is not None:
            return self.output
        return {"error": self.message or self.reason}


def _granted(required: frozenset[str], granted: list[str]) -> bool:
    return "*" in granted or required <= set(granted)


def _count_metric(status: str) -> None:
    try:
        with single_metric(name="ToolCalls", unit=MetricUnit.Count, value=1, namespace=NAMESPACE) as metric:
            metric.add_dimension(name="status", value=status)
    except Exception as exc:  # metrics must never break a tool call
        logger.warning("metric emit failed", extra={"error": str(exc)})


class ToolService:
    def __init__(self, registry: ToolRegistry, settings: Settings, audit: AuditSink | None = None) -> None:
        self.registry = registry
        self.settings = settings
        self._audit = audit or write_audit_line
        self.allowed: set[str] | None = None  # an agent's tool list; None: every registered tool
        # Approval policies by tool name: the deployment's (AGENT_TOOL_APPROVAL), then an agent's.
        self.approvals: dict[str, list[ApprovalPolicy]] = {
            name: [parse_policy(spec)] for name, spec in settings.tool_approval.items()
        }

    def scoped(
        self, registry: ToolRegistry, allowed: set[str], approvals: dict[str, ApprovalPolicy] | None = None
    ) -> ToolService:
        """The same governance over an agent's registry, allowing only the agent's tools, with its policies."""
        service = ToolService(registry, self.settings, self._audit)
        service.allowed = allowed
        service.approvals = {name: list(policies) for name, policies in self.approvals.items()}
        for name, policy in (approvals or {}).items():
            service.approvals.setdefault(name, []).append(policy)
        return service

    def permits(self, tool: Tool) -> bool:
        """Whether governance could ever let this tool run (AGENT_TOOLS_ALLOWED, permissions granted)."""
        s = self.settings
        allowed = "*" in s.tools_allowed or tool.name in s.tools_allowed
        return allowed and _granted(tool.permissions, s.permissions_granted)

    def gated(self, name: str) -> bool:
        """Whether some call of this tool may wait for approval (a policy other than `never`)."""
        return any(policy.gated for policy in self.approvals.get(name, []))

    def always_gated(self, name: str) -> bool:
        """Whether every call of this tool waits for approval (an `always` policy)."""
        return any(policy.always for policy in self.approvals.get(name, []))

    def approval_reason(self, call: ToolCall) -> str | None:
        """Why this call needs a person's approval before it runs, or None: it runs (or is refused) without.

        A call governance refuses anyway (not allowed, invalid arguments ...) is never put to a person.
        """
        if not self.gated(call.name):
            return None
        admitted = self._admit(call, self.registry.get(call.name))
        return None if isinstance(admitted, ToolExecution) else self._reason(call.name, admitted[1])

    def _reason(self, name: str, raw_args: Any) -> str | None:
        return strictest(name, raw_args, self.approvals.get(name, []))

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolExecution:
        started = time.perf_counter()
        tool = self.registry.get(call.name)
        approval: list[ApprovalOutcome] = []
        try:
            with tool_span(call.name, call.id, tool.kind if tool is not None else None) as span:
                execution = await self._governed(call, tool, ctx, approval)
                tool_outcome(span, execution.status.value, execution.reason)
        except asyncio.CancelledError:
            if approval and approval[0].decision == "cancelled":  # the run ended while the call awaited a person
                cancelled = ToolExecution(call, ToolStatus.DENIED, "approval_cancelled", approval=approval[0])
                self._record(cancelled, tool, ctx)
            raise
        execution.duration_ms = int((time.perf_counter() - started) * 1000)
        self._record(execution, tool, ctx)
        return execution

    def _admit(self, call: ToolCall, tool: Tool | None) -> ToolExecution | tuple[Any, Any]:
        """The governance before a call may run: its parsed and raw arguments, or the refusal."""
        s = self.settings
        if tool is None:
            return ToolExecution(call, ToolStatus.ERROR, "not_registered", message=f"no tool named {call.name!r}")
        if "*" not in s.tools_allowed and tool.name not in s.tools_allowed:
            return ToolExecution(call, ToolStatus.DENIED, "not_allowed", message=f"{tool.name} is not allowed")
        if self.allowed is not None and tool.name not in self.allowed:
            return ToolExecution(
                call, ToolStatus.DENIED, "not_allowed", message=f"{tool.name} is not this agent's tool"
            )
        if not _granted(tool.permissions, s.permissions_granted):
            missing = sorted(tool.permissions - set(s.permissions_granted))
            return ToolExecution(call, ToolStatus.DENIED, "missing_permission", message=f"requires {missing}")
        raw = call.arguments or "{}"
        if len(raw.encode("utf-8")) > s.tool_max_input_bytes:
            return ToolExecution(call, ToolStatus.ERROR, "input_too_large", message="arguments exceed the input limit")
        try:
            raw_args = json.loads(raw)
            return tool.parse_args(raw_args), raw_args
        except (ValueError, ValidationError) as exc:
            return ToolExecution(call, ToolStatus.ERROR, "invalid_arguments", message=str(exc)[:500])

    async def _approved(
        self, call: ToolCall, asked: str, ctx: ToolContext, approval: list[ApprovalOutcome]
    ) -> ToolExecution | None:
        """Wait for a person's decision: None when approved, else the refusal the model is told."""
        approval.append(ApprovalOutcome("cancelled", asked))
        timeout_ms = self.settings.tool_approval_timeout_ms
        if ctx.approvals is None:
            outcome = ApprovalOutcome("unavailable", asked)
        else:
            outcome = dataclasses.replace(await ctx.approvals.await_decision(call.id, timeout_ms), asked=asked)
        approval[0] = outcome
        if outcome.decision == "approved":
            return None
        if outcome.decision == "denied":
            said = f": {outcome.reason}" if outcome.reason else ""
            message = f"the user denied this call{said}; it did not run"
            return ToolExecution(call, ToolStatus.DENIED, "approval_denied", message=message, approval=outcome)
        if outcome.decision == "timeout":
            message = f"nobody approved this call within {timeout_ms} ms; it did not run"
            return ToolExecution(call, ToolStatus.TIMEOUT, "approval_timeout", message=message, approval=outcome)
        if outcome.decision == "interrupted":
            message = "this call was approved, then the server stopped: whether it ran is unknown; it is not run again"
            return ToolExecution(call, ToolStatus.ERROR, "approval_interrupted", message=message, approval=outcome)
        message = f"this call needs approval ({asked}), which cannot be given here ({APPROVAL_WIRES}); it did not run"
        return ToolExecution(call, ToolStatus.DENIED, f"approval_{outcome.decision}", message=message, approval=outcome)

    async def _governed(
        self, call: ToolCall, tool: Tool | None, ctx: ToolContext, approval: list[ApprovalOutcome]
    ) -> ToolExecution:
        s = self.settings
        admitted = self._admit(call, tool)
        if isinstance(admitted, ToolExecution):
            return admitted
        assert tool is not None
        args, raw_args = admitted
        asked = self._reason(tool.name, raw_args)
        if asked is not None and (refused := await self._approved(call, asked, ctx, approval)) is not None:
            return refused
        timeout_ms = tool.effective_timeout_ms(s)
        execution = await self._run(call, tool, args, ctx, timeout_ms)
        execution.approval = approval[0] if approval else None
        return execution

    async def _run(self, call: ToolCall, tool: Tool, args: Any, ctx: ToolContext, timeout_ms: int) -> ToolExecution:
        s = self.settings
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                output = await tool.run(args, dataclasses.replace(ctx, tool_call_id=call.id))
        except TimeoutError:
            return ToolExecution(call, ToolStatus.TIMEOUT, "timeout", message=f"no result within {timeout_ms} ms")
        except ToolFailure as failure:
            status = ToolStatus(failure.status)
            return ToolExecution(call, status, failure.reason, output=failure.result, message=failure.message)
        except Exception as exc:
            logger.exception("tool raised", extra={"toolName": tool.name})
            return ToolExecution(call, ToolStatus.ERROR, "tool_error", message=type(exc).__name__)
        try:
            encoded = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        except (TypeError, ValueError):
            return ToolExecution(call, ToolStatus.ERROR, "tool_error", message="result is not JSON")
        if len(encoded.encode("utf-8")) > s.tool_max_output_bytes:
            return ToolExecution(call, ToolStatus.ERROR, "output_too_large", message="result exceeds the output limit")
        return ToolExecution(call, ToolStatus.OK, "", output=output)

    def _record(self, execution: ToolExecution, tool: Tool | None, ctx: ToolContext) -> None:
        self._audit(
            {
                "requestId": ctx.request_id,
                "conversationId": ctx.conversation_id,
                "toolName": execution.call.name,
                "toolKind": tool.kind if tool is not None else None,  # backend, mcp, frontend; None: not registered
                "toolCallId": execution.call.id,
                "status": execution.status.value,
                "reason": execution.reason,
                "durationMs": execution.duration_ms,
                **({"approval": execution.approval.audit()} if execution.approval is not None else {}),
            }
        )
        if execution.status != ToolStatus.OK:
            _count_metric(execution.status.value)
