"""Table items of the domain models: their key attributes plus the model's own camelCase dump.

An item is `{**key, **model.model_dump(by_alias=True, exclude_none=True)}`; a read is `model_validate` of the
item with the fields its key holds put back. Each model's `Shape` says only what that leaves out: the fields
its key holds (not stored again), the nested values stored as JSON text with snake_case names (as DynamoDB
has always held them: `toolCalls`, `usage`, `result`, `snapshot`, `params`, `keyTopics`, `facts`), the fields
written only when set, and the fields another write owns.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from agent_core.domain.models import (
    Chat,
    DailySummary,
    Message,
    Model,
    Profile,
    Run,
    RunPointer,
    SessionSummary,
    Summary,
    Wait,
    WaitKind,
)
from agent_core.store.schema import GSI1, GSI2, GSI3, PK, SHARDS, SK, TTL_ATTRIBUTE, shard
from agent_core.store.table import Atom, Item, Key, eq, not_exists

META = "META"
SUMMARY = "SUMMARY"
MSG_PREFIX = "MSG#"
MSG_END = "MSG#~"  # sorts after every message id and MSG#DAY# keys
RUN_PREFIX = "RUN#"
RUN_END = "RUN#~"
WAIT_PREFIX = "WAIT#"  # a run's WAIT items (frontend calls) share its partition
SESSION_PREFIX = "SESSION#"
DAY_PREFIX = "DAY#"
POINTER_TTL_S = 7 * 24 * 3600
ANSWER_ID = "answerMessageId"  # a RUN item's stored result names its ASSISTANT message instead of copying it

# ----- keys -----


def chat_pk(chat_id: str) -> str:
    return f"CHAT#{chat_id}"


def user_pk(user_id: str) -> str:
    return f"USER#{user_id}"


def run_pk(run_id: str) -> str:
    return f"RUN#{run_id}"


user_chats_pk = user_pk  # gsi1: a user's chats by last activity


def lease_index_pk(index: int) -> str:
    """gsi3 (sparse): the META of every chat whose lease is held, in SHARDS partitions."""
    return f"LEASE#{index}"


def lease_index_keys(chat_id: str, taken_at: int) -> dict[str, str]:
    """The META's gsi3 keys while a run holds its lease (the sort key: when the lease was taken)."""
    return {GSI3.pk: lease_index_pk(shard(chat_id, SHARDS)), GSI3.sk: f"{taken_at:015d}#{chat_id}"}


# A META's lease: the run holding it, its expiry and its place in the lease index, removed together.
# The process that continued a run from its checkpoint holds the run's lease under its own token
# (runtime/continuation.py): the process that ran it before, if it still lives, no longer holds it.
LEASE_HOLDER = "leaseHolder"
LEASE_ATTRIBUTES = ("activeRunId", "leaseExpiresAt", LEASE_HOLDER, GSI3.pk, GSI3.sk)


def lease_held(run_id: str, holder: str | None) -> tuple[Atom, Atom]:
    """The chat's lease is this run's, held by this process (`holder`: the token of a continuation; None: the
    run's first process)."""
    return eq("activeRunId", run_id), not_exists(LEASE_HOLDER) if holder is None else eq(LEASE_HOLDER, holder)


def idle_index_pk(chat_shard: int) -> str:
    """gsi2 (sparse): the META of every chat with an open session, by the time its session is due idle."""
    return f"IDLE#{chat_shard}"


def idle_due_sk(due_ms: int) -> str:
    return f"{due_ms:015d}"


def idle_index_keys(chat_shard: int, due_ms: int) -> dict[str, str]:
    """The META's gsi2 keys while its session is open."""
    return {GSI2.pk: idle_index_pk(chat_shard), GSI2.sk: idle_due_sk(due_ms)}


# A META's open session: its id, its start and its place in the idle index, removed together.
SESSION_ATTRIBUTES = ("sessionId", "sessionStartedAt", GSI2.pk, GSI2.sk)


def day_close_index_pk(bucket: str, mark_shard: int) -> str:
    """gsi3 (sparse): the day markers of one bucket and shard, by when the user's local day closes."""
    return f"DAYCLOSE#{bucket}#{mark_shard}"


def day_close_index_keys(bucket: str, mark_shard: int, close_ms: int, user_id: str) -> dict[str, str]:
    """A day marker's gsi3 keys until the daily job has processed it."""
    return {GSI3.pk: day_close_index_pk(bucket, mark_shard), GSI3.sk: f"{close_ms:015d}#{user_id}"}


def day_closed_by_sk(closed_by_ms: int) -> str:
    """The highest gsi3 sort key of a marker whose day closed by `closed_by_ms`."""
    return f"{closed_by_ms:015d}#~"


def meta_key(chat_id: str) -> Key:
    return {PK: chat_pk(chat_id), SK: META}


def summary_key(chat_id: str) -> Key:
    return {PK: chat_pk(chat_id), SK: SUMMARY}


def run_key(chat_id: str, run_id: str) -> Key:
    return {PK: chat_pk(chat_id), SK: f"{RUN_PREFIX}{run_id}"}


def request_key(chat_id: str, request_id: str) -> Key:
    return {PK: chat_pk(chat_id), SK: f"REQ#{request_id}"}


def first_request_key(user_id: str, request_id: str) -> Key:
    """The marker of a user's requestId that opened a new chat: at most one chat per (user, requestId). The
    chat's META names it (FIRST_REQUEST_ID), and the chat's deletion deletes it."""
    return {PK: user_pk(user_id), SK: f"REQ#{request_id}"}


FIRST_REQUEST_ID = "firstRequestId"  # the META attribute naming the chat's first-request marker


def pointer_key(run_id: str) -> Key:
    return {PK: run_pk(run_id), SK: META}


def wait_key(run_id: str, tool_id: str) -> Key:
    return {PK: run_pk(run_id), SK: f"{WAIT_PREFIX}{tool_id}"}


CHECKPOINT = "CHECKPOINT"  # a run's checkpoint where it waits on people (store/run_checkpoint.py)


def checkpoint_key(run_id: str) -> Key:
    return {PK: run_pk(run_id), SK: CHECKPOINT}


LOG_PREFIX = "LOG#"  # a run's event log batches share its partition (store/run_log.py)
LOG_END = "LOG#~"


def log_sk(first_seq: int) -> str:
    return f"{LOG_PREFIX}{first_seq:010d}"


def log_key(run_id: str, first_seq: int) -> Key:
    """One batch of a run's event log: its events from `first_seq` on."""
    return {PK: run_pk(run_id), SK: log_sk(first_seq)}


def message_sk(message_id: str) -> str:
    return f"{MSG_PREFIX}{message_id}"


def activity_sk(last_activity_at: int, chat_id: str) -> str:
    return f"{last_activity_at:015d}#{chat_id}"


def session_key(chat_id: str, session_id: str) -> Key:
    return {PK: chat_pk(chat_id), SK: f"{SESSION_PREFIX}{session_id}"}


def profile_key(user_id: str) -> Key:
    return {PK: user_pk(user_id), SK: "PROFILE"}


def day_key(user_id: str, date: str) -> Key:
    return {PK: user_pk(user_id), SK: f"{DAY_PREFIX}{date}"}


def daymark_key(user_id: str, date: str) -> Key:
    return {PK: user_pk(user_id), SK: f"DAYMARK#{date}"}


def response_key(response_id: str) -> Key:
    """A stored /v1/responses Response (store/responses.py)."""
    return {PK: f"RESP#{response_id}", SK: META}


def response_id_of(item: Item) -> str:
    """The response id a stored Response's key holds."""
    return str(item[PK]).removeprefix("RESP#")


def conversation_key(chat_id: str) -> Key:
    """The OpenAI metadata of a conversation (our chat), beside the chat's META: deleted with the chat."""
    return {PK: chat_pk(chat_id), SK: "OPENAI#CONVERSATION"}


def idempotency_key(user_id: str, key: str) -> Key:
    """A user's `Idempotency-Key` claim for a response id."""
    return {PK: user_pk(user_id), SK: f"IDEMPOTENCY#{key}"}


# The usage ledger and budgets (agent_core.usage): per user, in the user's partition.
USAGE_PREFIX = "USAGE#"  # USAGE#{day}#{model}: one ledger row per (local day, model)
USAGE_END = "USAGE#~"


def usage_key(user_id: str, day: str, model: str) -> Key:
    return {PK: user_pk(user_id), SK: f"{USAGE_PREFIX}{day}#{model}"}


def usage_mark_key(user_id: str, marker: str) -> Key:
    """The marker of one recorded run or job: its usage is added to the ledger at most once."""
    return {PK: user_pk(user_id), SK: f"USAGEMARK#{marker}"}


def budget_key(user_id: str, day: str) -> Key:
    """A user's spend of one local day (reservations included) and their requests per minute."""
    return {PK: user_pk(user_id), SK: f"BUDGET#{day}"}


def limits_key(user_id: str) -> Key:
    """A user's own budgets and rate limit, overriding the settings."""
    return {PK: user_pk(user_id), SK: "LIMITS"}


# ----- shapes -----


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON")


def _json_text(value: Any) -> str:
    """A nested value as the JSON text it is stored as (snake_case names, as the model's field names)."""
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, ensure_ascii=False, default=_plain)


M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class Shape(Generic[M]):
    """How one model is stored besides its key and its camelCase dump."""

    model: type[M]
    keyed: Callable[[Item], dict[str, str]]  # the fields its key holds, from the item's key attributes
    text: tuple[str, ...] = ()  # nested values stored as JSON text
    sparse: tuple[str, ...] = ()  # written only when set (not empty, not false)
    others: tuple[str, ...] = ()  # written by other operations, never by this item's put

    @cached_property
    def _aliases(self) -> dict[str, str]:
        return {name: field.alias or name for name, field in self.model.model_fields.items()}

    def dump(self, value: M, key: Key, **extra: Any) -> Item:
        """The item: its key, the model's camelCase attributes, then `extra` (index keys, TTL, references)."""
        held = set(self.keyed({**key}))
        empty = {name for name in self.sparse if not getattr(value, name)}
        skip = held | empty | set(self.text) | set(self.others)
        item: Item = {**key, **value.model_dump(mode="json", by_alias=True, exclude_none=True, exclude=skip)}
        for name in self.text:
            nested = getattr(value, name)
            if nested is not None and name not in empty:
                item[self._aliases[name]] = _json_text(nested)
        item.update({k: v for k, v in extra.items() if v is not None})
        return item

    def load(self, item: Item) -> M:
        """The model an item holds (attributes it does not know, such as index keys, are ignored)."""
        data = dict(item)
        for name in self.text:
            alias = self._aliases[name]
            raw = data.pop(alias, None)
            if raw:
                data[alias] = json.loads(raw)
        return self.model.model_validate({**data, **self.keyed(item)})


def _strip(prefix: str, attr: str = PK) -> Callable[[Item], str]:
    return lambda item: str(item[attr]).removeprefix(prefix)


_CHAT = Shape(
    Chat,
    keyed=lambda item: {},
    # The lease and the open session are the turn's and the idle job's updates of the META.
    others=("active_run_id", "lease_expires_at", "session_id", "session_started_at"),
)
_MESSAGE = Shape(
    Message,
    keyed=lambda item: {"chat_id": _strip("CHAT#")(item)},
    text=("tool_calls",),
    sparse=("tool_calls",),
)
_RUN = Shape(
    Run,
    keyed=lambda item: {"chat_id": _strip("CHAT#")(item)},
    text=("usage", "result", "snapshot"),
    sparse=("cancel_requested", "decided_call_ids"),  # `uiMessageId` too: written only when set (not None)
)
_POINTER = Shape(RunPointer, keyed=lambda item: {"run_id": _strip("RUN#")(item)})
_WAIT = Shape(
    Wait,
    keyed=lambda item: {"run_id": _strip("RUN#")(item), "tool_id": _strip(WAIT_PREFIX, SK)(item)},
    text=("params", "args"),
    sparse=("tool_name", "reason", "decision_reason", "decided_by", "decided_at"),
)
_SUMMARY = Shape(Summary, keyed=lambda item: {"chat_id": _strip("CHAT#")(item)})
_SESSION = Shape(
    SessionSummary,
    keyed=lambda item: {"chat_id": _strip("CHAT#")(item), "session_id": _strip(SESSION_PREFIX, SK)(item)},
    text=("key_topics",),
)
_PROFILE = Shape(Profile, keyed=lambda item: {"user_id": _strip("USER#")(item)}, text=("facts",))
_DAILY = Shape(
    DailySummary,
    keyed=lambda item: {"user_id": _strip("USER#")(item), "date": _strip(DAY_PREFIX, SK)(item)},
    text=("key_topics",),
)


# ----- items -----


def chat_to_item(chat: Chat) -> Item:
    index = {GSI1.pk: user_chats_pk(chat.user_id), GSI1.sk: activity_sk(chat.last_activity_at, chat.chat_id)}
    return _CHAT.dump(chat, meta_key(chat.chat_id), **index)


def chat_from_item(item: Item) -> Chat:
    return _CHAT.load(item)


def message_to_item(message: Message) -> Item:
    return _MESSAGE.dump(message, {PK: chat_pk(message.chat_id), SK: message_sk(message.id)})


def message_from_item(item: Item) -> Message:
    return _MESSAGE.load(item)


def run_to_item(run: Run, answer_id: str | None = None) -> Item:
    """The RUN item; with `answer_id` its stored result names the ASSISTANT message instead of copying it."""
    if run.result is not None and answer_id is not None:
        result = run.result.model_copy(update={"assistant_message": ""})
        return _RUN.dump(
            run.model_copy(update={"result": result}), run_key(run.chat_id, run.run_id), **{ANSWER_ID: answer_id}
        )
    return _RUN.dump(run, run_key(run.chat_id, run.run_id))


def run_from_item(item: Item) -> Run:
    return _RUN.load(item)


def pointer_to_item(pointer: RunPointer, expires_at: int) -> Item:
    return _POINTER.dump(pointer, pointer_key(pointer.run_id), **{TTL_ATTRIBUTE: expires_at})


def pointer_from_item(item: Item) -> RunPointer:
    return _POINTER.load(item)


def wait_to_item(wait: Wait) -> Item:
    item = _WAIT.dump(wait, wait_key(wait.run_id, wait.tool_id))
    if wait.kind == WaitKind.FRONTEND:  # a frontend call's item keeps the shape it had before approvals
        item.pop("kind", None)
        item.pop("approved", None)
    return item


def wait_from_item(item: Item) -> Wait:
    return _WAIT.load(item)


def summary_to_item(summary: Summary) -> Item:
    return _SUMMARY.dump(summary, summary_key(summary.chat_id))


def summary_from_item(item: Item) -> Summary:
    return _SUMMARY.load(item)


def session_to_item(session: SessionSummary) -> Item:
    return _SESSION.dump(session, session_key(session.chat_id, session.session_id))


def session_from_item(item: Item) -> SessionSummary:
    return _SESSION.load(item)


def profile_to_item(profile: Profile) -> Item:
    return _PROFILE.dump(profile, profile_key(profile.user_id))


def profile_from_item(item: Item) -> Profile:
    return _PROFILE.load(item)


def daily_to_item(day: DailySummary) -> Item:
    return _DAILY.dump(day, day_key(day.user_id, day.date))


def daily_from_item(item: Item) -> DailySummary:
    return _DAILY.load(item)


# --- long-term memory records (store/memory_records.py) ---
REC_PREFIX = "REC#"
VERSION = "VER"


def records_pk(user_id: str) -> str:
    """A user's memory records partition: every search is keyed by the user."""
    return f"MEM#{user_id}"


def record_key(user_id: str, record_id: str) -> Key:
    return {PK: records_pk(user_id), SK: f"{REC_PREFIX}{record_id}"}


def version_key(user_id: str) -> Key:
    """The token replaced on every write or delete of the user's records."""
    return {PK: records_pk(user_id), SK: VERSION}


def mark_key(chat_id: str) -> Key:
    """A chat's memory-records progress mark (in the chat's partition, so it goes with the chat)."""
    return {PK: chat_pk(chat_id), SK: "MEMMARK"}
