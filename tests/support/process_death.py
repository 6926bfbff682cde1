"""A process that dies: every effect of an in-process "instance" passes through its `Life`, which can end at any
step, as `kill -9` ends a server (tests/integration/test_approval_crash_property.py).

An instance's effects on the world are its store calls (its table) and its tools' executions. Each is one step
of its life; a life armed to end at step k ends there, either before the step (the write never happened) or
after it (the write happened, its answer never came back: the ambiguous failure of a process killed while a
request was in flight). From its death on, the instance does nothing: every step it starts, and every step in
flight whose answer had not come back, waits forever, so none of its cleanup (storing the run's end, closing
its waits, releasing its lease, the heartbeat, the cancel watch, the log's last flush) reaches the store; its
tasks sit frozen as a dead process's threads do. `bury()` then raises `ProcessGone` in every frozen step (a
BaseException: no `except Exception` of the product takes it for a store failure and goes on), and every later
step raises it at once without touching anything, so the dead instance's tasks unwind with no effect and the
test's event loop ends clean.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agent_core.store.schema import SK
from agent_core.store.table import Condition, Item, Key, QueryPage, SkRange, Table, Update, WriteOp

T = TypeVar("T")


class ProcessGone(BaseException):
    """Raised in a dead instance's frozen tasks when the test buries it (never seen by a living instance)."""


class Life:
    """One instance's life: its steps counted; `arm` or `kill` ends it; `dead` is set when it has ended."""

    def __init__(self) -> None:
        self.steps = 0
        self._end_at: int | None = None  # the step its life ends at
        self._end_on: str | None = None  # ... or at the first step that is this
        self._end_after = False  # ... after that step is done (its answer lost), else before it
        self.dead = asyncio.Event()
        self.done: list[str] = []  # the steps it did (their effect happened), in order, whether or not it died
        self.died_at = ""  # the step it died at: "before put WAIT#call", "after tool", "in get RUN", ...
        self.buried = False
        self.tasks: set[asyncio.Task[Any]] = set()  # the tasks its death froze (or stopped once buried)
        self._gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def arm(self, steps_from_now: int, *, after: bool) -> None:
        """Die at the `steps_from_now`-th step from now (1: the next one), before or after it is done."""
        self._end_at, self._end_after = self.steps + max(1, steps_from_now), after

    def arm_on(self, what: str, *, after: bool) -> None:
        """Die at its next step that is `what` (a step's label begins with it), before or after it is done."""
        self._end_on, self._end_after = what, after

    def kill(self) -> None:
        """Die now: no further step starts, and the steps in flight never return."""
        self.died_at = self.died_at or ("" if self.dead.is_set() else "idle")
        self.dead.set()

    def bury(self) -> None:
        """Unwind the dead instance's frozen tasks (ProcessGone): none of them has any effect."""
        self.buried = True
        if not self._gone.done():
            self._gone.set_exception(ProcessGone())
            self._gone.exception()  # retrieved: no "never retrieved" warning when nothing was frozen

    async def _frozen(self) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        if self.buried:
            raise ProcessGone
        await asyncio.shield(self._gone)  # a cancel (the run's own cleanup) does not wake a dead process

    def _die(self, where: str) -> None:
        if not self.dead.is_set():
            self.died_at = where
        self.kill()

    async def step(self, work: Callable[[], Awaitable[T]], what: str) -> T:
        """One effect of the instance (`what` it is: "get RUN", "update WAIT claimedAt", "tool"...), unless it is dead (then never, or ProcessGone once buried)."""
        if self.dead.is_set():
            await self._frozen()
        self.steps += 1
        ends_here = (self._end_at is not None and self.steps >= self._end_at) or (
            self._end_on is not None and what.startswith(self._end_on)
        )
        if ends_here and not self._end_after:
            self._die(f"before {what}")
            await self._frozen()
        try:
            result = await work()
            self.done.append(what)
            return result
        finally:
            if ends_here:
                self._die(f"after {what}")
            if self.dead.is_set():  # died while the step was in flight: its answer never comes back
                self.died_at = self.died_at or f"in {what}"
                await self._frozen()


def _kind(key: Item) -> str:
    """What an item is, by its sort key's prefix (`WAIT`, `RUN`, `META`, `CHECKPOINT`, `EV`, ...)."""
    return str(key.get(SK, "")).split("#")[0]


class MortalTable:
    """`table` as one instance reaches it: each call one step of the instance's `life`."""

    def __init__(self, table: Table, life: Life) -> None:
        self._table = table
        self.life = life

    async def get(self, key: Key) -> Item | None:
        return await self.life.step(lambda: self._table.get(key), f"get {_kind(key)}")

    async def batch_get(self, keys: list[Key]) -> list[Item]:
        return await self.life.step(lambda: self._table.batch_get(keys), "batch_get")

    async def query(
        self,
        pk: str,
        sk: SkRange | None = None,
        *,
        index: str | None = None,
        forward: bool = True,
        limit: int | None = None,
        start_key: Item | None = None,
    ) -> QueryPage:
        return await self.life.step(
            lambda: self._table.query(pk, sk, index=index, forward=forward, limit=limit, start_key=start_key), "query"
        )

    async def put(self, item: Item, condition: Condition | None = None) -> None:
        await self.life.step(lambda: self._table.put(item, condition), f"put {_kind(item)}")

    async def update(self, key: Key, update: Update, condition: Condition | None = None) -> Item:
        what = f"update {_kind(key)} {','.join(sorted(update.set))}"
        return await self.life.step(lambda: self._table.update(key, update, condition), what)

    async def delete(self, key: Key, condition: Condition | None = None) -> None:
        await self.life.step(lambda: self._table.delete(key, condition), f"delete {_kind(key)}")

    async def transact(self, ops: list[WriteOp]) -> None:
        await self.life.step(lambda: self._table.transact(ops), "transact")

    async def batch_delete(self, keys: list[Key]) -> None:
        await self.life.step(lambda: self._table.batch_delete(keys), "batch_delete")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)
