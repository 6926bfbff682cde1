"""Ending a run: the run record, its replay snapshot (spilled to S3 when large), messages, metrics."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from agent_core.domain.events import Event, RunError
from agent_core.domain.ids import sortable_id
from agent_core.domain.models import Message, Role, RunStatus, ToolCallRecord, TurnResult, Usage
from agent_core.observability import logger, metrics
from agent_core.runtime.turn import PreparedTurn

SNAPSHOT_INLINE_BYTES = 300 * 1024


@dataclass
class RunOutcome:
    """What a run produced so far."""

    messages: list[Message] = field(default_factory=list)
    records: list[ToolCallRecord] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    final_text: str = ""
    partial_text: str = ""
    first_token_at: float | None = None
    answered_by: str | None = None  # `provider:model` of the last model call, when the LLM reports it


def snapshot_prefix(chat_id: str) -> str:
    """Every spilled replay snapshot of one chat (deleted with the chat)."""
    return f"snapshots/{chat_id}/"


def snapshot_key(chat_id: str, run_id: str) -> str:
    return f"{snapshot_prefix(chat_id)}{run_id}.json"


async def _store_snapshot(turn: PreparedTurn, entries: list[dict[str, Any]]) -> None:
    run, blobs = turn.run, turn.deps.blobs
    encoded = json.dumps(entries, ensure_ascii=False).encode()
    if len(encoded) <= SNAPSHOT_INLINE_BYTES:
        run.snapshot = entries
        return
    if blobs is not None:
        key = snapshot_key(run.chat_id, run.run_id)
        await blobs.put(key, encoded, "application/json")
        run.snapshot_key, run.snapshot = key, None
        return
    # No blob store (store:false): keep the envelope of the run, not its text.
    logger.warning("snapshot too large to keep inline", extra={"runId": run.run_id, "bytes": len(encoded)})
    run.snapshot = [e for e in entries if not str(e.get("type", "")).endswith(".snapshot")]


async def persist_run(
    turn: PreparedTurn,
    outcome: RunOutcome,
    status: RunStatus,
    terminal: Event,
    finish_reason: str,
    entries: list[dict[str, Any]],
) -> None:
    """Write messages, the run record and snapshot, and release the lease, in one transaction."""
    run = turn.run
    run.status = status
    run.usage = outcome.usage
    run.ended_at = turn.clock_ms()
    run.answered_by = outcome.answered_by
    if isinstance(terminal, RunError):
        run.error_code, run.error_message = terminal.code, terminal.message
    if outcome.first_token_at is not None:
        run.first_token_ms = int(outcome.first_token_at * 1000)
    messages = outcome.messages
    if status == RunStatus.COMPLETED:
        run.result = TurnResult(
            request_id=run.request_id,
            assistant_message=outcome.final_text,
            tool_calls=outcome.records,
            finish_reason=finish_reason,
            run_id=run.run_id,
            chat_id=run.chat_id,
        )
        turn.result = run.result
    elif status == RunStatus.CANCELLED and outcome.partial_text:
        # A cancelled answer is kept as far as it went: the user saw it.
        messages = [*messages, _assistant(turn, outcome.partial_text)]
    else:
        # No half-written assistant message after a failure; complete tool-call/result pairs stay.
        messages = [m for m in messages if m.role != Role.ASSISTANT or m.tool_calls]
    await _store_snapshot(turn, entries)
    await turn.deps.store.finish_turn(run, messages, run.ended_at)
    _emit_metrics(turn)


def _assistant(turn: PreparedTurn, text: str) -> Message:
    run = turn.run
    at = turn.clock_ms()
    return Message(
        id=sortable_id(at),
        chat_id=run.chat_id,
        role=Role.ASSISTANT,
        content=text,
        run_id=run.run_id,
        request_id=run.request_id,
        created_at=at,
    )


def _emit_metrics(turn: PreparedTurn) -> None:
    run = turn.run
    if run.first_token_ms is not None:
        metrics.add_metric(name="TimeToFirstToken", unit=MetricUnit.Milliseconds, value=run.first_token_ms)
    metrics.add_metric(name="PromptTokens", unit=MetricUnit.Count, value=run.usage.prompt_tokens)
    metrics.add_metric(name="CompletionTokens", unit=MetricUnit.Count, value=run.usage.completion_tokens)
