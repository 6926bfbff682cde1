"""Guardrails end to end: a block ends the run with `guardrail_intervened` (a terminal event on a stream, an error
status on a blocking route) and never echoes what it matched; an input check runs before any model call; what
is masked is stored as it was sent; tool arguments, tool results and reasoning are checked too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.store.memory_table import MemoryTable
from tests.support.fake_llm import Reply, ScriptedLlm
from tests.support.fixtures import make_settings
from tests.support.sse import events_in

EMAIL = "dana.ross@example.com"
CARD = "4111 1111 1111 1111"
ALICE = {"X-User-Id": "alice"}


def _context(tmp_path: Path, llm: ScriptedLlm, guardrails: str, *, mode: str = "direct", **settings: Any) -> AppContext:
    (tmp_path / "guarded.yaml").write_text(
        f"key: guarded\nname: Guarded\nmode: {mode}\ntools: [time]\nguardrails:\n{guardrails}", encoding="utf-8"
    )
    values = {"AGENT_DEFINITIONS_DIR": str(tmp_path), **settings}
    return build_context(make_settings(**values), table=MemoryTable(), llm=llm, audit=lambda _: None)


def _client(context: AppContext) -> httpx.AsyncClient:
    app = build_app(*routes.local, context=context)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", headers=ALICE)


async def _query(client: httpx.AsyncClient, message: str) -> list[dict[str, Any]]:
    response = await client.post("/api/ap/query", json={"message": message, "agentKey": "guarded"})
    assert response.status_code == 200, response.text
    return events_in(response.text)


def _text(events: list[dict[str, Any]], kind: str = "content.delta") -> str:
    return "".join(e["delta"] for e in events if e["type"] == kind)


async def test_an_output_block_ends_the_stream_with_guardrail_intervened_and_sends_none_of_it(tmp_path: Path) -> None:
    answer = "Here is the card on file: " + CARD + " and that is all."
    llm = ScriptedLlm(Reply(pieces=tuple(answer[i : i + 5] for i in range(0, len(answer), 5))))
    async with _client(_context(tmp_path, llm, "  output: block\n")) as client:
        response = await client.post("/api/ap/query", json={"message": "my card?", "agentKey": "guarded"})
        events = events_in(response.text)
        error = events[-1]
        assert (error["type"], error["code"]) == ("run.error", "guardrail_intervened")
        assert "4111" not in response.text and _text(events) == ""  # the answer was shorter than the window
        replay = (await client.get("/api/ap/chat", params={"chatId": events[0]["chatId"]})).json()
    assert "4111" not in json.dumps(replay)
    assert replay["events"][-1]["code"] == "guardrail_intervened"


async def test_text_before_the_window_is_sent_and_the_block_stops_the_rest(tmp_path: Path) -> None:
    prose = "word " * 60
    answer = prose + "mail " + EMAIL + " " + "tail " * 60
    llm = ScriptedLlm(Reply(pieces=tuple(answer[i : i + 7] for i in range(0, len(answer), 7))))
    context = _context(tmp_path, llm, "  output: block\n", AGENT_GUARDRAIL_HOLDBACK_CHARS="50")
    async with _client(context) as client:
        events = await _query(client, "mail?")
    sent = _text(events)
    assert sent and prose.startswith(sent) and "dana" not in sent  # released up to the window before the match
    assert events[-1]["code"] == "guardrail_intervened" and EMAIL not in events[-1]["message"]


async def test_a_blocking_route_answers_an_error_status(tmp_path: Path) -> None:
    llm = ScriptedLlm(Reply(text="hello"), Reply(text="write to " + EMAIL))
    async with _client(_context(tmp_path, llm, "  output: block\n")) as client:
        cid = (await _query(client, "hi"))[0]["chatId"]  # a chat of the guarded agent (the buffered route keeps it)
        response = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": "mail?"})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "guardrail_intervened" and "dana" not in response.text


async def test_an_input_block_refuses_the_message_before_any_model_call(tmp_path: Path) -> None:
    llm = ScriptedLlm()
    async with _client(_context(tmp_path, llm, "  input: block\n")) as client:
        response = await client.post("/api/ap/query", json={"message": f"I am {EMAIL}", "agentKey": "guarded"})
        completions = await client.post(
            "/v1/chat/completions", json={"model": "guarded", "messages": [{"role": "user", "content": EMAIL}]}
        )
        chats = (await client.get("/api/ap/chats")).json()
    assert response.status_code == 400 and response.json()["error"]["code"] == "guardrail_intervened"
    assert "dana" not in response.text
    assert completions.status_code == 400 and completions.json()["error"]["code"] == "guardrail_intervened"
    assert llm.requests == []  # the model saw nothing
    assert json.dumps(chats).count("dana") == 0 and not chats.get("chats")  # nothing was stored either


async def test_an_input_mask_is_what_is_stored_named_and_sent_to_the_model(tmp_path: Path) -> None:
    llm = ScriptedLlm(Reply(text="noted"))
    async with _client(_context(tmp_path, llm, "  input: mask\n")) as client:
        events = await _query(client, f"I am {EMAIL}, card {CARD}")
        raw = await client.get("/api/ap/chat", params={"chatId": events[0]["chatId"], "includeRawMessages": "true"})
    masked = "I am {EMAIL}, card {CARD}"
    assert events[0]["message"] == masked and events[1]["chatName"] == masked[:30]
    assert llm.requests[0].messages[-1]["content"] == masked
    assert raw.json()["rawMessages"][0]["content"] == masked and "dana" not in raw.text


async def test_a_masked_answer_is_stored_exactly_as_it_was_sent(tmp_path: Path) -> None:
    answer = ("intro " * 50) + f"mail {EMAIL} or card {CARD}. " + ("outro " * 50)
    llm = ScriptedLlm(Reply(pieces=tuple(answer[i : i + 3] for i in range(0, len(answer), 3))), Reply(text="x"))
    async with _client(_context(tmp_path, llm, "  output: {action: mask}\n  maskStyle: stars\n")) as client:
        events = await _query(client, "contact?")
        chat_id = events[0]["chatId"]
        replay = (await client.get("/api/ap/chat", params={"chatId": chat_id, "includeRawMessages": "true"})).json()
        blocking = await client.post(f"/api/v1/conversations/{chat_id}/chat", json={"message": "again"})
    sent = _text(events)
    assert sent == answer.replace(EMAIL, "***").replace(CARD, "***")
    snapshot = next(e for e in replay["events"] if e["type"] == "content.snapshot")
    stored = [m["content"] for m in replay["rawMessages"] if m["role"] == "assistant"]
    assert snapshot["text"] == sent and stored == [sent]
    assert blocking.status_code == 200 and blocking.json()["assistantMessage"] == "x"
    assert llm.requests[1].messages[-2] == {"role": "assistant", "content": sent}  # the model's history too


async def test_reasoning_is_held_back_and_masked_too(tmp_path: Path) -> None:
    llm = ScriptedLlm(Reply(reasoning=("the user is dana.r", "oss@example.com so"), pieces=("Hello.",)))
    async with _client(_context(tmp_path, llm, "  output: mask\n")) as client:
        events = await _query(client, "hi")
    assert _text(events, "reasoning.delta") == "the user is {EMAIL} so" and _text(events) == "Hello."


async def test_tool_arguments_are_checked_before_they_are_sent_or_run(tmp_path: Path) -> None:
    llm = ScriptedLlm(Reply(tool_calls=[("c1", "time", {"timezone": "UTC", "note": EMAIL})]), Reply(text="Late."))
    async with _client(_context(tmp_path, llm, "  toolArguments: mask\n", mode="function")) as client:
        response = await client.post("/api/ap/query", json={"message": "time?", "agentKey": "guarded"})
    events = events_in(response.text)
    args = [e for e in events if e["type"] == "tool.args"]
    assert len(args) == 1 and json.loads(args[0]["delta"]) == {"timezone": "UTC", "note": "{EMAIL}"}
    assert "dana" not in response.text
    call = next(m for m in llm.requests[1].messages if m.get("tool_calls"))["tool_calls"][0]
    assert json.loads(call["function"]["arguments"])["note"] == "{EMAIL}"  # saved (and run) as checked


async def test_tool_results_are_masked_before_the_client_the_store_and_the_model_see_them(tmp_path: Path) -> None:
    llm = ScriptedLlm(Reply(tool_calls=[("c1", "time", {"timezone": "Asia/Tokyo"})]), Reply(text="It is late."))
    guardrails = "  toolResults: mask\n  patterns:\n    - name: ZONE\n      pattern: 'Asia/[A-Za-z_]+'\n"
    async with _client(_context(tmp_path, llm, guardrails, mode="function")) as client:
        response = await client.post("/api/ap/query", json={"message": "time?", "agentKey": "guarded"})
    events = events_in(response.text)
    result = next(e for e in events if e["type"] == "tool.result")
    assert result["status"] == "ok" and result["result"]["timezone"] == "{ZONE}"
    tool_message = next(m for m in llm.requests[1].messages if m["role"] == "tool")
    assert "{ZONE}" in tool_message["content"] and "Asia/Tokyo" not in tool_message["content"]


async def test_a_tool_argument_block_stops_the_call_before_it_runs(tmp_path: Path) -> None:
    llm = ScriptedLlm(Reply(tool_calls=[("c1", "time", {"timezone": EMAIL})]))
    async with _client(_context(tmp_path, llm, "  toolArguments: block\n", mode="function")) as client:
        response = await client.post("/api/ap/query", json={"message": "time?", "agentKey": "guarded"})
    events = events_in(response.text)
    assert [e for e in events if e["type"] == "tool.result"] == []
    assert events[-1]["code"] == "guardrail_intervened" and "dana" not in response.text


async def test_the_openai_wires_check_every_user_message_of_the_input_history_included(tmp_path: Path) -> None:
    llm = ScriptedLlm(Reply(text="noted"), Reply(text="noted"))
    history = [
        {"role": "user", "content": f"I am {EMAIL}"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": [{"type": "text", "text": f"card {CARD}"}]},
    ]
    async with _client(_context(tmp_path, llm, "  input: mask\n")) as client:
        completion = await client.post("/v1/chat/completions", json={"model": "guarded", "messages": history})
        response = await client.post(
            "/v1/responses",
            json={"model": "guarded", "input": [{"role": "user", "content": f"again {EMAIL}"}]},
        )
        items = await client.get(f"/v1/responses/{response.json()['id']}/input_items")
    assert completion.status_code == 200 and response.status_code == 200, (completion.text, response.text)
    sent = [m["content"] for m in llm.requests[0].messages if m["role"] == "user"]
    assert sent == ["I am {EMAIL}", "card {CARD}"]
    assert [m["content"] for m in llm.requests[1].messages if m["role"] == "user"] == ["again {EMAIL}"]
    assert "dana" not in items.text and "{EMAIL}" in items.text


async def test_an_input_block_on_the_history_stores_nothing(tmp_path: Path) -> None:
    llm = ScriptedLlm()
    history = [{"role": "user", "content": f"I am {EMAIL}"}, {"role": "assistant", "content": "Hi."}]
    async with _client(_context(tmp_path, llm, "  input: block\n")) as client:
        response = await client.post(
            "/v1/responses", json={"model": "guarded", "input": [*history, {"role": "user", "content": "and?"}]}
        )
        chats = (await client.get("/api/ap/chats")).json()
    assert response.status_code == 400 and response.json()["error"]["code"] == "guardrail_intervened"
    assert llm.requests == [] and not chats.get("chats")
