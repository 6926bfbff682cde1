"""Table items of every domain model: built from the model's camelCase dump, read back with `model_validate`,
in the exact shape earlier versions wrote and read (so data already stored still reads, and the other way round).

Every item kind round-trips through each Table adapter (in-memory, moto DynamoDB, SQLite): DynamoDB hands
numbers back as Decimal, and the models take them as they come.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent_core.domain.models import (
    Chat,
    DailySummary,
    Kind,
    Message,
    Profile,
    ProfileFact,
    Role,
    Run,
    RunPointer,
    RunStatus,
    SessionSummary,
    Summary,
    ToolCall,
    ToolCallRecord,
    ToolStatus,
    TurnResult,
    Usage,
    Wait,
    WaitKind,
    WaitStatus,
)
from agent_core.store import items as it
from agent_core.store.schema import PK, SK
from agent_core.store.table import Item, Table

CHAT = Chat(chat_id="c1", user_id="u1", title="旅行", created_at=1, last_activity_at=2, message_count=3, version=1)
ASKED = Message(id="m1", chat_id="c1", role=Role.USER, content="你好", run_id="r1", request_id="q1", created_at=1)
CALLED = Message(
    id="m2",
    chat_id="c1",
    role=Role.ASSISTANT,
    tool_calls=[ToolCall(id="t1", name="get_time", arguments='{"tz":"上海"}')],
    run_id="r1",
    request_id="q1",
    created_at=2,
)
ANSWERED = Message(
    id="m3", chat_id="c1", role=Role.TOOL, content="12:00", tool_call_id="t1", tool_name="get_time", created_at=3
)
DAILY_MESSAGE = Message(id="DAY#2026-01-01", chat_id="c1", role=Role.SYSTEM, kind=Kind.DAILY_SUMMARY, created_at=4)
RUNNING = Run(run_id="r1", chat_id="c1", user_id="u1", request_id="q1", started_at=5, lease_at=6)
ENDED = Run(
    run_id="r2",
    chat_id="c1",
    user_id="u1",
    request_id="q2",
    status=RunStatus.COMPLETED,
    agent_version="v3",
    model="gpt",
    usage=Usage(prompt_tokens=3, completion_tokens=4, cache_read_tokens=2),
    started_at=5,
    ended_at=9,
    first_token_ms=3,
    result=TurnResult(
        request_id="q2",
        assistant_message="答",
        tool_calls=[ToolCallRecord(id="t1", tool_name="get_time", status=ToolStatus.OK, duration_ms=4)],
        run_id="r2",
        chat_id="c1",
    ),
    cancel_requested=True,
    snapshot=[{"type": "content.snapshot", "text": "答", "seq": 2}],
    answered_by="openai:gpt",
)
FAILED = Run(
    run_id="r3",
    chat_id="c1",
    user_id="u1",
    request_id="q3",
    status=RunStatus.FAILED,
    started_at=5,
    error_code="llm_error",
    error_message="the model failed",
    snapshot=[],
)
# An approval continuation on the UI stream: the message it goes on and the calls its request decided
CONTINUING = Run(
    run_id="r4",
    chat_id="c1",
    user_id="u1",
    request_id="q4",
    started_at=5,
    client_run_id="run-2",
    ui_message_id="msg_r0",
    decided_call_ids=["t1", "t2"],
)
POINTER = RunPointer(run_id="r1", chat_id="c1", user_id="u1")
WAITING = Wait(run_id="r1", tool_id="t1", user_id="u1", expires_at=50)
SUBMITTED = Wait(
    run_id="r1", tool_id="t2", user_id="u1", status=WaitStatus.SUBMITTED, params={"城市": "上海"}, expires_at=50
)
APPROVAL = Wait(
    run_id="r1",
    tool_id="t2",
    user_id="u1",
    kind=WaitKind.APPROVAL,
    expires_at=50,
    tool_name="http_get",
    args={"url": "https://example.net/页"},
    reason="a fetch outside example.com",
)
DECIDED = APPROVAL.model_copy(
    update={
        "status": WaitStatus.SUBMITTED,
        "approved": False,
        "decision_reason": "not that host",
        "decided_by": "u1",
        "decided_at": 1795441456142,
    }
)
SUMMARY = Summary(chat_id="c1", content="so far", covers_message_id="m2", covered_count=2, updated_at=7, version=2)
SESSION = SessionSummary(
    chat_id="c1",
    session_id="s1",
    user_id="u1",
    summary="trip plans",
    key_topics=["旅行", "budget"],
    message_count=4,
    local_date="2026-01-01",
    started_at=1,
    ended_at=9,
    skipped=True,
)
PROFILE = Profile(
    user_id="u1",
    timezone="Asia/Shanghai",
    facts=[ProfileFact(aspect="interests", key="travel", value="喜欢旅行", source_date="2026-01-01")],
    updated_at=8,
)
BARE_PROFILE = Profile(user_id="u2")
DAY = DailySummary(
    user_id="u1",
    date="2026-01-01",
    summary="a day",
    key_topics=["budget"],
    session_count=1,
    message_count=4,
    updated_at=9,
)

# (model, item, read back): every kind of item the store writes from a model
KINDS: dict[str, tuple[Any, Item, Callable[[Item], Any]]] = {
    "chat": (CHAT, it.chat_to_item(CHAT), it.chat_from_item),
    "message": (ASKED, it.message_to_item(ASKED), it.message_from_item),
    "message with calls": (CALLED, it.message_to_item(CALLED), it.message_from_item),
    "tool message": (ANSWERED, it.message_to_item(ANSWERED), it.message_from_item),
    "daily message": (DAILY_MESSAGE, it.message_to_item(DAILY_MESSAGE), it.message_from_item),
    "running run": (RUNNING.model_copy(update={"lease_at": None}), it.run_to_item(RUNNING), it.run_from_item),
    "ended run": (ENDED, it.run_to_item(ENDED), it.run_from_item),
    "failed run": (FAILED, it.run_to_item(FAILED), it.run_from_item),
    "continuing run": (CONTINUING, it.run_to_item(CONTINUING), it.run_from_item),
    "run pointer": (POINTER, it.pointer_to_item(POINTER, 99), it.pointer_from_item),
    "wait": (WAITING, it.wait_to_item(WAITING), it.wait_from_item),
    "submitted wait": (SUBMITTED, it.wait_to_item(SUBMITTED), it.wait_from_item),
    "approval wait": (APPROVAL, it.wait_to_item(APPROVAL), it.wait_from_item),
    "decided approval": (DECIDED, it.wait_to_item(DECIDED), it.wait_from_item),
    "summary": (SUMMARY, it.summary_to_item(SUMMARY), it.summary_from_item),
    "session": (SESSION, it.session_to_item(SESSION), it.session_from_item),
    "profile": (PROFILE, it.profile_to_item(PROFILE), it.profile_from_item),
    "bare profile": (BARE_PROFILE, it.profile_to_item(BARE_PROFILE), it.profile_from_item),
    "daily": (DAY, it.daily_to_item(DAY), it.daily_from_item),
}


@pytest.mark.parametrize("kind", list(KINDS))
async def test_every_item_kind_round_trips_through_the_table(any_table: Table, kind: str) -> None:
    model, item, read = KINDS[kind]
    # Given the item of a model, written to the table
    await any_table.put(item)
    # When it is read back
    stored = await any_table.get({PK: item[PK], SK: item[SK]})
    # Then it is the same model
    assert stored is not None
    assert read(stored) == model


# The items as earlier versions wrote them, attribute for attribute and byte for byte.
TODAY: dict[str, Item] = {
    "message with calls": {
        "pk": "CHAT#c1",
        "sk": "MSG#m2",
        "id": "m2",
        "role": "ASSISTANT",
        "kind": "NORMAL",
        "content": "",
        "createdAt": 2,
        "runId": "r1",
        "requestId": "q1",
        "toolCalls": '[{"id": "t1", "name": "get_time", "arguments": "{\\"tz\\":\\"上海\\"}"}]',
    },
    "ended run": {
        "pk": "CHAT#c1",
        "sk": "RUN#r2",
        "runId": "r2",
        "userId": "u1",
        "requestId": "q2",
        "status": "completed",
        "agentKey": "main-agent",
        "agentVersion": "v3",
        "model": "gpt",
        "usage": '{"prompt_tokens":3,"completion_tokens":4,"cache_read_tokens":2,"cache_write_tokens":0}',
        "startedAt": 5,
        "endedAt": 9,
        "firstTokenMs": 3,
        "result": '{"request_id":"q2","assistant_message":"答","tool_calls":[{"id":"t1","tool_name":"get_time","status":"ok","reason":"","duration_ms":4}],"finish_reason":"stop","run_id":"r2","chat_id":"c1"}',
        "snapshot": '[{"type": "content.snapshot", "text": "答", "seq": 2}]',
        "answeredBy": "openai:gpt",
        "cancelRequested": True,
    },
    "running run": {
        "pk": "CHAT#c1",
        "sk": "RUN#r1",
        "runId": "r1",
        "userId": "u1",
        "requestId": "q1",
        "status": "running",
        "agentKey": "main-agent",
        "agentVersion": "",
        "model": "",
        "usage": '{"prompt_tokens":0,"completion_tokens":0,"cache_read_tokens":0,"cache_write_tokens":0}',
        "startedAt": 5,
    },
    "continuing run": {
        "pk": "CHAT#c1",
        "sk": "RUN#r4",
        "runId": "r4",
        "userId": "u1",
        "requestId": "q4",
        "status": "running",
        "agentKey": "main-agent",
        "agentVersion": "",
        "model": "",
        "usage": '{"prompt_tokens":0,"completion_tokens":0,"cache_read_tokens":0,"cache_write_tokens":0}',
        "startedAt": 5,
        "clientRunId": "run-2",
        "uiMessageId": "msg_r0",
        "decidedCallIds": ["t1", "t2"],
    },
    "chat": {
        "pk": "CHAT#c1",
        "sk": "META",
        "chatId": "c1",
        "userId": "u1",
        "title": "旅行",
        "agentKey": "main-agent",
        "createdAt": 1,
        "lastActivityAt": 2,
        "messageCount": 3,
        "version": 1,
        "gsi1pk": "USER#u1",
        "gsi1sk": "000000000000002#c1",
    },
    "run pointer": {"pk": "RUN#r1", "sk": "META", "chatId": "c1", "userId": "u1", "expiresAt": 99},
    "wait": {"pk": "RUN#r1", "sk": "WAIT#t1", "userId": "u1", "status": "waiting", "expiresAt": 50},
    "submitted wait": {
        "pk": "RUN#r1",
        "sk": "WAIT#t2",
        "userId": "u1",
        "status": "submitted",
        "expiresAt": 50,
        "params": '{"城市": "上海"}',
    },
    "summary": {
        "pk": "CHAT#c1",
        "sk": "SUMMARY",
        "content": "so far",
        "coversMessageId": "m2",
        "coveredCount": 2,
        "updatedAt": 7,
        "version": 2,
    },
    "session": {
        "pk": "CHAT#c1",
        "sk": "SESSION#s1",
        "userId": "u1",
        "summary": "trip plans",
        "keyTopics": '["旅行", "budget"]',
        "messageCount": 4,
        "localDate": "2026-01-01",
        "startedAt": 1,
        "endedAt": 9,
        "skipped": True,
    },
    "profile": {
        "pk": "USER#u1",
        "sk": "PROFILE",
        "facts": '[{"aspect": "interests", "key": "travel", "value": "喜欢旅行", "source_date": "2026-01-01"}]',
        "updatedAt": 8,
        "timezone": "Asia/Shanghai",
    },
    "bare profile": {"pk": "USER#u2", "sk": "PROFILE", "facts": "[]", "updatedAt": 0},
    "daily": {
        "pk": "USER#u1",
        "sk": "DAY#2026-01-01",
        "summary": "a day",
        "keyTopics": '["budget"]',
        "sessionCount": 1,
        "messageCount": 4,
        "updatedAt": 9,
    },
}


@pytest.mark.parametrize("kind", list(TODAY))
def test_items_keep_the_shape_earlier_versions_wrote(kind: str) -> None:
    model, item, read = KINDS[kind]
    # An item in today's exact shape reads as its model, and the model writes exactly that item
    assert read(TODAY[kind]) == model
    assert item == TODAY[kind]


def test_a_run_whose_answer_is_its_message_stores_the_result_without_a_copy() -> None:
    item = it.run_to_item(ENDED, answer_id="m9")
    assert item[it.ANSWER_ID] == "m9"
    assert TurnResult.model_validate_json(item["result"]).assistant_message == ""
    back = it.run_from_item(item)  # read back, the result names the message; the reader puts its text back
    assert ENDED.result is not None and back.result == ENDED.result.model_copy(update={"assistant_message": ""})
    assert back.model_copy(update={"result": ENDED.result}) == ENDED
    assert it.run_to_item(RUNNING, answer_id="m9").get(it.ANSWER_ID) is None  # no result, nothing to name


def test_the_meta_read_back_carries_the_lease_and_the_open_session() -> None:
    # The turn's and the idle job's updates add these to the META; the chat's own put never writes them
    meta = {**TODAY["chat"], "activeRunId": "r1", "leaseExpiresAt": 60, "sessionId": "s1", "sessionStartedAt": 5}
    chat = it.chat_from_item(meta)
    assert (chat.active_run_id, chat.lease_expires_at, chat.session_id, chat.session_started_at) == ("r1", 60, "s1", 5)
    assert it.chat_to_item(chat) == TODAY["chat"]
