"""Background jobs and the WorkQueue port (SQS in Lambda, asyncio tasks locally).

Every job is idempotent: running it twice changes nothing the second time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agent_core.domain.models import Usage


class _Job(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    job_run_id: str = ""  # the scheduled pass or worker batch that enqueued it (traceable across the queue)
    # The W3C trace context of the span that sent it (agent_core/tracing.py): the job's span continues it.
    traceparent: str = ""
    tracestate: str = ""


class CompactJob(_Job):
    """Fold a chat's older messages into its rolling summary."""

    kind: Literal["compact"] = "compact"
    chat_id: str
    model: str
    user_id: str = ""  # the chat's owner, whose usage ledger counts the summary ('' from older senders)


class SessionSummaryJob(_Job):
    """Summarise one ended session of a chat (then extract profile facts)."""

    kind: Literal["session_summary"] = "session_summary"
    chat_id: str
    user_id: str
    session_id: str
    started_at: int
    ended_at: int


class ProfileJob(_Job):
    """Merge durable facts from a session summary into the user's profile."""

    kind: Literal["profile"] = "profile"
    chat_id: str
    user_id: str
    session_id: str


class DailySummaryJob(_Job):
    """Summarise one user's local day (upsert), and write it into each chat active that day."""

    kind: Literal["daily_summary"] = "daily_summary"
    user_id: str
    date: str  # yyyy-mm-dd in the user's zone
    now_ms: int | None = None  # the scheduler's time (tests and demos override the clock)
    deferrals: int = 0


class MemoryRecordsJob(_Job):
    """Make the chat's new exchanges searchable: its memory records since the last such job (idempotent)."""

    kind: Literal["memory_records"] = "memory_records"
    chat_id: str
    user_id: str


class ResponseJob(_Job):
    """Run a background /v1/responses request."""

    kind: Literal["response"] = "response"
    response_id: str
    user_id: str


class ContinueRunJob(_Job):
    """Continue a run whose process died while it waited on people, from its checkpoint (idempotent: the run's
    expired lease goes to one process; a run still alive, ended or still waiting is left as it is)."""

    kind: Literal["continue_run"] = "continue_run"
    chat_id: str
    run_id: str
    user_id: str


class UsageJob(_Job):
    """Add what one run or job spent to its user's usage ledger (at most once per `marker`)."""

    kind: Literal["usage"] = "usage"
    user_id: str
    day: str  # yyyy-mm-dd in the user's zone
    model: str
    marker: str  # `run:{runId}`, or a job's own id
    usage: Usage
    runs: int = 0
    jobs: int = 0
    tool_calls: int = 0
    reserved_tokens: int = 0
    reserved_cost_micros: int = 0
    # How often the record was handed to the work queue because the ledger write still failed after its
    # retries (jobs/usage.py): 0 for the record a run queues in its own process.
    handoffs: int = 0


Job = Annotated[
    CompactJob
    | SessionSummaryJob
    | ProfileJob
    | DailySummaryJob
    | ResponseJob
    | MemoryRecordsJob
    | UsageJob
    | ContinueRunJob,
    Field(discriminator="kind"),
]
JOB_ADAPTER: TypeAdapter[Job] = TypeAdapter(Job)


def parse_job(raw: str | bytes) -> Job:
    """A job from its JSON (a queue message body); raises pydantic.ValidationError when malformed."""
    return JOB_ADAPTER.validate_json(raw)


def dump_job(job: Job) -> str:
    return job.model_dump_json()


class WorkQueue(Protocol):
    """Implementations stamp each job with the current job run's id (`jobs.job_run.stamped`)."""

    async def enqueue(self, job: Job, delay_s: int = 0) -> None: ...

    async def enqueue_many(self, jobs: list[Job]) -> None: ...


JobHandler = Callable[[Job], Awaitable[object]]
"""Runs one job (raises: retry): what the in-process queue and the SQS worker are given (`jobs.handlers.JobRunner`)."""
