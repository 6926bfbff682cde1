"""The job of a background /v1/responses run: the Responses wire runs it.

The wire is imported when the job runs, so a function that never runs one (chat, submit, data) never loads it,
and the composition root names a job type, not a wire.
"""

from __future__ import annotations

from agent_core.container import RunDeps
from agent_core.domain.jobs import ResponseJob
from agent_core.jobs.handlers import Handler
from agent_core.store.responses import ResponseStore


def background_responses(responses: ResponseStore) -> Handler:
    """The handler of `ResponseJob`, bound to the store its Responses are kept in."""

    async def run(deps: RunDeps, job: ResponseJob) -> None:
        from agent_core.wires.responses.execution import run_queued

        await run_queued(deps, responses, job.response_id)

    return run
