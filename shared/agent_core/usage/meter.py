"""The usage service the app is wired with, and the two touch points of a run: admit before the model call,
record (as a queued job, off the answer's path) when it ends."""

from __future__ import annotations

import copy
from zoneinfo import ZoneInfo

from agent_core.config import Settings
from agent_core.domain.jobs import UsageJob, WorkQueue
from agent_core.domain.models import Run
from agent_core.errors import TooManyRequests
from agent_core.observability import logger
from agent_core.store.table import Table, UpdateOp
from agent_core.usage.budget import Budget, LimitsCache, Reservation, Reserving
from agent_core.usage.ledger import Ledger, UsageRecord
from agent_core.usage.prices import PriceTable


class UsageMeter:
    def __init__(self, table: Table, settings: Settings, *, with_turns: bool = True) -> None:
        """`with_turns`: the turns are stored on `table` too, so a turn's reservation can commit with its begin."""
        self.with_turns = with_turns
        self.prices = PriceTable.of(settings.usage_prices)
        self.ledger = Ledger(table, self.prices)
        self.limits = LimitsCache(table, settings)
        self.budget = Budget(table, settings, self.prices, self.limits)

    def apart(self) -> UsageMeter:
        """This meter for turns stored elsewhere (an ephemeral run's throw-away store): each reservation is a
        write of its own on this meter's table."""
        meter = copy.copy(self)
        meter.with_turns = False
        return meter

    async def admit(self, run: Run, at_ms: int, tz: ZoneInfo) -> Reservation:
        """Before a turn takes its lease: reserve its budget (429 when spent or rate limited)."""
        return await self.budget.admit(run.user_id, run.model, at_ms // 1000, tz)

    async def release(self, reservation: Reservation) -> None:
        """A turn that will not call the model gives its reservation back (best effort)."""
        try:
            await self.budget.release(reservation)
        except Exception:
            logger.exception("could not release a usage reservation", extra={"userId": reservation.user_id})

    async def record_job(self, job: UsageJob) -> bool:
        record = UsageRecord(
            user_id=job.user_id,
            day=job.day,
            model=job.model,
            marker=job.marker,
            usage=job.usage,
            runs=job.runs,
            jobs=job.jobs,
            tool_calls=job.tool_calls,
            reserved_tokens=job.reserved_tokens,
            reserved_cost_micros=job.reserved_cost_micros,
        )
        return await self.ledger.record(record)


def run_usage_job(run: Run, reservation: Reservation, tool_calls: int) -> UsageJob:
    """The ledger record of a run that ended, under its user's day (the day its budget was reserved on)."""
    return UsageJob(
        user_id=run.user_id,
        day=reservation.day,
        model=run.model,
        marker=f"run:{run.run_id}",
        usage=run.usage,
        runs=1,
        tool_calls=tool_calls,
        reserved_tokens=reservation.tokens,
        reserved_cost_micros=reservation.cost_micros,
    )


async def enqueue_usage(queue: WorkQueue, job: UsageJob) -> None:
    """Queue a ledger record; a queue failure is logged, never the run's failure (the answer is stored)."""
    try:
        await queue.enqueue(job)
    except Exception:
        logger.exception("could not queue a usage record", extra={"userId": job.user_id, "marker": job.marker})


class Admission:
    """One turn's budget check, made before the turn writes anything; given back if the turn ends up not calling
    the model (a failed start).

    `prepare` leaves the reservation to the turn's first write, which commits it in the same transaction: the
    chat the turn opens, else its begin with the lease (`reservation_write`, then `committed` or `refused`), so
    it costs no round trip of its own. `admit` reserves with a write of its own (a turn that writes something
    else first: a client's input history into its chat, an approval's decision).
    """

    def __init__(self, meter: UsageMeter | None, user_id: str, at_ms: int) -> None:
        self.meter = meter
        self.user_id = user_id
        self.at_ms = at_ms
        self.reservation: Reservation | None = None  # held: written (settled by the ledger or released)
        self.pending: Reserving | None = None  # prepared: to be written with the turn's first write

    async def admit(self, model: str, tz: ZoneInfo) -> None:
        """Reserve the turn's budget now, a prepared reservation included (429 when spent or rate limited);
        nothing the second time."""
        if self.meter is None or self.reservation is not None:
            return
        if self.pending is not None:
            await self.write_pending()
        else:
            self.reservation = await self.meter.budget.admit(self.user_id, model, self.at_ms // 1000, tz)

    async def write_pending(self) -> None:
        """Write a prepared reservation on its own now (something else is to be written first; 429 if refused)."""
        if self.meter is not None and self.pending is not None:
            self.reservation, self.pending = await self.meter.budget.reserve(self.pending), None

    async def prepare(self, model: str, tz: ZoneInfo) -> None:
        """The reservation the turn's first write will carry (only the cached limits are read), or, when the
        turns are stored apart from the budgets, reserved now as `admit` does."""
        if self.meter is None or self.reservation is not None or self.pending is not None:
            return
        if not self.meter.with_turns:
            await self.admit(model, tz)
            return
        reserving = await self.meter.budget.plan(self.user_id, model, self.at_ms // 1000, tz)
        if reserving.write is None:
            self.reservation = reserving.reservation  # no limit: nothing to write
        else:
            self.pending = reserving

    @property
    def reservation_write(self) -> UpdateOp | None:
        """The conditional write the turn's first write carries (None: nothing left to reserve)."""
        return self.pending.write if self.pending is not None else None

    def committed(self) -> None:
        """The turn's first write committed the reservation with it."""
        if self.pending is not None:
            self.reservation, self.pending = self.pending.reservation, None

    async def refused(self) -> TooManyRequests:
        """The 429 of a reservation the turn's first write found over a limit (nothing was written)."""
        assert self.meter is not None and self.pending is not None
        return await self.meter.budget.refusal(self.pending)

    async def release(self) -> None:
        """Give a written reservation back (best effort); one never written has nothing to give back."""
        self.pending = None
        if self.meter is not None and self.reservation is not None:
            await self.meter.release(self.reservation)
            self.reservation = None
