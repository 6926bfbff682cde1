"""Ending a run: the run record with its replay snapshot, messages, metrics (the store decides where each lives)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from agent_core.domain.events import Event, RunError
from agent_core.domain.ids import sortable_id
from agent_core.domain.models import Message, Role, RunStatus, ToolCallRecord, TurnResult, Usage
from agent_core.observability import metrics
from agent_core.runtime.release import release_failed_run
from agent_core.runtime.turn import PreparedTurn
from agent_core.store.retry import retry_write, write_backoff
from agent_core.usage.meter import enqueue_usage, run_usage_job


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


async def persist_run(
    turn: PreparedTurn,
    outcome: RunOutcome,
    status: RunStatus,
    terminal: Event,
    finish_reason: str,
    entries: list[dict[str, Any]],
) -> None:
    """Write messages, the run record and snapshot, and release the lease, in one transaction.

    Retried with backoff on transient storage failures (the write is idempotent); raises when it finally
    fails, and the caller then ends the run with `run.error` and `abandon_run`.
    """
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
    elif status == RunStatus.CANCELLED and outcome.partial_text:
        # A cancelled answer is kept as far as it went: the user saw it.
        messages = [*messages, _assistant(turn, outcome.partial_text)]
    else:
        # No half-written assistant message after a failure; complete tool-call/result pairs stay.
        messages = [m for m in messages if m.role != Role.ASSISTANT or m.tool_calls]
    run.snapshot = entries  # the store keeps it whole, in S3 when it cannot fit the run's item
    # Everything above is fixed before the first attempt (ids, times), so every retry writes the same items.
    backoff = write_backoff(turn.deps.settings)
    await retry_write(lambda: turn.deps.turns.finish_turn(run, messages, run.ended_at or 0), backoff, "finish_turn")
    turn.result = run.result
    _emit_metrics(turn)
    # The ledger record, queued in this process: written after the answer is sent, once per run.
    if turn.reservation is not None:
        queue = turn.deps.in_process or turn.deps.work_queue
        await enqueue_usage(queue, run_usage_job(run, turn.reservation, len(outcome.records)))


async def abandon_run(turn: PreparedTurn, error: RunError, entries: list[dict[str, Any]]) -> None:
    """The end could not be stored: record the run as failed with a small snapshot and free the lease.

    Best effort (storage may still be failing): the lease then expires on its own, as it is no longer renewed.
    """
    turn.run.snapshot = entries
    turn.result = None
    await release_failed_run(turn.deps, turn.run, error.code, error.message, turn.clock_ms())


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
