"""Job runs an operator can trace: each scheduled pass and worker batch has a `jobRunId`.

The id is on every log line the run causes (Powertools context keys: per asyncio task, so the concurrent
records of one batch keep their own), on every job it enqueues (`WorkQueue` implementations stamp it), and the
worker logs each job under the id of the run that enqueued it. A run logs `{name}_start` and `{name}_end` with its
counts and duration.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from agent_core.domain.ids import sortable_id
from agent_core.domain.jobs import Job
from agent_core.jobs.report import JobReport
from agent_core.observability import logger
from agent_core.tracing import send_span

_current_run: ContextVar[str] = ContextVar("agent_core_job_run_id", default="")


def new_job_run_id() -> str:
    return f"jr_{sortable_id()}"


def stamped(job: Job) -> Job:
    """`job` carrying the current run's id and the trace context of its `send` span; a job that already
    carries them (a re-send) keeps them."""
    update: dict[str, str] = {}
    run_id = _current_run.get()
    if run_id and not job.job_run_id:
        update["job_run_id"] = run_id
    if not job.traceparent:
        carrier = send_span(job.kind)
        update.update({k: v for k, v in carrier.items() if k in ("traceparent", "tracestate")})
    return job.model_copy(update=update) if update else job


@contextmanager
def traced(job_run_id: str, **keys: object) -> Iterator[None]:
    """Within: enqueued jobs carry `job_run_id`, and every log line has `jobRunId` (and `keys`)."""
    previous = dict(logger.thread_safe_get_current_keys())
    token = _current_run.set(job_run_id)
    logger.thread_safe_append_keys(jobRunId=job_run_id, **keys)
    try:
        yield
    finally:
        _current_run.reset(token)
        logger.thread_safe_clear_keys()
        if previous:
            logger.thread_safe_append_keys(**previous)


@contextmanager
def job_run(name: str, job_run_id: str = "") -> Iterator[JobReport]:
    """One traced run: `{name}_start`, then `{name}_end` with the report's counts and the duration."""
    report = JobReport(job_run_id=job_run_id or new_job_run_id())
    started = time.perf_counter()
    with traced(report.job_run_id):
        logger.info(f"{name}_start", extra={"job": name})
        outcome = "error"
        try:
            yield report
            outcome = "ok"
        finally:
            duration_ms = round((time.perf_counter() - started) * 1000)
            fields = {"job": name, "outcome": outcome, "durationMs": duration_ms, **report.counts()}
            (logger.info if outcome == "ok" and not report.failed else logger.warning)(f"{name}_end", extra=fields)
