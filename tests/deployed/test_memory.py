"""Long-term memory as deployed: a conversation imported through the chat function (REST API event), its
session summary and memory records written by the worker from the SQS queue, then searched through the chat
function: the caller finds them, another user finds nothing."""

from __future__ import annotations

import json
from typing import Any

from tests.support.deployed.stack import DeployedStack
from tests.support.lambda_events import rest_v1_event, sqs_event
from tests.support.openai_stub import StubScript

IDA = {"X-User-Id": "ida"}
JOE = {"X-User-Id": "joe"}
CONVERSATION = [
    ("user", "I am training for the Lisbon half marathon in October.", "2025-06-01T08:00:00Z"),
    ("assistant", "Great goal! How many runs a week?", "2025-06-01T08:01:00Z"),
    ("user", "Four runs a week, with a long run on Sundays along the Tagus.", "2025-06-01T08:02:00Z"),
    ("assistant", "Keep the long run slow and easy.", "2025-06-01T08:03:00Z"),
]


def _json(response: dict[str, Any]) -> Any:
    return json.loads(response["body"])


def _run_jobs(stack: DeployedStack, kind: str) -> list[dict[str, Any]]:
    """The queued jobs of `kind`, run by the worker as its SQS event source would deliver them."""
    messages = [m for m in stack.receive_all() if json.loads(m["Body"]).get("kind") == kind]
    if messages:
        result = stack.function("worker").invoke(sqs_event(messages, stack.arn("WorkQueue")))
        assert result["batchItemFailures"] == [], result
    return messages


def test_an_imported_conversation_is_summarised_indexed_and_searched_as_deployed(stack: DeployedStack) -> None:
    chat = stack.function("chat")
    stack.receive_all()  # what earlier modules left on the queue is not this test's
    body = {"title": "running", "messages": [{"role": r, "content": c, "createdAt": t} for r, c, t in CONVERSATION]}
    imported = chat.invoke(rest_v1_event("POST", "/api/ap/chats/import", body, IDA))
    assert imported["statusCode"] == 201, imported
    out = _json(imported)
    assert len(out["messageIds"]) == 4
    stack.llm.enqueue(
        StubScript.text('{"summary": "Ida trains for the Lisbon half marathon.", "keyTopics": ["running"]}')
    )
    assert len(_run_jobs(stack, "session_summary")) == 1
    assert len(_run_jobs(stack, "memory_records")) == 1  # queued by the worker with the summary
    query = {"query": "How often does Ida run for the half marathon?", "maxTokens": 400}
    found = chat.invoke(rest_v1_event("POST", "/api/ap/memory/search", query, IDA))
    assert found["statusCode"] == 200, found
    records = _json(found)["records"]
    assert records and records[0]["chatId"] == out["chatId"] and "Four runs a week" in records[0]["text"]
    assert set(records[0]["messageIds"]) <= set(out["messageIds"]) and _json(found)["tokens"] <= 400
    other = chat.invoke(rest_v1_event("POST", "/api/ap/memory/search", query, JOE))
    assert other["statusCode"] == 200 and _json(other)["records"] == []
    refused = chat.invoke(rest_v1_event("POST", "/api/ap/chats/import", {"messages": []}, IDA))
    assert refused["statusCode"] == 422 and _json(refused)["error"]["code"] == "no_messages"
