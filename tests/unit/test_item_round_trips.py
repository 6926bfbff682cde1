"""Each stored kind as a table: domain model -> table item -> domain model gives the model back.

Only the public to/from functions of the item mapping are used, so the mapping can be rewritten freely.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

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
    WaitStatus,
)
from agent_core.store import items
from agent_core.store.schema import PK, SK

T0 = 1_700_000_000_000
RESULT = TurnResult(
    request_id="req_1",
    assistant_message="It is 12:00 in 上海.",
    tool_calls=[ToolCallRecord(id="call_1", tool_name="now", status=ToolStatus.OK, duration_ms=12)],
    finish_reason="stop",
    run_id="run_1",
    chat_id="c1",
)

# (case id, model, to_item, from_item)
CASES: list[tuple[str, BaseModel, Callable[[Any], dict[str, Any]], Callable[[dict[str, Any]], Any]]] = [
    (
        "chat",
        Chat(chat_id="c1", user_id="u1", title="Trip", agent_key="main-agent", created_at=T0, last_activity_at=T0 + 5),
        items.chat_to_item,
        items.chat_from_item,
    ),
    (
        "chat with counters",
        Chat(chat_id="c2", user_id="u1", created_at=T0, last_activity_at=T0, message_count=4, version=3),
        items.chat_to_item,
        items.chat_from_item,
    ),
    (
        "user message",
        Message(id="m1", chat_id="c1", role=Role.USER, content="你好", request_id="req_1", created_at=T0),
        items.message_to_item,
        items.message_from_item,
    ),
    (
        "assistant message with tool calls",
        Message(
            id="m2",
            chat_id="c1",
            role=Role.ASSISTANT,
            tool_calls=[
                ToolCall(id="call_1", name="now", arguments='{"tz":"Asia/Shanghai"}'),
                ToolCall(id="c", name="x"),
            ],
            run_id="run_1",
            created_at=T0,
        ),
        items.message_to_item,
        items.message_from_item,
    ),
    (
        "tool message",
        Message(
            id="m3",
            chat_id="c1",
            role=Role.TOOL,
            content='{"time":"12:00"}',
            tool_call_id="call_1",
            tool_name="now",
            run_id="run_1",
            created_at=T0,
        ),
        items.message_to_item,
        items.message_from_item,
    ),
    (
        "daily summary message",
        Message(
            id="m4", chat_id="c1", role=Role.ASSISTANT, kind=Kind.DAILY_SUMMARY, content="Yesterday…", created_at=T0
        ),
        items.message_to_item,
        items.message_from_item,
    ),
    (
        "running run",
        Run(run_id="run_1", chat_id="c1", user_id="u1", request_id="req_1", started_at=T0),
        items.run_to_item,
        items.run_from_item,
    ),
    (
        "finished run with result, usage, snapshot",
        Run(
            run_id="run_1",
            chat_id="c1",
            user_id="u1",
            request_id="req_1",
            status=RunStatus.COMPLETED,
            agent_version="v2",
            model="gpt-4.1-mini",
            usage=Usage(prompt_tokens=100, completion_tokens=20, cache_read_tokens=50),
            started_at=T0,
            ended_at=T0 + 900,
            first_token_ms=120,
            result=RESULT,
            snapshot=[{"type": "content.delta", "delta": "It is"}],
            answered_by="openai:gpt-4.1-mini",
        ),
        items.run_to_item,
        items.run_from_item,
    ),
    (
        "failed run, cancel requested, snapshot elsewhere",
        Run(
            run_id="run_2",
            chat_id="c1",
            user_id="u1",
            request_id="req_2",
            status=RunStatus.FAILED,
            started_at=T0,
            ended_at=T0 + 1,
            error_code="llm_unavailable",
            error_message="upstream 503",
            cancel_requested=True,
            snapshot_key="snapshots/run_2.json",
        ),
        items.run_to_item,
        items.run_from_item,
    ),
    (
        "run pointer",
        RunPointer(run_id="run_1", chat_id="c1", user_id="u1"),
        lambda p: items.pointer_to_item(p, expires_at=T0 // 1000),
        items.pointer_from_item,
    ),
    (
        "wait with params",
        Wait(run_id="run_1", tool_id="call_9", user_id="u1", params={"color": ["red", "蓝"]}, expires_at=T0 // 1000),
        items.wait_to_item,
        items.wait_from_item,
    ),
    (
        "submitted wait without params",
        Wait(run_id="run_1", tool_id="call_8", user_id="u1", status=WaitStatus.SUBMITTED, expires_at=1),
        items.wait_to_item,
        items.wait_from_item,
    ),
    (
        "chat summary",
        Summary(chat_id="c1", content="They planned a trip.", covers_message_id="m9", covered_count=9, updated_at=T0),
        items.summary_to_item,
        items.summary_from_item,
    ),
    (
        "session summary",
        SessionSummary(
            chat_id="c1",
            session_id="s1",
            user_id="u1",
            summary="Booked a hotel.",
            key_topics=["travel", "酒店"],
            message_count=6,
            local_date="2026-11-23",
            started_at=T0,
            ended_at=T0 + 60_000,
        ),
        items.session_to_item,
        items.session_from_item,
    ),
    (
        "skipped session",
        SessionSummary(
            chat_id="c1",
            session_id="s2",
            user_id="u1",
            local_date="2026-11-23",
            started_at=T0,
            ended_at=T0,
            skipped=True,
        ),
        items.session_to_item,
        items.session_from_item,
    ),
    (
        "profile with facts and zone",
        Profile(
            user_id="u1",
            timezone="Asia/Shanghai",
            facts=[ProfileFact(aspect="budget", key="hotel", value="< 800 CNY", source_date="2026-11-22")],
            updated_at=T0,
        ),
        items.profile_to_item,
        items.profile_from_item,
    ),
    ("empty profile", Profile(user_id="u2"), items.profile_to_item, items.profile_from_item),
    (
        "daily summary",
        DailySummary(
            user_id="u1",
            date="2026-11-23",
            summary="Planned a trip.",
            key_topics=["travel"],
            session_count=2,
            message_count=12,
            updated_at=T0,
        ),
        items.daily_to_item,
        items.daily_from_item,
    ),
]


@pytest.mark.parametrize(("model", "to_item", "from_item"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_model_to_item_and_back(
    model: BaseModel, to_item: Callable[[Any], dict[str, Any]], from_item: Callable[[dict[str, Any]], Any]
) -> None:
    item = to_item(model)
    assert isinstance(item[PK], str) and isinstance(item[SK], str)
    assert None not in item.values()  # absent optionals are left out, not stored as NULL
    assert from_item(item) == model
