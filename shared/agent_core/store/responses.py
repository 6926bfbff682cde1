"""Stored OpenAI Responses and conversation metadata, on the Table port (their keys are store/items.py's)."""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import BaseModel, Field

from agent_core.store.blob import BlobStore
from agent_core.store.items import conversation_key, response_id_of, response_key
from agent_core.store.schema import PK, TTL_ATTRIBUTE
from agent_core.store.spill import Spiller
from agent_core.store.table import Condition, ConditionFailed, Item, Table, Update, eq, exists, not_exists

RESPONSE_TTL_S = 30 * 24 * 3600  # retrievable for 30 days, as OpenAI keeps responses
ACTIVE = ("queued", "in_progress")
CANCELLED = "cancelled"


class ResponseRecord(BaseModel):
    """One response: owner, status, the chat it ran in, its input items and the aggregated Response."""

    response_id: str
    user_id: str
    status: str
    chat_id: str | None = None
    run_id: str | None = None
    previous_response_id: str | None = None
    background: bool = False
    created_at: int
    input_items: list[dict[str, Any]] = Field(default_factory=list)
    response: dict[str, Any] = Field(default_factory=dict)  # the Response object, output and usage included
    request: dict[str, Any] | None = None  # the create parameters, kept for a background worker
    # How its stream was encoded (wires/responses/resume.py): a stream resumes from the run's log on any instance
    stream: dict[str, Any] | None = None

    def body(self) -> dict[str, Any]:
        """The Response as the API returns it (the status attribute wins over the stored body's)."""
        conversation = {"id": self.chat_id} if self.chat_id else self.response.get("conversation")
        return {**self.response, "status": self.status, "conversation": conversation}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class ResponseStore:
    """Responses by id; every read by a caller checks the owner (a foreign id reads as missing)."""

    def __init__(self, table: Table, blobs: BlobStore | None = None) -> None:
        self.table = table
        # With a blob store, large bodies keep their largest parts in it (the store's one size limit).
        self.spiller = Spiller(blobs) if blobs is not None else None

    async def _to_item(self, record: ResponseRecord) -> Item:
        response = {k: v for k, v in record.response.items() if k not in ("output", "usage")}
        body = {
            "input": _dumps(record.input_items),
            "output": _dumps(record.response.get("output", [])),
            "usage": _dumps(record.response.get("usage")),
            "response": _dumps(response),
        }
        item: Item = {
            **response_key(record.response_id),
            "userId": record.user_id,
            "status": record.status,
            "chatId": record.chat_id,
            "runId": record.run_id,
            "previousResponseId": record.previous_response_id,
            "background": record.background,
            "createdAt": record.created_at,
            TTL_ATTRIBUTE: record.created_at + RESPONSE_TTL_S,
            "request": _dumps(record.request) if record.request is not None else None,
            "stream": _dumps(record.stream) if record.stream is not None else None,
            **body,
        }
        item = {k: v for k, v in item.items() if v is not None}
        return item if self.spiller is None else await self.spiller.fit(item)

    async def _from_item(self, item: Item) -> ResponseRecord:
        body: dict[str, str] = item if self.spiller is None else (await self.spiller.restore([item]))[0]
        response = json.loads(body.get("response", "{}"))
        response["output"] = json.loads(body.get("output", "[]"))
        response["usage"] = json.loads(body.get("usage", "null"))
        return ResponseRecord(
            response_id=response_id_of(item),
            user_id=item["userId"],
            status=item["status"],
            chat_id=item.get("chatId"),
            run_id=item.get("runId"),
            previous_response_id=item.get("previousResponseId"),
            background=bool(item.get("background", False)),
            created_at=item["createdAt"],
            input_items=json.loads(body.get("input", "[]")),
            response=response,
            request=json.loads(item["request"]) if item.get("request") else None,
            stream=json.loads(body["stream"]) if body.get("stream") else None,
        )

    async def create(self, record: ResponseRecord) -> None:
        await self.table.put(await self._to_item(record), Condition.of(not_exists(PK)))

    async def load(self, response_id: str) -> ResponseRecord | None:
        """Any owner's response (the background worker); expired ones read as missing."""
        item = await self.table.get(response_key(response_id))
        if item is None or int(item.get(TTL_ATTRIBUTE, 0)) <= int(time.time()):
            return None
        return await self._from_item(item)

    async def get(self, response_id: str, user_id: str) -> ResponseRecord | None:
        record = await self.load(response_id)
        return record if record is not None and record.user_id == user_id else None

    async def start(self, record: ResponseRecord) -> bool:
        """A queued response starts running in its chat; False when it was cancelled (or deleted) meanwhile."""
        ids = {"chatId": record.chat_id, "runId": record.run_id}
        if record.stream is not None:
            ids["stream"] = _dumps(record.stream)
        update = Update(set={"status": "in_progress", **{k: v for k, v in ids.items() if v is not None}})
        try:
            await self.table.update(response_key(record.response_id), update, Condition.of(eq("status", "queued")))
        except ConditionFailed:
            return False
        record.status = "in_progress"
        return True

    async def finish(self, record: ResponseRecord) -> None:
        """Write the final Response; a response cancelled meanwhile stays cancelled, a deleted one stays gone."""
        item = await self._to_item(record)
        active = Condition.of(exists(PK)).any_of(*(eq("status", s) for s in ACTIVE))
        try:
            await self.table.put(item, active)
        except ConditionFailed:
            try:
                await self.table.put({**item, "status": CANCELLED}, Condition.of(eq("status", CANCELLED)))
                record.status = CANCELLED
            except ConditionFailed:
                return

    async def cancel(self, response_id: str, user_id: str) -> ResponseRecord | None:
        """Mark a queued or running response cancelled; None when it is not active (or not the caller's)."""
        condition = Condition.of(eq("userId", user_id)).any_of(*(eq("status", s) for s in ACTIVE))
        try:
            item = await self.table.update(response_key(response_id), Update(set={"status": CANCELLED}), condition)
        except ConditionFailed:
            return None
        return await self._from_item(item)

    async def delete(self, response_id: str, user_id: str) -> bool:
        item = await self.table.get(response_key(response_id))
        if item is None or int(item.get(TTL_ATTRIBUTE, 0)) <= int(time.time()) or item.get("userId") != user_id:
            return False
        if self.spiller is not None:
            await self.spiller.forget(item)  # its parts first: a failure leaves the response to delete again
        await self.table.delete(response_key(response_id))
        return True

    async def put_conversation(self, chat_id: str, metadata: dict[str, str]) -> None:
        """The OpenAI metadata of a conversation (our chat), kept beside its META."""
        await self.table.put({**conversation_key(chat_id), "metadata": _dumps(metadata)})

    async def conversation_metadata(self, chat_id: str) -> dict[str, str]:
        item = await self.table.get(conversation_key(chat_id))
        return json.loads(item["metadata"]) if item and item.get("metadata") else {}
