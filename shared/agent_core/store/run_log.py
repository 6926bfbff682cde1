"""A run's durable event log: its native events, in batches, in the run's partition (keys: store/items.py).

Each batch is one item `{pk: RUN#{runId}, sk: LOG#{firstSeq}, userId, first, last, events, expiresAt}`
holding consecutive events (their native JSON objects, as JSON text), written once. A stream that dropped
reads the events after the last one it got (`read`), from any instance, while the log lives
(`Settings.run_log_ttl_s`); reads skip expired items (DynamoDB deletes them up to 48 h late, moto never)
and items of another owner. The log is deleted with its chat (the run's partition goes with it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agent_core.domain.events import TERMINAL_TYPES
from agent_core.store.item_size import ITEM_LIMIT_BYTES, item_size
from agent_core.store.items import LOG_END, log_key, log_sk, run_pk
from agent_core.store.schema import TTL_ATTRIBUTE
from agent_core.store.table import SkRange, Table

Wire = dict[str, Any]
MAX_BATCH_EVENTS = 25  # events per item (and per write): a reader starts this far before the seq it needs
# An item's events stay under the item limit with room for its other attributes.
MAX_BATCH_BYTES = ITEM_LIMIT_BYTES - 4096


class EventTooLarge(Exception):
    """One event alone does not fit an item: the log cannot hold it (a reader sees the gap)."""


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass
class LogRead:
    """The events after `after` the log holds, consecutive from `after + 1`; `gap` when the next one it holds
    is later than that (a batch that was never written: the log cannot continue this stream)."""

    events: list[Wire] = field(default_factory=list)
    gap: bool = False
    found: bool = False  # the log holds any live batch of the owner's run
    ended: bool = False  # the log holds the run's terminal event (at or before `after` when `events` is empty)


class RunLogStore:
    """Append batches of a run's events; read them back by seq (owner only)."""

    def __init__(self, table: Table, ttl_s: int) -> None:
        self.table = table
        self.ttl_s = ttl_s

    def batches(self, events: list[Wire]) -> list[list[Wire]]:
        """`events` cut into items: at most MAX_BATCH_EVENTS each and under the item limit."""
        out: list[list[Wire]] = []
        current: list[Wire] = []
        size = 0
        for event in events:
            bytes_ = len(_dumps(event).encode("utf-8")) + 1
            if bytes_ > MAX_BATCH_BYTES:
                raise EventTooLarge(f"event {event.get('seq')} takes {bytes_} bytes")
            if current and (len(current) >= MAX_BATCH_EVENTS or size + bytes_ > MAX_BATCH_BYTES):
                out.append(current)
                current, size = [], 0
            current.append(event)
            size += bytes_
        if current:
            out.append(current)
        return out

    async def append(self, run_id: str, user_id: str, events: list[Wire], now_s: int) -> None:
        """One item per batch of consecutive events (one write each)."""
        for batch in self.batches(events):
            first, last = int(batch[0]["seq"]), int(batch[-1]["seq"])
            item = {
                **log_key(run_id, first),
                "userId": user_id,
                "first": first,
                "last": last,
                "events": _dumps(batch),
                "end": batch[-1]["type"] in TERMINAL_TYPES,
                TTL_ATTRIBUTE: now_s + self.ttl_s,
            }
            assert item_size(item) <= ITEM_LIMIT_BYTES
            await self.table.put(item)

    async def lives(self, run_id: str, user_id: str, now_s: int) -> bool:
        """Whether the owner's run has a log (its newest batch: one read): a run that has ended with it may
        still have its last batch on its way (the run's end is stored before its terminal event is written)."""
        page = await self.table.query(run_pk(run_id), SkRange(low=log_sk(0), high=LOG_END), forward=False, limit=1)
        return any(item.get("userId") == user_id and int(item.get(TTL_ATTRIBUTE, 0)) > now_s for item in page.items)

    async def read(self, run_id: str, user_id: str, after: int, now_s: int) -> LogRead:
        """The owner's events after seq `after`, consecutive (stops at the first missing one)."""
        low = log_sk(max(0, after + 1 - MAX_BATCH_EVENTS))
        result = LogRead()
        expected = after + 1
        start = None
        while True:
            page = await self.table.query(run_pk(run_id), SkRange(low=low, high=LOG_END), start_key=start)
            for item in page.items:
                if item.get("userId") != user_id or int(item.get(TTL_ATTRIBUTE, 0)) <= now_s:
                    continue
                result.found = True
                result.ended = result.ended or bool(item.get("end"))
                if int(item["last"]) < expected:
                    continue
                if int(item["first"]) > expected:
                    result.gap = True
                    return result
                for event in json.loads(item["events"]):
                    if int(event["seq"]) == expected:
                        result.events.append(event)
                        expected += 1
            if page.last_key is None:
                return result
            start = page.last_key
