"""The job functions' Lambda glue: the worker (SQS batches) and the scheduled functions (EventBridge Scheduler).

A Lambda process keeps its AppContext and its event loop across invocations (the cached clients stay bound to
that loop): both live here, built on first use from the environment's Settings; `use()` gives the process a
context of the caller's own (tests: one built with their own job handlers or scheduled passes).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, TypeVar

from agent_core.config import get_settings
from agent_core.context import AppContext, build_context
from agent_core.jobs.handlers import ScheduledJob
from agent_core.jobs.worker import process_batch
from agent_core.observability import logger
from agent_core.tracing import flush_traces

T = TypeVar("T")

_lock = threading.Lock()
_context: AppContext | None = None
_loop: asyncio.AbstractEventLoop | None = None


def lambda_context() -> AppContext:
    """The process's AppContext, built once on first use from the environment's Settings."""
    global _context
    if _context is None:
        with _lock:
            if _context is None:
                _context = build_context(get_settings())
    return _context


def use(context: AppContext | None) -> None:
    """The process's handlers use `context` from now on; None: build it again from the environment on first use
    (tests, after changing the environment)."""
    global _context
    with _lock:
        _context = context


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on this process's loop, kept across invocations (the cached clients stay bound to it)."""
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    try:
        return _loop.run_until_complete(coro)
    finally:
        flush_traces()  # nothing runs once the invocation returns


def scheduled_time(event: dict[str, Any] | None) -> datetime:
    """The schedule's `scheduledTime` (ISO 8601, UTC when it has no offset), else the current time."""
    raw = (event or {}).get("scheduledTime")
    if isinstance(raw, str) and raw:
        try:
            parsed = datetime.fromisoformat(raw)
        except ValueError:
            logger.warning("scheduledTime is not ISO 8601; using the current time", extra={"scheduledTime": raw})
        else:
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return datetime.now(UTC)


async def consume(ctx: AppContext, event: dict[str, Any]) -> dict[str, Any]:
    """One SQS batch run by the context's jobs: the partial batch response, after any in-process follow-up work
    has finished."""
    response = await process_batch(event, ctx.jobs)
    await ctx.background.join()
    return response


def handle_sqs(event: dict[str, Any]) -> dict[str, Any]:
    """The worker Lambda: an SQS batch event in, `{"batchItemFailures": [...]}` out (never raises)."""
    return run(consume(lambda_context(), event))


def handle_schedule(name: ScheduledJob, event: dict[str, Any]) -> dict[str, Any]:
    """A scheduled Lambda: EventBridge Scheduler's `{"scheduledTime": ...}` in, the JobReport as a dict out."""
    now = scheduled_time(event)
    report = run(lambda_context().run_scheduled(name, now))
    result = asdict(report)
    logger.info("scheduled job done", extra={"job": name, "now": now.isoformat(), **result})
    return result
