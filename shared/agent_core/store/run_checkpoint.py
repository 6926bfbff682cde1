"""A run's checkpoint where it waits on people (domain/checkpoint.py): one item in the run's partition.

`{pk: RUN#{runId}, sk: CHECKPOINT, userId, checkpoint, expiresAt}`, rewritten at each quiet step of the run
(the newest wins), read only to continue a run whose process died, deleted with its chat. A checkpoint too
large for an item is not written (the run is then settled `interrupted` if its process dies, as without one).
"""

from __future__ import annotations

import json

from agent_core.domain.checkpoint import RunCheckpoint
from agent_core.store.item_size import ITEM_LIMIT_BYTES
from agent_core.store.items import checkpoint_key
from agent_core.store.schema import TTL_ATTRIBUTE
from agent_core.store.table import Table

MAX_CHECKPOINT_BYTES = ITEM_LIMIT_BYTES - 4096


class CheckpointTooLarge(Exception):
    """The run's state does not fit one item."""


class RunCheckpointStore:
    def __init__(self, table: Table, ttl_s: int) -> None:
        self.table = table
        self.ttl_s = ttl_s

    async def put(self, checkpoint: RunCheckpoint, now_s: int) -> None:
        body = checkpoint.model_dump_json(by_alias=True)
        if len(body.encode("utf-8")) > MAX_CHECKPOINT_BYTES:
            raise CheckpointTooLarge(f"the checkpoint of run {checkpoint.run_id} takes {len(body)} bytes")
        item = {
            **checkpoint_key(checkpoint.run_id),
            "userId": checkpoint.user_id,
            "checkpoint": body,
            TTL_ATTRIBUTE: now_s + self.ttl_s,
        }
        await self.table.put(item)

    async def get(self, run_id: str, user_id: str, now_s: int) -> RunCheckpoint | None:
        """The owner's live checkpoint of the run (an expired or foreign one is None)."""
        item = await self.table.get(checkpoint_key(run_id))
        if item is None or item.get("userId") != user_id or int(item.get(TTL_ATTRIBUTE, 0)) <= now_s:
            return None
        return RunCheckpoint.model_validate(json.loads(item["checkpoint"]))
