"""Blocking endpoints: drive the same run and aggregate its events into the stored result."""

from __future__ import annotations

from agent_core.domain.events import RunError
from agent_core.domain.models import TurnResult
from agent_core.errors import AgentError, LlmAccessDenied, LlmRejectedTools, LlmRequestInvalid, LlmUnavailable
from agent_core.runtime.deps import RunDeps
from agent_core.runtime.loop import TurnRunner
from agent_core.runtime.turn import TurnRequest, prepare_turn

# The model's failures keep their class (and so their 502 status) on the blocking routes.
_LLM_ERRORS = {cls.code: cls for cls in (LlmUnavailable, LlmRejectedTools, LlmRequestInvalid, LlmAccessDenied)}


async def run_blocking(deps: RunDeps, request: TurnRequest) -> TurnResult:
    """Run a turn to its end; a run.error becomes the matching AgentError."""
    prepared = await prepare_turn(deps, request)
    if isinstance(prepared, TurnResult):
        return prepared
    error: RunError | None = None
    async for envelope in TurnRunner(prepared).events():
        if isinstance(envelope.event, RunError):
            error = envelope.event
    if error is not None:
        if (llm_error := _LLM_ERRORS.get(error.code)) is not None:
            raise llm_error(error.message)
        raise AgentError(error.message, code=error.code)
    assert prepared.result is not None
    return prepared.result
