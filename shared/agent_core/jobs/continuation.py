"""The job that continues a run whose process died while it waited on people (runtime/continuation.py).

The runtime is imported when the job runs: a function that only queues such jobs (submit) never loads it.
"""

from __future__ import annotations

from agent_core.container import RunDeps
from agent_core.domain.jobs import ContinueRunJob


async def continue_waiting_run(deps: RunDeps, job: ContinueRunJob) -> bool:
    """True when the run went on here; False when it was not due (still waiting, alive, ended, or taken)."""
    from agent_core.runtime.continuation import continue_run

    return await continue_run(deps, job.chat_id, job.run_id, job.user_id) == "continued"
