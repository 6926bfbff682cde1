"""Items that could cross DynamoDB's 400 KB limit keep their largest text attributes in S3.

The one place that decides inline or S3, for every item the store writes (messages, runs with their replay
snapshots, stored Responses): callers hand the store whole values and get whole values back.

Before an item is written its DynamoDB size is computed (`item_size`); while it exceeds
`INLINE_ITEM_BYTES`, the largest string attribute that is not a key moves to S3 under a key derived from
the item's own key and the attribute's name, and the item lists it in `spilled`. The object key is
deterministic, so writing it again (a retried turn end) overwrites the same object with the same bytes.
Reads put the parts back (`restore`), so callers see whole items. Items written by earlier versions name
one object holding part of them (`snapshotKey`: a run's replay snapshot; `bodyKey`: a Response's body);
`restore` reads those back the same way.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable

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


def item_spill_prefix(pk: str, sk: str) -> str:
    """Every spilled part of one item."""
    return f"spill/{pk.replace('#', '/')}/{sk.replace('#', '/')}/"


def chat_spill_prefixes(chat_id: str) -> tuple[str, ...]:
    """Every spilled part of one chat's items (its deletion removes them), replay snapshots that earlier
    versions kept under `snapshots/{chat}/` included."""
    return f"spill/CHAT/{chat_id}/", f"snapshots/{chat_id}/"


def _whole_attribute(name: str) -> Callable[[bytes], Item]:
    return lambda body: {name: body.decode("utf-8")}


def _attributes(body: bytes) -> Item:
    parts: Item = json.loads(body)
    return parts


# Attributes of items written by earlier versions that name one object holding part of the item, and how
# that object's body becomes the attributes it replaces.
LEGACY_PARTS: dict[str, Callable[[bytes], Item]] = {
    "snapshotKey": _whole_attribute("snapshot"),  # a run's replay snapshot (JSON), `snapshots/{chat}/{run}.json`
    "bodyKey": _attributes,  # a Response's input, output, usage and body attributes, `responses/{id}.json`
}


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
        pending = [(i, name, spill_key(i[PK], i[SK], name)) for i in items for name in i.get(SPILLED) or []]
        pending += [(i, name, i[name]) for i in items for name in LEGACY_PARTS if i.get(name)]
        if not pending:
            return items
        bodies = await asyncio.gather(*(self.blobs.get(key) for _, _, key in pending))
        for (item, name, _), blob in zip(pending, bodies, strict=True):
            if blob is None:
                logger.error("spilled attribute missing", extra={"pk": item[PK], "sk": item[SK], "attribute": name})
            elif name in LEGACY_PARTS:
                item.update(LEGACY_PARTS[name](blob.body))
            else:
                item[name] = blob.body.decode("utf-8")
        for item in items:
            item.pop(SPILLED, None)
            for name in LEGACY_PARTS:
                item.pop(name, None)
        return items

    async def forget(self, item: Item) -> None:
        """Delete the objects holding parts of an item (before the item itself: a failure leaves the way to them)."""
        await self.blobs.delete_prefix(item_spill_prefix(item[PK], item[SK]))
        for name in LEGACY_PARTS:
            if item.get(name):
                await self.blobs.delete_prefix(item[name])
