"""Answers and tool arguments past DynamoDB's 400 KB item limit are stored whole and replayed intact.

Before, the RUN item carried the inline replay snapshot (up to 300 KB) plus a second copy of the answer:
answers of 200-290 KB and >= 398 KB, ~70,000 CJK characters and 420 KB of tool arguments all failed.
"""

from __future__ import annotations

import json

import pytest

from agent_core.domain.models import Role, TurnResult
from agent_core.store import items as it
from agent_core.store.item_size import ITEM_LIMIT_BYTES, item_size
from tests.faults.harness import Harness, check_turn
from tests.support.openai_stub import StubScript

ANSWERS = {
    "250KB": "a" * 250 * 1024,
    "400KB": "".join(f"{i:06d} of four hundred kilobytes\n" for i in range(13_000))[: 400 * 1024],
    "70000_CJK": ("你好世界，这是一个很长的回答。" * 5000)[:70_000],
}


def _pieces(text: str, size: int = 16_000) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


async def _raw_items(h: Harness, chat_id: str) -> list[dict[str, object]]:
    page = await h.store.table.query(it.chat_pk(chat_id))
    return page.items


@pytest.mark.parametrize("name", list(ANSWERS))
async def test_a_large_answer_is_stored_and_replayed_intact(harness: Harness, name: str) -> None:
    answer = ANSWERS[name]
    chat_id = await harness.new_chat()
    harness.stub.enqueue(StubScript.text(*_pieces(answer)))
    seen = await harness.query(chat_id, "write a lot", f"req-{name}")
    # Stored complete, replayed equal to what streamed, the next turn accepted (check_turn)
    assert await check_turn(harness, chat_id, "write a lot", answer, seen) == "run.complete"
    assert seen.text() == answer
    # Every item fits DynamoDB's limit, and the answer is inline at most once (the run names its message)
    items = await _raw_items(harness, chat_id)
    assert all(item_size(i) <= ITEM_LIMIT_BYTES for i in items)
    run_items = [i for i in items if str(i["sk"]).startswith(it.RUN_PREFIX) and i.get(it.ANSWER_ID)]
    first = next(r for r in run_items if r["requestId"] == f"req-{name}")
    assert TurnResult.model_validate_json(str(first["result"])).assistant_message == ""
    # The history API returns it whole
    listed = (await harness.client.get(f"/api/v1/conversations/{chat_id}/messages", params={"limit": 100})).json()
    assert next(m["content"] for m in listed["items"] if m["role"] == "ASSISTANT") == answer


async def test_a_retried_request_gets_the_large_stored_answer_back(harness: Harness) -> None:
    answer = ANSWERS["400KB"]
    chat_id = await harness.new_chat()
    harness.stub.enqueue(StubScript.text(*_pieces(answer)))
    body = {"message": "write a lot", "requestId": "req-same"}
    first = await harness.client.post(f"/api/v1/conversations/{chat_id}/chat", json=body)
    again = await harness.client.post(f"/api/v1/conversations/{chat_id}/chat", json=body)
    assert first.status_code == again.status_code == 200
    assert first.json()["assistantMessage"] == again.json()["assistantMessage"] == answer
    assert len(harness.stub.requests) == 1  # the retry was answered from storage


async def test_420kb_of_tool_arguments_are_stored_and_replayed_intact(harness: Harness) -> None:
    arguments = json.dumps({"timezone": "Asia/Tokyo", "padding": "p" * 420 * 1024})
    chat_id = await harness.new_chat()
    harness.stub.enqueue(
        StubScript.tool_calls([{"id": "call_big", "name": "time", "arguments": arguments}], piece_size=32_000),
        StubScript.text("the arguments were too large"),
    )
    seen = await harness.query(chat_id, "call with a lot", "req-args")
    assert await check_turn(harness, chat_id, "call with a lot", "the arguments were too large", seen) == "run.complete"
    # The call and its arguments are stored whole (the tool refused them as too large to run)
    messages = await harness.store.messages_between(chat_id, None, None)
    call = next(m for m in messages if m.role == Role.ASSISTANT and m.tool_calls)
    assert call.tool_calls[0].arguments == arguments
    result = next(m for m in messages if m.role == Role.TOOL)
    assert "input_too_large" in result.content
    # Replay: the tool snapshot carries the arguments, rawMessages the call
    replay = (await harness.client.get("/api/ap/chat", params={"chatId": chat_id, "includeRawMessages": "true"})).json()
    tool = next(e for e in replay["events"] if e["type"] == "tool.snapshot")
    assert tool["args"] == arguments
    raw = next(m for m in replay["rawMessages"] if m.get("tool_calls"))
    assert raw["tool_calls"][0]["function"]["arguments"] == arguments
    assert all(item_size(i) <= ITEM_LIMIT_BYTES for i in await _raw_items(harness, chat_id))


async def test_deleting_a_chat_removes_its_spilled_parts(harness: Harness) -> None:
    chat_id = await harness.new_chat()
    harness.stub.enqueue(StubScript.text(*_pieces(ANSWERS["400KB"])))
    await harness.query(chat_id, "write a lot", "req-del")
    s3 = harness.clients[1]
    bucket = harness.context.settings.data_bucket
    prefix = f"spill/CHAT/{chat_id}/"
    assert s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("KeyCount", 0) > 0
    assert (await harness.client.delete(f"/api/v1/conversations/{chat_id}")).status_code == 204
    assert s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("KeyCount", 0) == 0
    assert await _raw_items(harness, chat_id) == []


async def test_a_stored_response_of_140000_cjk_characters_round_trips(harness: Harness) -> None:
    # 140,000 characters are 420 KB in UTF-8: sized in bytes, the Response body goes to S3
    answer = "长" * 140_000
    harness.stub.enqueue(StubScript.text(*_pieces(answer)))
    created = await harness.client.post("/v1/responses", json={"model": "main-agent", "input": "write"})
    assert created.status_code == 200, created.text
    body = created.json()
    stored = await harness.client.get(f"/v1/responses/{body['id']}")
    assert stored.status_code == 200
    text = "".join(c["text"] for item in stored.json()["output"] for c in item.get("content", []) if "text" in c)
    assert text == answer


async def test_a_deleted_large_response_takes_its_spilled_parts_with_it(harness: Harness) -> None:
    harness.stub.enqueue(StubScript.text(*_pieces("长" * 140_000)))
    created = await harness.client.post("/v1/responses", json={"model": "main-agent", "input": "write"})
    assert created.status_code == 200, created.text
    s3, bucket = harness.clients[1], harness.context.settings.data_bucket
    prefix = f"spill/RESP/{created.json()['id']}/"
    # The body's large part is kept under the response's own key, the item in the table fits
    assert s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("KeyCount", 0) > 0
    assert (await harness.client.delete(f"/v1/responses/{created.json()['id']}")).status_code == 200
    assert s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("KeyCount", 0) == 0
