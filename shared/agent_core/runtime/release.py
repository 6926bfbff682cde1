"""Ending a run that cannot go on (it failed before or outside its event loop, or its client left before the
first byte): its record says so, its replay holds its question and terminal event, and its lease is freed."""

from __future__ import annotations

from agent_core.container import RunDeps
from agent_core.domain.events import Event, RunError
from agent_core.domain.models import Run, RunStatus
from agent_core.observability import logger
from agent_core.runtime.replay import ended_unstarted
from agent_core.store.retry import retry_write, write_backoff


async def release_failed_run(
    deps: RunDeps, run: Run, code: str, message: str, at_ms: int, question: str | None = None
) -> None:
    """Record a run that cannot go on as failed and free its lease (best effort, retried; storage may be
    the very thing failing, and then the lease, no longer renewed, expires on its own).

    A run that never streamed gets a replay of its question and its error.
    """
    run.status, run.result = RunStatus.FAILED, None
    run.error_code, run.error_message = code, message
    await release_run(deps, run, RunError(code=code, message=message), at_ms, question)


async def release_run(deps: RunDeps, run: Run, terminal: Event, at_ms: int, question: str | None) -> None:
    """The run's end stored with a replay of its question and `terminal`, and its lease freed (best effort)."""
    run.ended_at = run.ended_at or at_ms
    if run.snapshot is None:
        run.snapshot = ended_unstarted(run, terminal, at_ms, question)
    try:
        await retry_write(lambda: deps.turns.abandon_turn(run), write_backoff(deps.settings), "abandon_turn")
    except Exception:
        logger.exception("could not release the run's lease", extra={"runId": run.run_id})
