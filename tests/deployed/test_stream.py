"""The stream function as deployed: `run.sh` (uvicorn) behind the Lambda Web Adapter emulation, its responses
streamed through the Runtime API as a RESPONSE_STREAM Function URL or the REST API's STREAM integration does."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from openai.types.chat import ChatCompletionChunk

from agent_core.config import Settings
from agent_core.domain.ids import now_ms
from agent_core.domain.models import RunStatus
from agent_core.store.dynamodb import DynamoTable
from agent_core.store.items import checkpoint_key
from agent_core.store.table_store import TableStore
from tests.support.deployed.stack import APPROVAL_ZONE, DeployedStack
from tests.support.lambda_events import http_v2_event, rest_v1_event, sqs_event
from tests.support.openai_stub import StubScript
from tests.support.openai_wire import validate_stream_event
from tests.support.wait import poll_until

DAVE = {"x-user-id": "dave"}


def test_the_stream_function_is_the_web_adapter_contract(stack: DeployedStack) -> None:
    definition = stack.definition("stream")
    assert definition.handler == "functions/stream/run.sh"
    assert definition.variables["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert definition.variables["AWS_LWA_INVOKE_MODE"] == "response_stream"
    layers = json.dumps(definition.properties["Layers"])
    assert ":753240598075:layer:LambdaAdapterLayer" in layers


def test_a_query_streams_to_run_complete(stack: DeployedStack) -> None:
    stack.llm.enqueue(StubScript.text("Hello ", "from ", "the stream."))
    response = stack.function("stream").invoke_streaming(
        http_v2_event("POST", "/api/ap/query", {"message": "hello"}, DAVE)
    )
    assert response.status == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = list(response.sse_events())
    kinds = [e["type"] for e in events]
    assert "run.start" in kinds and kinds[-1] == "run.complete", kinds
    text = "".join(e["delta"] for e in events if e["type"] == "content.delta")
    assert text == "Hello from the stream."


def test_a_frontend_tool_answered_through_submit_resumes_the_run(stack: DeployedStack) -> None:
    stack.llm.enqueue(
        StubScript.tool_calls(
            [
                {
                    "id": "call_ask",
                    "name": "ask_user",
                    "arguments": {"question": "Red or blue?", "choices": ["red", "blue"]},
                }
            ]
        ),
        StubScript.text("Blue it is."),
    )
    response = stack.function("stream").invoke_streaming(
        rest_v1_event("POST", "/api/ap/query", {"message": "pick a colour for me"}, {"X-User-Id": "dave"})
    )
    assert response.status == 200
    events: list[dict[str, Any]] = []
    submits: list[Any] = []
    for event in response.sse_events():
        events.append(event)
        if event["type"] == "tool.end":
            # The run waits on the open stream; the browser answers through the submit function.
            body = {"runId": event["runId"], "toolId": event["toolId"], "params": {"choice": "blue"}}
            answer = stack.function("submit").invoke(http_v2_event("POST", "/api/ap/submit", body, DAVE))
            submits.append(json.loads(answer["body"]))
    assert submits == [{"accepted": True, "status": "accepted"}], [e["type"] for e in events]
    kinds = [e["type"] for e in events]
    assert (
        kinds.index("tool.end")
        < kinds.index("request.submit")
        < kinds.index("tool.result")
        < kinds.index("run.complete")
    )
    result = next(e for e in events if e["type"] == "tool.result")
    assert result["result"] == {"choice": "blue"}
    assert "".join(e["delta"] for e in events if e["type"] == "content.delta") == "Blue it is."


def test_an_approval_answered_through_the_submit_function_resumes_the_run(stack: DeployedStack) -> None:
    # Given the template's approval rule (AGENT_TOOL_APPROVAL): `time` for the Troll station asks a person
    stack.llm.enqueue(
        StubScript.tool_calls([{"id": "call_troll", "name": "time", "arguments": {"timezone": APPROVAL_ZONE}}]),
        StubScript.text("Troll time, approved."),
    )
    response = stack.function("stream").invoke_streaming(
        http_v2_event("POST", "/api/ap/query", {"message": "the Troll station, please"}, DAVE)
    )
    assert response.status == 200
    events: list[dict[str, Any]] = []
    answers: list[Any] = []
    for event in response.sse_events():
        events.append(event)
        if event["type"] == "tool.approval":
            # The run waits on the open stream; a person approves through the submit function, then again
            body = {"runId": event["runId"], "toolId": event["toolId"], "approve": True, "reason": "fine"}
            for _ in range(2):
                answer = stack.function("submit").invoke(http_v2_event("POST", "/api/ap/submit", body, DAVE))
                answers.append(json.loads(answer["body"]))
    kinds = [e["type"] for e in events]
    assert answers == [
        {"accepted": True, "status": "accepted"},
        {"accepted": False, "status": "already_decided", "approved": True},
    ], kinds
    approval = next(e for e in events if e["type"] == "tool.approval")
    assert approval["toolName"] == "time" and approval["reason"] == "the Troll station"
    assert (
        kinds.index("tool.end")
        < kinds.index("tool.approval")
        < kinds.index("tool.result")
        < kinds.index("run.complete")
    )
    result = next(e for e in events if e["type"] == "tool.result")
    assert result["status"] == "ok" and result["result"]["timezone"] == APPROVAL_ZONE


def _store(stack: DeployedStack) -> TableStore:
    """The tier's table read through boto3 against moto, as the functions' own store reads it."""
    client = stack.account.client("dynamodb")
    return TableStore(DynamoTable(stack.resource("StorageTable"), lambda: client))


def test_a_run_whose_instance_died_waiting_on_an_approval_goes_on_through_submit_and_the_worker(
    stack: DeployedStack,
) -> None:
    # Given a run on its own instance of the stream function that waits on an approval (the template's rule),
    # with its checkpoint stored
    stack.llm.enqueue(
        StubScript.tool_calls([{"id": "call_crash", "name": "time", "arguments": {"timezone": APPROVAL_ZONE}}]),
        StubScript.text("Troll time, ", "after the crash."),
    )
    store = _store(stack)
    doomed = stack.launch("stream")
    try:
        doomed.wait_ready()
        response = doomed.invoke_streaming(
            http_v2_event("POST", "/api/ap/query", {"message": "the Troll station, after a crash"}, DAVE)
        )
        assert response.status == 200
        received: list[dict[str, Any]] = []
        for event in response.sse_events():
            received.append(event)
            if event["type"] == "tool.approval":
                break
        approval = received[-1]
        assert approval["type"] == "tool.approval", [e["type"] for e in received]
        run_id, tool_id = approval["runId"], approval["toolId"]
        chat_id = next(e["chatId"] for e in received if "chatId" in e)
        poll_until(lambda: asyncio.run(store.table.get(checkpoint_key(run_id))), "the waiting run's checkpoint stored")
        # When the instance dies (a crash: no shutdown, its lease no longer renewed)
        doomed.crash()
    finally:
        doomed.stop()
    lease_s = Settings().run_lease_ms / 1000  # the template leaves AGENT_RUN_HEARTBEAT_MS at its default

    def lease_expired() -> bool:
        chat = asyncio.run(store.get_chat(chat_id, "dave"))
        assert chat is not None and chat.active_run_id == run_id
        return (chat.lease_expires_at or 0) <= now_ms()

    poll_until(lease_expired, "the dead instance's lease expired", bound_s=lease_s + 30, interval_s=0.5)
    # Then the approval answered through the submit function is accepted and queues the run's continuation
    body = {"runId": run_id, "toolId": tool_id, "approve": True, "reason": "after the crash"}
    answer = stack.function("submit").invoke(http_v2_event("POST", "/api/ap/submit", body, DAVE))
    assert json.loads(answer["body"]) == {"accepted": True, "status": "accepted"}, answer
    queued = [m for m in stack.receive_all() if json.loads(m["Body"]).get("run_id") == run_id]
    jobs = [json.loads(m["Body"]) for m in queued]
    denied = [c.operation for c in stack.unexpected_denials()]  # e.g. sqs:SendMessage outside the submit's policy
    assert [(j["kind"], j["chat_id"], j["user_id"]) for j in jobs] == [("continue_run", chat_id, "dave")], denied
    # And the worker, given it as the SQS event source delivers it, continues the run
    result = stack.function("worker").invoke(sqs_event(queued, stack.arn("WorkQueue")))
    assert result == {"batchItemFailures": []}, result
    # And the client resuming the run through the stream function gets the rest, after its last event
    last = received[-1]["seq"]
    resumed = stack.function("stream").invoke_streaming(
        http_v2_event("GET", f"/api/ap/runs/{run_id}/events", None, {**DAVE, "last-event-id": str(last)})
    )
    assert resumed.status == 200
    rest = list(resumed.sse_events())
    kinds = [e["type"] for e in rest]
    assert [e["seq"] for e in rest] == list(range(last + 1, last + 1 + len(rest))), kinds
    assert {e["runId"] for e in rest} == {run_id} and kinds[-1] == "run.complete", kinds
    results = [e for e in rest if e["type"] == "tool.result"]
    assert [(e["toolId"], e["status"]) for e in results] == [(tool_id, "ok")], results
    assert results[0]["result"]["timezone"] == APPROVAL_ZONE
    assert "".join(e["delta"] for e in rest if e["type"] == "content.delta") == "Troll time, after the crash."
    run = asyncio.run(store.get_run(chat_id, run_id))
    assert run is not None and run.status == RunStatus.COMPLETED


def test_v1_responses_streams_the_event_grammar(stack: DeployedStack) -> None:
    stack.llm.enqueue(StubScript.text("One ", "two."))
    body = {"model": "main-agent", "input": "Count", "stream": True}
    response = stack.function("stream").invoke_streaming(http_v2_event("POST", "/v1/responses", body, DAVE))
    assert response.status == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = list(response.sse_events())
    types = [e["type"] for e in events]
    assert types[:2] == ["response.created", "response.in_progress"] and types[-1] == "response.completed", types
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "One two."
    assert [(t, validate_stream_event(e)) for t, e in zip(types, events, strict=True)] == [(t, []) for t in types]


def test_a_retried_first_message_and_a_retried_response_run_once(stack: DeployedStack) -> None:
    # The conditional writes keyed on (user, requestId) and (user, Idempotency-Key), with the deployed role
    stream = stack.function("stream")
    stack.llm.enqueue(StubScript.text("Only once."))
    before = len(stack.llm.requests)
    query = {"message": "first words", "requestId": "deployed-first-1"}
    chats = []
    for _ in range(2):
        response = stream.invoke_streaming(http_v2_event("POST", "/api/ap/query", query, DAVE))
        assert response.status == 200
        events = list(response.sse_events())
        assert events[-1]["type"] == "run.complete", events
        chats.append({e["chatId"] for e in events if "chatId" in e})
    assert chats[0] == chats[1] and len(chats[0]) == 1
    stack.llm.enqueue(StubScript.text("Also once."))
    body = {"model": "main-agent", "input": "Count", "stream": True}
    headers = {**DAVE, "idempotency-key": "deployed-key-1"}
    ids = []
    for _ in range(2):
        response = stream.invoke_streaming(http_v2_event("POST", "/v1/responses", body, headers))
        assert response.status == 200
        events = list(response.sse_events())
        assert events[-1]["type"] == "response.completed", events
        ids.append(events[-1]["response"]["id"])
    assert ids[0] == ids[1]
    assert len(stack.llm.requests) == before + 2  # one model call per request, none for the retries


def test_v1_chat_completions_streams_chunks_then_done(stack: DeployedStack) -> None:
    stack.llm.enqueue(StubScript.text("One ", "two."))
    body = {
        "model": "main-agent",
        "messages": [{"role": "user", "content": "Count"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    response = stack.function("stream").invoke_streaming(http_v2_event("POST", "/v1/chat/completions", body, DAVE))
    assert response.status == 200 and response.headers["content-type"].startswith("text/event-stream")
    data = list(response.sse_data())
    assert data[-1] == "[DONE]", data
    chunks = [ChatCompletionChunk.model_validate_json(d) for d in data[:-1]]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "One two."
    assert chunks[-2].choices[0].finish_reason == "stop" and chunks[-1].usage is not None


def _iam_event(path: str, body: Any) -> dict[str, Any]:
    event = http_v2_event("POST", path, body)
    event["requestContext"]["authorizer"] = {
        "iam": {
            "accessKey": "ASIAEXAMPLE",
            "accountId": "123456789012",
            "callerId": "AROAEXAMPLE:erin",
            "userArn": "arn:aws:sts::123456789012:assumed-role/app-users/erin",
            "userId": "AROAEXAMPLE:erin",
        }
    }
    return event


def test_iam_mode_refuses_a_request_without_a_signed_identity(stack: DeployedStack) -> None:
    response = stack.function("stream", "iam").invoke_streaming(
        http_v2_event("POST", "/api/ap/query", {"message": "hi"})
    )
    assert response.status == 401
    list(response.iter_bytes())


def test_iam_mode_serves_the_signed_caller_behind_the_web_adapter(stack: DeployedStack) -> None:
    stack.llm.enqueue(StubScript.text("Hi Erin."))
    response = stack.function("stream", "iam").invoke_streaming(_iam_event("/api/ap/query", {"message": "hi"}))
    events = list(response.sse_events())
    assert response.status == 200, events
    assert events[-1]["type"] == "run.complete"


def _data_lines(response: Any) -> list[str]:
    return list(response.sse_data())


def test_the_vercel_ui_message_stream_streams_parts_then_done(stack: DeployedStack) -> None:
    stack.llm.enqueue(StubScript.text("One ", "two."))
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Count"}]}
    body = {"id": "deployed-ui-chat", "messages": [message], "trigger": "submit-message"}
    response = stack.function("stream").invoke_streaming(http_v2_event("POST", "/api/ui-stream", body, DAVE))
    assert response.status == 200 and response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    data = _data_lines(response)
    assert data[-1] == "[DONE]", data
    parts = [json.loads(d) for d in data[:-1]]
    assert parts[0]["type"] == "start" and parts[-1]["type"] == "finish", parts
    assert "".join(p["delta"] for p in parts if p["type"] == "text-delta") == "One two."


def test_the_vercel_resume_route_is_served_behind_the_web_adapter(stack: DeployedStack) -> None:
    # useChat({resume: true}) asks GET /api/ui-stream/{id}/stream: through the stream function as deployed,
    # a chat with no run going on is 204 (nothing to resume) and one the caller does not have 404
    stack.llm.enqueue(StubScript.text("Done."))
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}
    body = {"id": "deployed-resume-chat", "messages": [message], "trigger": "submit-message"}
    stream = stack.function("stream")
    assert _data_lines(stream.invoke_streaming(http_v2_event("POST", "/api/ui-stream", body, DAVE)))[-1] == "[DONE]"
    over = stream.invoke_streaming(http_v2_event("GET", "/api/ui-stream/deployed-resume-chat/stream", None, DAVE))
    assert over.status == 204 and b"".join(over.iter_bytes()) == b""
    unknown = stream.invoke_streaming(http_v2_event("GET", "/api/ui-stream/never-used/stream", None, DAVE))
    assert unknown.status == 404
    assert json.loads(b"".join(unknown.iter_bytes()))["error"]["code"] == "chat_not_found"


def test_ag_ui_streams_a_run_from_started_to_finished(stack: DeployedStack) -> None:
    stack.llm.enqueue(StubScript.text("One ", "two."))
    body = {
        "threadId": "deployed-thread",
        "runId": "r1",
        "state": {},
        "messages": [{"id": "u1", "role": "user", "content": "Count"}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    response = stack.function("stream").invoke_streaming(http_v2_event("POST", "/api/ag-ui", body, DAVE))
    assert response.status == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(d) for d in _data_lines(response)]
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED", events
    assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == "One two."


def test_a_stream_dropped_mid_run_resumes_through_another_instance(stack: DeployedStack) -> None:
    # Given a run on one instance of the stream function that will wait for the browser's answer
    stack.llm.enqueue(
        StubScript.tool_calls(
            [{"id": "call_pick", "name": "ask_user", "arguments": {"question": "Red or blue?", "choices": ["r", "b"]}}]
        ),
        StubScript.text("Blue ", "it ", "is."),
    )
    first = stack.function("stream").invoke_streaming(
        http_v2_event("POST", "/api/ap/query", {"message": "pick a colour for me"}, DAVE)
    )
    received: list[dict[str, Any]] = []
    # When the client drops the stream once the call has started (Lambda gets no signal of it: the
    # invocation streams on into the void)
    for event in first.sse_events():
        received.append(event)
        if event["type"] == "tool.start":
            break
    run_id = received[0]["runId"]
    # Then another instance of the same function resumes it after the last event received, the browser's
    # answer goes through the submit function, and the resumed stream runs to the run's end
    other = stack.launch("stream")
    try:
        other.wait_ready()
        last = str(received[-1]["seq"])
        resumed = other.invoke_streaming(
            http_v2_event("GET", f"/api/ap/runs/{run_id}/events", None, {**DAVE, "last-event-id": last})
        )
        assert resumed.status == 200
        for event in resumed.sse_events():
            received.append(event)
            if event["type"] == "tool.end":
                body = {"runId": run_id, "toolId": event["toolId"], "params": {"choice": "b"}}
                answer = stack.function("submit").invoke(http_v2_event("POST", "/api/ap/submit", body, DAVE))
                assert json.loads(answer["body"]) == {"accepted": True, "status": "accepted"}
    finally:
        other.stop()
    assert [e["seq"] for e in received] == list(range(1, len(received) + 1))  # nothing lost, nothing twice
    assert received[-1]["type"] == "run.complete"
    assert "".join(e["delta"] for e in received if e["type"] == "content.delta") == "Blue it is."
    # And the first invocation ran to the run's end (its response ended only then: nothing runs after it)
    rest = list(first.sse_events())
    assert rest and rest[-1]["type"] == "run.complete" and rest[-1]["seq"] == received[-1]["seq"]
