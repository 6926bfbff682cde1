"""Blocking endpoints: drive the same run and aggregate its events into the stored result."""

from __future__ import annotations

from agent_core.container import RunDeps
from agent_core.domain.events import RunError
from agent_core.domain.models import TurnResult
from agent_core.errors import AgentError, error_for_code
from agent_core.runtime.loop import TurnRunner
from agent_core.runtime.turn import TurnRequest, prepare_turn


# The model's failures keep their class (and so their 502 status) on the blocking routes.
async def run_blocking(deps: RunDeps, request: TurnRequest) -> TurnResult:
    """Run a turn to its end; a run.error becomes the matching AgentError. Its events are not logged: nothing
    streams them, so nothing resumes them (the answer is the response, and the chat's messages after it)."""
    prepared = await prepare_turn(deps, request)
    if isinstance(prepared, TurnResult):
        return prepared
    error: RunError | None = None
    async for envelope in TurnRunner(prepared, logged=False).events():
        if isinstance(envelope.event, RunError):
            error = envelope.event
    if error is not None:
        # 502 for every LLM error, 503 service_unavailable, 504 deadline_exceeded, ...: never a 200.
        raise run_failure(error)
    assert prepared.result is not None
    return prepared.result


def run_failure(error: RunError) -> AgentError:
    """A run's run.error as the error a blocking route answers with: 502 llm_unavailable, 503
    service_unavailable, 504 deadline_exceeded, ... (never a 200)."""
    return error_for_code(error.code, error.message)
