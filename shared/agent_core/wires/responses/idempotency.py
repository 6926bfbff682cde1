"""`Idempotency-Key` on POST /v1/responses: a retried create answers with the first attempt's Response.

The openai SDK sends no `Idempotency-Key` by itself (its OpenAI client has no idempotency header), so a client
that wants retries to be safe sends one: `client.responses.create(..., extra_headers={"Idempotency-Key": key})`.
A key is claimed for a new response id by one conditional write keyed on (user, key), before the turn writes
anything: a second attempt never runs a second turn, never opens a second conversation. It answers with the first
attempt's Response (its events replayed with `stream: true`); 409 `run_in_progress` while that one still runs
(a background one answers its current state, as GET does). A first attempt that failed, was cancelled, or died
before saving its Response frees the key: the retry runs. `store: false` responses keep nothing to answer with:
the key is not used there.
"""

from __future__ import annotations

import re
import time

from agent_core.errors import InvalidRequest, RunInProgress
from agent_core.store.items import idempotency_key as claim_key
from agent_core.store.responses import ACTIVE, RESPONSE_TTL_S, ResponseRecord, ResponseStore
from agent_core.store.schema import PK, TTL_ATTRIBUTE
from agent_core.store.table import Condition, ConditionFailed, Item, eq, not_exists

HEADER = "Idempotency-Key"
MAX_KEY_CHARS = 200
_KEY = re.compile(r"[A-Za-z0-9._:\-]+")
RERUN = ("failed", "cancelled")  # a first attempt ending so is run again by its retry


def idempotency_key(value: str | None) -> str | None:
    """The request's key, validated (400 before any work), or None."""
    if value is None:
        return None
    if not value or len(value) > MAX_KEY_CHARS or not _KEY.fullmatch(value):
        raise InvalidRequest(
            f"{HEADER} must be 1..{MAX_KEY_CHARS} characters: letters, digits and . _ : -",
            param=HEADER,
            code="invalid_idempotency_key",
        )
    return value


class IdempotencyKeys:
    """Claims of (user, key) for response ids, on the responses' table."""

    def __init__(self, responses: ResponseStore, stale_ms: int) -> None:
        self._responses = responses
        self._table = responses.table
        self._stale_ms = stale_ms  # a claim without a saved Response after this long died with its process

    async def claim(self, user_id: str, key: str, response_id: str) -> ResponseRecord | None:
        """Claim `key` for `response_id`: None when it is ours to run, else the first attempt's Response.

        409 `run_in_progress` while the first attempt has claimed the key but not saved its Response yet."""
        now_ms = int(time.time() * 1000)
        item: Item = {
            **claim_key(user_id, key),
            "responseId": response_id,
            "claimedAt": now_ms,
            TTL_ATTRIBUTE: now_ms // 1000 + RESPONSE_TTL_S,
        }
        for _ in range(3):  # each pass either claims, or finds a live earlier claim, or takes a dead one over
            try:
                await self._table.put(item, Condition.of(not_exists(PK)))
                return None
            except ConditionFailed:
                pass
            earlier = await self._table.get(claim_key(user_id, key))
            if earlier is None:
                continue  # released meanwhile: claim again
            first_id = str(earlier["responseId"])
            record = await self._responses.get(first_id, user_id)
            expired = int(earlier.get(TTL_ATTRIBUTE, 0)) <= now_ms // 1000
            dead = record is None and int(earlier.get("claimedAt", 0)) + self._stale_ms < now_ms
            if not (expired or dead or (record is not None and record.status in RERUN)):
                if record is None:
                    raise _still_starting()
                return record
            try:  # take the finished-badly (or dead) claim over, unless another retry just did
                await self._table.put(item, Condition.of(eq("responseId", first_id)))
                return None
            except ConditionFailed:
                continue
        raise _still_starting()

    async def release(self, user_id: str, key: str, response_id: str) -> None:
        """Free a claim whose attempt failed before saving its Response (its retry runs)."""
        try:
            await self._table.delete(claim_key(user_id, key), Condition.of(eq("responseId", response_id)))
        except ConditionFailed:
            return


def _still_starting() -> RunInProgress:
    return RunInProgress("a request with this Idempotency-Key is still starting", param=HEADER)


def answer_is_final(record: ResponseRecord) -> bool:
    """Whether a retry answers with this Response (else it is running: 409, or its state when background)."""
    return record.status not in ACTIVE or record.background
