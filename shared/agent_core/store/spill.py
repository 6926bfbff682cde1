"""Items that could cross DynamoDB's 400 KB limit keep their largest text attributes in S3.

Before an item is written its DynamoDB size is computed (`item_size`); while it exceeds
`INLINE_ITEM_BYTES`, the largest string attribute that is not a key moves to S3 under a key derived from
the item's own key and the attribute's name, and the item lists it in `spilled`. The object key is
deterministic, so writing it again (a retried turn end) overwrites the same object with the same bytes.
Reads put the parts back (`restore`), so callers see whole items.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict

from agent_core.observability import logger
from agent_core.store.blob import BlobStore
from agent_core.store.item_size import item_size
from agent_core.store.schema import INDEXES, PK, SK
from agent_core.store.table import Item

SPILLED = "spilled"
# Well under the 400 KB limit: room for attributes added later and for 1 MB query pages of several items.
INLINE_ITEM_BYTES = 256 * 1024
MIN_SPILL_BYTES = 1024  # smaller values never move: they cannot be what makes an item too large
_KEY_ATTRS = frozenset({PK, SK, *(i.pk for i in INDEXES), *(i.sk for i in INDEXES), SPILLED})
_CONTENT_TYPE = "text/plain; charset=utf-8"
_REMEMBERED = 256


def spill_key(pk: str, sk: str, attr: str) -> str:
    return f"spill/{pk.replace('#', '/')}/{sk.replace('#', '/')}/{attr}"


def chat_spill_prefix(chat_id: str) -> str:
    """Every spilled part of one chat's items (its deletion removes them)."""
    return f"spill/CHAT/{chat_id}/"


def plan_spill(item: Item, budget: int = INLINE_ITEM_BYTES) -> tuple[Item, dict[str, bytes]]:
    """The item to write and the objects to put first; the item unchanged when it fits."""
    if item_size(item) <= budget:
        return item, {}
    out = dict(item)
    objects: dict[str, bytes] = {}
    spilled: list[str] = []
    candidates = sorted(
        (name for name, value in item.items() if name not in _KEY_ATTRS and isinstance(value, str)),
        key=lambda name: len(item[name].encode("utf-8")),
        reverse=True,
    )
    for name in candidates:
        if item_size(out) <= budget:
            break
        encoded = out[name].encode("utf-8")
        if len(encoded) < MIN_SPILL_BYTES:
            break
        objects[spill_key(item[PK], item[SK], name)] = encoded
        spilled.append(name)
        del out[name]
    out[SPILLED] = spilled
    return out, objects


def _digest(body: bytes) -> bytes:
    return hashlib.blake2b(body, digest_size=16).digest()


class Spiller:
    """Moves parts of large items to the blob store before writes and back after reads."""

    def __init__(self, blobs: BlobStore) -> None:
        self.blobs = blobs
        # Objects this process stored, by key and digest: a retried write does not upload them again.
        self._stored: OrderedDict[str, bytes] = OrderedDict()

    async def put_objects(self, objects: dict[str, bytes]) -> None:
        """Store the objects one after the other (a turn has a few at most, and nothing of a failed write is
        left in flight when it raises); objects an earlier attempt already stored are not sent again."""
        for key, body in objects.items():
            digest = _digest(body)
            if self._stored.get(key) == digest:
                continue
            await self.blobs.put(key, body, _CONTENT_TYPE)
            self._stored[key] = digest
            self._stored.move_to_end(key)
            while len(self._stored) > _REMEMBERED:
                self._stored.popitem(last=False)

    async def fit(self, item: Item) -> Item:
        """The item as it can be written, its large parts already stored."""
        fitted, objects = plan_spill(item)
        await self.put_objects(objects)
        return fitted

    async def restore(self, items: list[Item]) -> list[Item]:
        """The items with their spilled parts read back (in parallel)."""
        pending = [(item, name) for item in items for name in item.get(SPILLED) or []]
        if not pending:
            return items
        bodies = await asyncio.gather(*(self.blobs.get(spill_key(i[PK], i[SK], name)) for i, name in pending))
        for (item, name), blob in zip(pending, bodies, strict=True):
            if blob is None:
                logger.error("spilled attribute missing", extra={"pk": item[PK], "sk": item[SK], "attribute": name})
                continue
            item[name] = blob.body.decode("utf-8")
        for item in items:
            item.pop(SPILLED, None)
        return items
