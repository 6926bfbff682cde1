"""POST /api/ui-stream read by the Vercel AI SDK itself: useChat's DefaultChatTransport and readUIMessageStream.

The `ai` package is installed from npm once into .build/ai-sdk-6 (the `ai_modules` fixture; skipped, saying why,
only without node/npm).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx

from agent_core.context import AppContext
from agent_core.domain.models import Role
from agent_core.wires.approval_answers import approval_request_id
from agent_core.wires.client_turn import client_chat_id
from tests.support.client_approvals import audit_approvals, expire, gate_writer
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.wait import poll_until

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "tests" / "support" / "js" / "ui_chat_client.cjs"


def _chat(modules: Path, base_url: str, chat_id: str, text: str, user: str = "user-a", **extra: Any) -> dict[str, Any]:
    api = base_url.removesuffix("/v1") + "/api/ui-stream"
    command = ["node", str(CLIENT), str(modules), api, user, chat_id, text]
    if extra:
        command.append(json.dumps(extra))
    done = subprocess.run(command, check=True, capture_output=True, text=True, timeout=60)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _types(result: dict[str, Any]) -> list[str]:
    return [c["type"] for c in result["chunks"]]


def test_text_and_reasoning_through_the_sdk_reader(
    ai_modules: Path, base_url: str, openai_stub: OpenAiStub, context: AppContext
) -> None:
    openai_stub.enqueue(StubScript.text("Hello ", "there", reasoning=["Greet", " back"]))
    result = _chat(ai_modules, base_url, "chat-1", "Hi!")
    assert result["error"] is None
    assert _types(result) == [
        "start",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
        "text-delta",
        "text-delta",
        "text-end",
        "finish",
    ]
    message = result["message"]
    assert message["role"] == "assistant" and message["id"] == result["chunks"][0]["messageId"]
    parts = [(p["type"], p.get("text")) for p in message["parts"]]
    assert parts == [("reasoning", "Greet back"), ("text", "Hello there")]
    assert result["chunks"][-1]["finishReason"] == "stop"


def test_server_tool_parts_and_the_persisted_chat(
    ai_modules: Path, base_url: str, openai_stub: OpenAiStub, context: AppContext
) -> None:
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "call_t", "name": "time", "arguments": {"timezone": "Asia/Tokyo"}}]),
        StubScript.text("Evening in Tokyo."),
    )
    result = _chat(ai_modules, base_url, "chat-2", "Tokyo clock?")
    assert result["error"] is None
    types = _types(result)
    tool = [t for t in types if t.startswith("tool-")]
    assert tool[0] == "tool-input-start" and tool[-2:] == ["tool-input-available", "tool-output-available"]
    assert set(tool[1:-2]) == {"tool-input-delta"}
    assert types.index("tool-output-available") < types.index("text-start")
    [call] = [p for p in result["message"]["parts"] if p["type"] == "dynamic-tool"]
    assert call["toolName"] == "time" and call["state"] == "output-available"
    assert call["input"] == {"timezone": "Asia/Tokyo"} and "Asia/Tokyo" in json.dumps(call["output"])
    # The chat id names a chat of the caller; the server's history is what the model sees next
    openai_stub.enqueue(StubScript.text("You asked about Tokyo."))
    again = _chat(ai_modules, base_url, "chat-2", "What did I ask?")
    assert again["error"] is None
    sent = [(m["role"], m.get("content")) for m in openai_stub.requests[-1]["messages"]]
    assert ("user", "Tokyo clock?") in sent and sent[-1] == ("user", "What did I ask?")
    assert ("assistant", "Evening in Tokyo.") in sent


def test_chat_ids_are_per_caller(ai_modules: Path, base_url: str, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("A's answer."), StubScript.text("B's answer."))
    _chat(ai_modules, base_url, "shared-id", "secret of A", user="user-a")
    _chat(ai_modules, base_url, "shared-id", "hello from B", user="user-b")
    sent = [m.get("content") for m in openai_stub.requests[-1]["messages"]]
    assert "secret of A" not in sent and "A's answer." not in sent
    assert client_chat_id("user-a", "shared-id") != client_chat_id("user-b", "shared-id")


def test_a_failed_run_is_an_error_part(ai_modules: Path, base_url: str, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(*[StubScript.error(400, "model refuses")] * 4)
    result = _chat(ai_modules, base_url, "chat-3", "fail")
    assert _types(result)[0] == "start" and _types(result)[-1] == "error"
    assert "llm_unavailable" in result["chunks"][-1]["errorText"]


def test_wire_headers_done_and_bad_requests(base_url: str, openai_stub: OpenAiStub) -> None:
    api = base_url.removesuffix("/v1") + "/api/ui-stream"
    auth = {"Authorization": "Bearer user-a"}
    openai_stub.enqueue(StubScript.text("ok"))
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    body = {"id": "chat-4", "messages": [message], "trigger": "submit-message"}
    response = httpx.post(api, json=body, headers=auth)
    assert response.status_code == 200 and response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert response.text.rstrip().endswith("data: [DONE]")
    for bad, param, status, code in (
        ({**body, "trigger": "regenerate-message"}, "trigger", 422, "unsupported_trigger"),
        ({**body, "messages": [{**message, "role": "assistant"}]}, "messages", 422, "invalid_request"),
        (
            {**body, "messages": [{**message, "parts": [{"type": "file", "url": "x"}]}]},
            "messages",
            422,
            "invalid_request",
        ),
        (
            {**body, "messages": [{**message, "parts": [{"type": "text", "text": "x" * 40000}]}]},
            "messages",
            413,
            "message_too_large",
        ),
    ):
        refused = httpx.post(api, json=bad, headers=auth)
        error = refused.json()["error"]
        assert (refused.status_code, error["code"], error["param"]) == (status, code, param)
    assert len(openai_stub.requests) == 1


WEATHER = {
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def test_a_client_tool_ends_the_run_and_its_output_continues_it(
    ai_modules: Path, base_url: str, openai_stub: OpenAiStub, context: AppContext
) -> None:
    # Given a browser that declares a tool the model calls
    openai_stub.enqueue(StubScript.tool_calls([{"id": "call_w", "name": "get_weather", "arguments": {"city": "Oslo"}}]))
    first = _chat(ai_modules, base_url, "chat-tools", "Weather in Oslo?", tools=[WEATHER])
    assert first["error"] is None and first["chunks"][-1] == {"type": "finish", "finishReason": "tool-calls"}
    [part] = [p for p in first["message"]["parts"] if p["type"] == "dynamic-tool"]
    # Then the call is the browser's: not provider-executed, waiting for its output
    assert part["toolName"] == "get_weather" and part["state"] == "input-available" and not part.get("providerExecuted")
    assert part["input"] == {"city": "Oslo"} and "get_weather" in [
        t["function"]["name"] for t in openai_stub.requests[0]["tools"]
    ]
    # When the browser answers it (what addToolResult does) and sends the messages back
    openai_stub.enqueue(StubScript.text("18°C in Oslo."))
    answered = {
        **first["message"],
        "parts": [*first["message"]["parts"][:-1], {**part, "state": "output-available", "output": {"temp": 18}}],
    }
    question = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Weather in Oslo?"}]}
    second = _chat(ai_modules, base_url, "chat-tools", "", tools=[WEATHER], messages=[question, answered])
    # Then useChat would send exactly this, and the run continues from the output: the model sees it last
    assert second["complete"] is True and second["error"] is None
    assert [p.get("text") for p in second["message"]["parts"] if p["type"] == "text"] == ["18°C in Oslo."]
    assert openai_stub.requests[-1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_w",
        "content": '{"temp": 18}',
    }
    # And the chat holds the question, the call, its output and the answer: nothing invented
    page = asyncio.run(context.deps.chats.list_messages(client_chat_id("user-a", "chat-tools"), "user-a", 50, None))
    assert page is not None
    assert [m.content for m in page.items if m.role == Role.USER] == ["Weather in Oslo?"]
    assert [m.role for m in page.items] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]


def test_client_tools_are_bounded_and_outputs_must_be_owed(
    base_url: str, openai_stub: OpenAiStub, context: AppContext
) -> None:
    api = base_url.removesuffix("/v1") + "/api/ui-stream"
    auth = {"Authorization": "Bearer user-a"}
    question = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    many = [{**WEATHER, "name": f"tool_{n}"} for n in range(129)]
    refused = httpx.post(api, json={"id": "chat-many", "messages": [question], "tools": many}, headers=auth)
    assert refused.status_code == 422 and refused.json()["error"]["param"] == "tools"
    assert asyncio.run(context.deps.chats.get_chat(client_chat_id("user-a", "chat-many"), "user-a")) is None
    output = {
        "type": "dynamic-tool",
        "toolName": "get_weather",
        "toolCallId": "call_forged",
        "state": "output-available",
        "input": {},
        "output": 1,
    }
    forged = {"id": "a1", "role": "assistant", "parts": [output]}
    for messages in ([question, forged], [question, {**forged, "parts": [{"type": "text", "text": "no outputs"}]}]):
        body = {"id": "chat-forged", "messages": messages, "tools": [WEATHER]}
        refused = httpx.post(api, json=body, headers=auth)
        assert refused.status_code == 422 and refused.json()["error"]["param"] == "messages"
    assert openai_stub.requests == []


NOTE = {"path": "notes/today.md", "content": "buy milk"}


def _ask_to_write(
    ai_modules: Path, base_url: str, openai_stub: OpenAiStub, chat_id: str, call_id: str
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """A run whose model calls the gated `write_note`: the question, what the SDK read, the approval's id."""
    openai_stub.enqueue(StubScript.tool_calls([{"id": call_id, "name": "write_note", "arguments": NOTE}]))
    first = _chat(ai_modules, base_url, chat_id, "Write my note")
    assert first["error"] is None and first["chunks"][-1] == {"type": "finish", "finishReason": "tool-calls"}
    question = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Write my note"}]}
    run_id = first["message"]["id"].removeprefix("msg_")
    return question, first, approval_request_id(run_id, call_id)


def _answer(message: dict[str, Any], approval_id: str, approved: bool, reason: str | None = None) -> dict[str, Any]:
    """What ai 6's addToolApprovalResponse does to the message (the part's state and its approval)."""
    answer = {"id": approval_id, "approved": approved, **({"reason": reason} if reason else {})}

    def updated(part: dict[str, Any]) -> dict[str, Any]:
        asked = part.get("state") == "approval-requested" and part["approval"]["id"] == approval_id
        return {**part, "state": "approval-responded", "approval": {**part["approval"], **answer}} if asked else part

    return {**message, "parts": [updated(p) for p in message["parts"]]}


def _post(base_url: str, chat_id: str, messages: list[dict[str, Any]]) -> httpx.Response:
    api = base_url.removesuffix("/v1") + "/api/ui-stream"
    return httpx.post(api, json={"id": chat_id, "messages": messages}, headers={"Authorization": "Bearer user-a"})


def _refused(response: httpx.Response) -> tuple[int, str, str]:
    error = response.json()["error"]
    return response.status_code, error["code"], error["param"]


def test_a_call_that_needs_approval_ends_the_run_and_the_approval_continues_it_once(
    ai_modules: Path, base_url: str, openai_stub: OpenAiStub, context: AppContext
) -> None:
    audit: list[dict[str, Any]] = []
    tool = gate_writer(context, audit)
    # Given a model that calls a tool that needs approval
    question, first, approval_id = _ask_to_write(ai_modules, base_url, openai_stub, "chat-approve", "call_n")
    # Then the SDK reads an approval request: the part waits for the person, nothing ran
    types = _types(first)
    assert types[-3:] == ["tool-input-available", "tool-approval-request", "finish"]
    request = first["chunks"][-2]
    assert request == {"type": "tool-approval-request", "approvalId": approval_id, "toolCallId": "call_n"}
    [part] = [p for p in first["message"]["parts"] if p["type"] == "dynamic-tool"]
    assert part["state"] == "approval-requested" and part["approval"] == {"id": approval_id}
    assert part["toolName"] == "write_note" and part["input"] == NOTE and tool.executions == []
    # When the person approves (addToolApprovalResponse) and useChat sends the messages back
    openai_stub.enqueue(StubScript.text("Noted."))
    answered = _answer(first["message"], approval_id, True)
    second = _chat(ai_modules, base_url, "chat-approve", "", messages=[question, answered])
    # Then useChat would send exactly this; the call ran once, then the model answered from its result
    assert second["approved"] is True and second["error"] is None
    assert _types(second)[:2] == ["start", "tool-output-available"] and _types(second)[-1] == "finish"
    assert second["chunks"][0]["messageId"] == first["message"]["id"]  # the same message goes on
    [ran] = [p for p in second["message"]["parts"] if p["type"] == "dynamic-tool"]
    assert ran["state"] == "output-available" and ran["output"] == {"written": "notes/today.md", "bytes": 8}
    assert ran["approval"]["approved"] is True
    assert [p.get("text") for p in second["message"]["parts"] if p["type"] == "text"] == ["Noted."]
    assert tool.executions == ["call_n"]
    assert openai_stub.requests[-1]["messages"][-1]["role"] == "tool"
    assert audit_approvals(audit) == [("call_n", "approved")] and audit[-1]["approval"]["by"] == "user-a"
    # And the same approval again is refused before any work: the call is answered
    again = _post(base_url, "chat-approve", [question, answered])
    assert _refused(again) == (422, "approval_request_not_found", "messages")
    assert tool.executions == ["call_n"] and len(openai_stub.requests) == 2


def test_a_denied_call_never_runs_and_the_model_reads_the_reason(
    ai_modules: Path, base_url: str, openai_stub: OpenAiStub, context: AppContext
) -> None:
    audit: list[dict[str, Any]] = []
    tool = gate_writer(context, audit)
    question, first, approval_id = _ask_to_write(ai_modules, base_url, openai_stub, "chat-deny", "call_d")
    openai_stub.enqueue(StubScript.text("I did not write it."))
    denied = _answer(first["message"], approval_id, False, "not that file")
    second = _chat(ai_modules, base_url, "chat-deny", "", messages=[question, denied])
    assert second["error"] is None and _types(second)[:2] == ["start", "tool-output-denied"]
    [part] = [p for p in second["message"]["parts"] if p["type"] == "dynamic-tool"]
    assert part["state"] == "output-denied"
    assert part["approval"] == {"id": approval_id, "approved": False, "reason": "not that file"}
    told = json.loads(openai_stub.requests[-1]["messages"][-1]["content"])
    assert told["error"]["reason"] == "approval_denied" and "not that file" in told["error"]["message"]
    assert tool.executions == [] and audit_approvals(audit) == [("call_d", "denied")]


def test_late_taken_and_forged_approvals_are_refused_before_any_work(
    ai_modules: Path, base_url: str, openai_stub: OpenAiStub, context: AppContext
) -> None:
    tool = gate_writer(context, [])
    # A late approval: its time ran out (409 approval_expired)
    question, first, approval_id = _ask_to_write(ai_modules, base_url, openai_stub, "chat-late", "call_l")
    expire(context, approval_id.removeprefix("mcpr_").split("__")[0], "call_l")
    late = _post(base_url, "chat-late", [question, _answer(first["message"], approval_id, True)])
    assert _refused(late) == (409, "approval_expired", "messages")
    # An approval handed over to the next request is not taken at POST /api/ap/submit: its run has ended, so
    # the answer is refused with the run's status and decides nothing (a replayed request is 409: the test below)
    question, first, approval_id = _ask_to_write(ai_modules, base_url, openai_stub, "chat-taken", "call_t2")
    run_id = first["message"]["id"].removeprefix("msg_")
    submitted = httpx.post(
        base_url.removesuffix("/v1") + "/api/ap/submit",
        json={"runId": run_id, "toolId": "call_t2", "approve": False},
        headers={"Authorization": "Bearer user-a"},
    )
    assert submitted.json() == {"accepted": False, "status": "completed"}
    wait = asyncio.run(context.deps.waits.get_wait(run_id, "call_t2"))
    assert wait is not None and wait.status == "waiting"
    # An approval id the last run did not ask for, or one of another user's run: 422
    forged = _answer(first["message"], approval_id, True)
    forged["parts"] = [
        {**p, "approval": {**p["approval"], "id": approval_request_id(run_id, "call_other")}}
        if p.get("approval")
        else p
        for p in forged["parts"]
    ]
    assert _refused(_post(base_url, "chat-taken", [question, forged])) == (
        422,
        "approval_request_not_found",
        "messages",
    )
    # An answer without its decision: 422 before any work
    broken = {**first["message"], "parts": [{**p, "state": "approval-responded"} for p in first["message"]["parts"]]}
    assert _post(base_url, "chat-taken", [question, broken]).status_code == 422
    assert tool.executions == [] and len(openai_stub.requests) == 2  # only the two asks


def test_two_requests_with_the_same_approval_run_the_call_once(
    ai_modules: Path, base_url: str, openai_stub: OpenAiStub, context: AppContext
) -> None:
    audit: list[dict[str, Any]] = []
    tool = gate_writer(context, audit)
    question, first, approval_id = _ask_to_write(ai_modules, base_url, openai_stub, "chat-twice", "call_2")
    answered = _answer(first["message"], approval_id, True)
    # The first request took the decision, ran the call and waits on the model
    gate = threading.Event()
    openai_stub.enqueue(StubScript.text("Noted.", gate=gate))
    results: list[dict[str, Any]] = []
    worker = threading.Thread(
        target=lambda: results.append(_chat(ai_modules, base_url, "chat-twice", "", messages=[question, answered]))
    )
    worker.start()
    try:
        poll_until(lambda: len(openai_stub.requests) == 2, "the first request's model call started")
        assert tool.executions == ["call_2"]
        # The second, while the first runs (the call still looks owed): the decision is taken already
        assert _refused(_post(base_url, "chat-twice", [question, answered])) == (
            409,
            "approval_already_decided",
            "messages",
        )
    finally:
        gate.set()
        worker.join(timeout=60)
    assert results[0]["error"] is None and _types(results[0])[1] == "tool-output-available"
    assert tool.executions == ["call_2"] and audit_approvals(audit) == [("call_2", "approved")]


def test_a_quick_rule_leaves_a_call_that_needs_approval_to_the_model(
    ai_modules: Path, base_url: str, openai_stub: OpenAiStub, context: AppContext
) -> None:
    # `time` has a quick rule ("what time ..."); here it needs approval, which only the next request can give
    gate_writer(context, [], "always", {"name": "time", "approval": "always"})
    openai_stub.enqueue(StubScript.tool_calls([{"id": "call_q", "name": "time", "arguments": {"timezone": "UTC"}}]))
    result = _chat(ai_modules, base_url, "chat-quick", "what time is it in Tokyo?")
    assert len(openai_stub.requests) == 1, "the model made the call: no quick call waited for an answer"
    # Only the model's call is there: it asks, nothing else ran or was refused
    assert [c["toolCallId"] for c in result["chunks"] if c["type"].startswith("tool-")] == ["call_q"] * (
        len([t for t in _types(result) if t.startswith("tool-")])
    )
    assert _types(result)[-3:] == ["tool-input-available", "tool-approval-request", "finish"]
    assert result["chunks"][-2]["toolCallId"] == "call_q"


def test_a_path_that_cannot_hand_a_call_over_refuses_it_without_asking(
    ai_modules: Path, base_url: str, openai_stub: OpenAiStub, context: AppContext
) -> None:
    # A ReAct agent runs its calls itself: on this wire nobody can answer while it waits, so the call is refused
    tool = gate_writer(context, [], mode="react")
    step = {
        "thought": "write it",
        "action": "tool_call",
        "action_input": {"tool_name": "write_note", "parameters": NOTE},
    }
    answer = {"thought": "refused", "action": "final_answer", "action_input": "I could not write it."}
    openai_stub.enqueue(StubScript.text(json.dumps(step)), StubScript.text(json.dumps(answer)))
    result = _chat(ai_modules, base_url, "chat-react", "Write my note")
    assert result["error"] is None and "tool-approval-request" not in _types(result)
    [refused] = [c for c in result["chunks"] if c["type"] == "tool-output-error"]
    assert "approval_unavailable" in refused["errorText"] and tool.executions == []
    assert result["chunks"][-1] == {"type": "finish", "finishReason": "stop"}


def test_every_approval_asked_is_decided_in_one_request(
    ai_modules: Path, base_url: str, openai_stub: OpenAiStub, context: AppContext
) -> None:
    tool = gate_writer(context, [])
    calls = [{"id": f"call_{n}", "name": "write_note", "arguments": NOTE} for n in ("a", "b")]
    openai_stub.enqueue(StubScript.tool_calls(calls))
    first = _chat(ai_modules, base_url, "chat-both", "Write two notes")
    requests = [c for c in first["chunks"] if c["type"] == "tool-approval-request"]
    assert [r["toolCallId"] for r in requests] == ["call_a", "call_b"]
    question = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Write two notes"}]}
    # One of the two decided: refused before any work (as lastAssistantMessageIsCompleteWithApprovalResponses
    # waits for both); both decided: the approved one runs, the denied one does not
    half = _answer(first["message"], requests[0]["approvalId"], True)
    assert _refused(_post(base_url, "chat-both", [question, half])) == (422, "approval_response_missing", "messages")
    assert tool.executions == []
    openai_stub.enqueue(StubScript.text("One written."))
    both = _answer(half, requests[1]["approvalId"], False)
    second = _chat(ai_modules, base_url, "chat-both", "", messages=[question, both])
    assert second["approved"] is True and second["error"] is None
    states = {p["toolCallId"]: p["state"] for p in second["message"]["parts"] if p["type"] == "dynamic-tool"}
    assert states == {"call_a": "output-available", "call_b": "output-denied"} and tool.executions == ["call_a"]
