"""Routing that never misfires and never dead-ends, over the real openai SDK and a loopback stub.

Each scenario counts the model calls the stub received and checks the event grammar: every tool.start
has its tool.end (and every action.start its action.end) before the terminal event.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.domain.models import Role
from agent_core.runtime.agents import AgentCatalog, AgentDefinition
from agent_core.store.memory_table import MemoryTable
from tests.support.fixtures import make_settings
from tests.support.openai_stub import Chunk, OpenAiStub, StubScript
from tests.support.runs import run_turn, text
from tests.support.server import serve
from tests.support.sse import sse_events

MAIN_TOOLS = ["time", "http_get", "save_file", "ask_user", "get_user_profile", "search_chat_history"]


def stub_context(stub: OpenAiStub, *agents: AgentDefinition) -> AppContext:
    settings = make_settings(AGENT_LLM_PROVIDER="openai", OPENAI_BASE_URL=stub.base_url, OPENAI_API_KEY="k")
    context = build_context(settings, table=MemoryTable(), audit=lambda _: None)
    context.deps.agents = AgentCatalog(list(agents))
    return context


def assert_grammar(events: list[dict[str, Any]]) -> None:
    """Every started call ends, before the terminal event, and the run has exactly one terminal event."""
    terminal = [i for i, e in enumerate(events) if e["type"] in ("run.complete", "run.error", "run.cancel")]
    assert terminal == [len(events) - 1], [e["type"] for e in events]
    for kind, key in (("tool", "toolId"), ("action", "actionId")):
        started = [e[key] for e in events if e["type"] == f"{kind}.start"]
        ended = [e[key] for e in events if e["type"] == f"{kind}.end"]
        assert sorted(started) == sorted(ended), f"{kind} calls without an end: {set(started) - set(ended)}"


def offered(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def tool_names(events: list[dict[str, Any]]) -> list[str]:
    return [e["toolName"] for e in events if e["type"] == "tool.start"]


MAIN = AgentDefinition(key="main", name="Main", tools=MAIN_TOOLS)


async def test_a_question_about_getting_the_time_in_code_calls_no_tool(openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("Use ", "new Date()."))
    events = await run_turn(stub_context(openai_stub, MAIN), "main", "How do I get the current time in JavaScript?")
    route = next(e for e in events if e["type"] == "run.route")
    assert route["mode"] == "function" and "matchedTools" not in route
    assert tool_names(events) == [] and text(events) == "Use new Date()."
    assert len(openai_stub.requests) == 1 and "time" in offered(openai_stub.requests[0])
    assert_grammar(events)


async def test_explaining_ask_me_anything_never_fires_the_frontend_tool(openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("AMA means a session where anyone can ask questions."))
    message = "Please ask me nothing, just explain what ask me anything (AMA) means"
    events = await run_turn(stub_context(openai_stub, MAIN), "main", message)
    assert tool_names(events) == [] and "AMA means" in text(events)
    assert events[-1]["type"] == "run.complete" and len(openai_stub.requests) == 1
    assert_grammar(events)


async def test_two_places_are_both_called_by_the_quick_rule(openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("Tokyo: 13:00, London: 04:00."))
    events = await run_turn(stub_context(openai_stub, MAIN), "main", "what time is it in Tokyo and in London?")
    args = [json.loads(e["delta"]) for e in events if e["type"] == "tool.args"]
    assert args == [{"timezone": "Asia/Tokyo"}, {"timezone": "Europe/London"}]
    assert len(openai_stub.requests) == 1, "no routing call: the rule made both calls"
    assert_grammar(events)


async def test_the_answer_call_after_quick_rules_completes_what_the_rule_missed(openai_stub: OpenAiStub) -> None:
    # Given a rule that sees Tokyo (its sentence) but not London (the next one)
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "call_ldn", "name": "time", "arguments": {"timezone": "Europe/London"}}]),
        StubScript.text("Tokyo is 13:00 and London 04:00."),
    )
    events = await run_turn(stub_context(openai_stub, MAIN), "main", "What time is it in Tokyo? And in London?")
    # Then the answer call offered the tools, its call ran through the normal loop, and the answer follows
    assert [e["toolId"] for e in events if e["type"] == "tool.start"] == ["quick_0", "call_ldn"]
    assert all(e["status"] == "ok" for e in events if e["type"] == "tool.result")
    assert len(openai_stub.requests) == 2 and all(offered(r) for r in openai_stub.requests)
    sent = openai_stub.requests[1]["messages"]
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ["quick_0", "call_ldn"]
    assert text(events) == "Tokyo is 13:00 and London 04:00."
    assert_grammar(events)


async def test_a_react_agent_continues_its_loop_after_quick_rules(openai_stub: OpenAiStub) -> None:
    final = {"thought": "have it", "action": "final_answer", "action_input": "It is 13:00 in Tokyo."}
    openai_stub.enqueue(StubScript.text(json.dumps(final)))
    agent = AgentDefinition(key="r", name="R", mode="react", tools=["time"])
    events = await run_turn(stub_context(openai_stub, agent), "r", "what time is it in Tokyo?")
    assert [e["toolId"] for e in events if e["type"] == "tool.start"] == ["quick_0"]
    sent = openai_stub.requests[0]["messages"]
    assert sent[-1]["content"].startswith("Observation: ") and "Asia/Tokyo" in sent[-1]["content"]
    assert "tools" not in openai_stub.requests[0], "ReAct stays a prompt strategy"
    assert text(events) == "It is 13:00 in Tokyo."
    assert_grammar(events)


async def test_tool_calls_from_a_call_that_offered_no_tools_go_through_the_loop(openai_stub: OpenAiStub) -> None:
    # Given a direct agent (no tools offered) whose model calls a tool anyway, with no text
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "c1", "name": "time", "arguments": {}}]),
        StubScript.tool_calls([{"id": "c2", "name": "time", "arguments": {"timezone": "UTC"}}]),
        StubScript.text("It is noon UTC."),
    )
    agent = AgentDefinition(key="d", name="D", mode="direct", tools=["time"])
    events = await run_turn(stub_context(openai_stub, agent), "d", "is it noon?")
    # Then the unoffered call is reported, not started; the run continues with the tools offered
    warning = next(e for e in events if e["type"] == "run.warning")
    assert warning["code"] == "unoffered_tool_calls" and "time" in warning["message"]
    assert [e["toolId"] for e in events if e["type"] == "tool.start"] == ["c2"]
    assert "tools" not in openai_stub.requests[0] and offered(openai_stub.requests[1]) == ["time"]
    assert text(events) == "It is noon UTC." and events[-1]["type"] == "run.complete"
    assert_grammar(events)


async def test_unoffered_tool_calls_with_no_tools_to_offer_still_give_an_answer(openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.tool_calls([{"id": "c1", "name": "weather", "arguments": {}}]))
    agent = AgentDefinition(key="d", name="D", mode="direct")
    events = await run_turn(stub_context(openai_stub, agent), "d", "weather?")
    assert tool_names(events) == [] and "weather" in text(events)
    assert events[-1]["type"] == "run.complete" and len(openai_stub.requests) == 1
    assert_grammar(events)


async def test_a_mixed_history_message_runs_the_lookup_as_a_tool_beside_the_others(openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("昨天没有记录。今天北京晴。"))
    context = stub_context(openai_stub, MAIN)
    events = await run_turn(context, "main", "昨天聊了什么，今天北京天气怎样？")
    route = next(e for e in events if e["type"] == "run.route")
    assert route["mode"] == "function" and route["matchedTools"] == ["search_chat_history"]
    result = next(e for e in events if e["type"] == "tool.result")
    assert result["status"] == "ok" and "start" in result["result"]
    assert offered(openai_stub.requests[0]) == MAIN_TOOLS, "the answer call can still fetch the weather"
    assert_grammar(events)


async def test_a_history_only_message_takes_the_fast_path(openai_stub: OpenAiStub) -> None:
    events = await run_turn(stub_context(openai_stub, MAIN), "main", "昨天我们聊了什么？")
    route = next(e for e in events if e["type"] == "run.route")
    assert route["mode"] == "time_query" and tool_names(events) == []
    assert "没有找到" in text(events) and openai_stub.requests == [], "no records: answered with no LLM call"
    assert_grammar(events)


@pytest.mark.parametrize(
    ("status", "message"),
    [(400, "tools is not supported for this model"), (422, "Unrecognized request argument: functions")],
)
async def test_function_falls_back_to_prompt_on_a_4xx_naming_tools_or_functions(
    openai_stub: OpenAiStub, status: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    final = {"thought": "ok", "action": "final_answer", "action_input": "answered as ReAct"}
    openai_stub.enqueue(StubScript.error(status, message), StubScript.text(json.dumps(final)))
    agent = AgentDefinition(key="f", name="F", tools=["time"])
    events = await run_turn(stub_context(openai_stub, agent), "f", "hello")
    warning = next(e for e in events if e["type"] == "run.warning")
    assert warning["code"] == "tools_rejected"
    assert [e["mode"] for e in events if e["type"] == "run.route"] == ["function", "react"]
    assert text(events) == "answered as ReAct" and "tools" not in openai_stub.requests[1]
    assert '"StrategyFallbacks"' in capsys.readouterr().out
    assert_grammar(events)


async def test_function_falls_back_to_prompt_after_unparsable_arguments_twice(
    openai_stub: OpenAiStub, capsys: pytest.CaptureFixture[str]
) -> None:
    final = {"thought": "ok", "action": "final_answer", "action_input": "done without native calls"}
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "b1", "name": "time", "arguments": '{"timezone": "UT'}]),
        StubScript.tool_calls([{"id": "b2", "name": "time", "arguments": "{oops"}]),
        StubScript.text(json.dumps(final)),
    )
    agent = AgentDefinition(key="f", name="F", tools=["time"])
    events = await run_turn(stub_context(openai_stub, agent), "f", "time?")
    results = [e for e in events if e["type"] == "tool.result"]
    assert [(r["toolId"], r["reason"]) for r in results] == [("b1", "invalid_arguments"), ("b2", "invalid_arguments")]
    warning = next(e for e in events if e["type"] == "run.warning")
    assert warning["code"] == "tool_arguments_unparsable"
    assert [e["mode"] for e in events if e["type"] == "run.route"] == ["function", "react"]
    assert text(events) == "done without native calls" and len(openai_stub.requests) == 3
    assert '"StrategyFallbacks"' in capsys.readouterr().out
    assert_grammar(events)


async def test_one_unparsable_step_is_not_a_fallback(openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "b1", "name": "time", "arguments": "{oops"}]),
        StubScript.tool_calls([{"id": "g1", "name": "time", "arguments": {"timezone": "UTC"}}]),
        StubScript.text("fine"),
    )
    agent = AgentDefinition(key="f", name="F", tools=["time"])
    events = await run_turn(stub_context(openai_stub, agent), "f", "time?")
    assert "run.warning" not in [e["type"] for e in events] and text(events) == "fine"
    assert_grammar(events)


async def test_a_401_naming_tools_is_not_a_fallback(openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.error(401, "invalid api key for tools"))
    agent = AgentDefinition(key="f", name="F", tools=["time"])
    events = await run_turn(stub_context(openai_stub, agent), "f", "hello")
    assert events[-1]["type"] == "run.error" and "run.warning" not in [e["type"] for e in events]


def test_offline_quick_rules_then_the_model_completes_with_the_frontend_tool() -> None:
    # Given the offline model and the README's message: two quick rules, and a frontend tool for the model
    context = build_context(make_settings(), table=MemoryTable(), audit=lambda _: None)
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    curl = re.search(r"-d '(\{\"message\":\"what time is it in Tokyo\?[^']*)'", readme)
    assert curl is not None, "README's first query example"
    message = json.loads(curl.group(1))["message"]
    events: list[dict[str, Any]] = []
    with (
        serve(build_app(*routes.local, context=context)) as base,
        httpx.Client(base_url=base, timeout=30) as c,
        c.stream("POST", "/api/ap/query", json={"message": message}) as response,
    ):
        for event in sse_events(response):
            events.append(event)
            if event["type"] == "tool.end" and event["toolId"].startswith("call_"):
                body = {"runId": event["runId"], "toolId": event["toolId"], "params": {"choice": "tea"}}
                assert c.post("/api/ap/submit", json=body).json()["accepted"] is True
    # Then the rules ran time and save_file; the answer call (tools offered) asked the user
    starts = [(e["toolId"], e["toolName"]) for e in events if e["type"] == "tool.start"]
    assert starts[:2] == [("quick_0", "save_file"), ("quick_1", "time")]
    assert [name for _, name in starts[2:]] == ["ask_user"]
    assert all(e["status"] == "ok" for e in events if e["type"] == "tool.result")
    # The file holds what the example says to save, not the rest of the message after it
    saved = json.loads(next(e["delta"] for e in events if e["type"] == "tool.args" and e["toolId"] == "quick_0"))
    assert saved == {"name": "notes.txt", "content": "meet at 3pm", "mediaType": "text/plain"}
    assert text(events).startswith("[offline model]")
    assert_grammar(events)


async def test_progressive_parts_read_as_prose_and_the_last_part_may_complete_with_tools(
    openai_stub: OpenAiStub,
) -> None:
    # Given a progressive agent whose quick rule saw Tokyo only; the last part's call asks for London
    part = StubScript.tool_calls([{"id": "c_ldn", "name": "time", "arguments": {"timezone": "Europe/London"}}])
    part.chunks.insert(0, Chunk(content="Tokyo is at 13:00."))
    openai_stub.enqueue(part, StubScript.text("London is at 04:00."))
    agent = AgentDefinition(key="p", name="P", tools=["time"], compose="progressive")
    events = await run_turn(stub_context(openai_stub, agent), "p", "What time is it in Tokyo? And in London?")
    assert [e["toolId"] for e in events if e["type"] == "tool.start"] == ["quick_0", "c_ldn"]
    assert text(events) == "Let me look that up.\n\nTokyo is at 13:00.\n\nLondon is at 04:00."
    assert offered(openai_stub.requests[0]) == ["time"], "the last (here: only) part offers the tools"
    assert_grammar(events)


async def test_progressive_parts_and_their_follow_up_are_one_answer(openai_stub: OpenAiStub) -> None:
    # Given the progressive run above: parts, then the follow-up loop's answer after the last part's calls
    part = StubScript.tool_calls([{"id": "c_ldn", "name": "time", "arguments": {"timezone": "Europe/London"}}])
    part.chunks.insert(0, Chunk(content="Tokyo is at 13:00."))
    openai_stub.enqueue(part, StubScript.text("London is at 04:00."))
    agent = AgentDefinition(key="p", name="P", tools=["time"], compose="progressive")
    context = stub_context(openai_stub, agent)
    events = await run_turn(context, "p", "What time is it in Tokyo? And in London?")
    start = next(e for e in events if e["type"] == "run.start")
    run = await context.deps.turns.get_run(start["chatId"], start["runId"])
    # Then the result blocking callers get is the streamed answer (one paragraph break between the parts)
    assert run is not None and run.result is not None
    assert run.result.assistant_message == text(events) and run.result.finish_reason == "stop"
    # And each part is stored once: the parts with the calls they led to, the follow-up as the answer
    stored = (await context.deps.chats.recent_messages(start["chatId"], None, 50)).items
    assistant = [(m.content.strip(), [c.id for c in m.tool_calls or []]) for m in stored if m.role == Role.ASSISTANT]
    assert assistant == [
        ("", ["quick_0"]),
        ("Let me look that up.\n\nTokyo is at 13:00.", ["c_ldn"]),
        ("London is at 04:00.", []),
    ]


async def test_a_mixed_history_message_runs_the_lookup_beside_another_quick_rule(openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("Nothing yesterday; Tokyo is at 13:00."))
    message = "what did we discuss yesterday, and what time is it in Tokyo?"
    events = await run_turn(stub_context(openai_stub, MAIN), "main", message)
    route = next(e for e in events if e["type"] == "run.route")
    assert route["matchedTools"] == ["search_chat_history", "time"]
    assert [e["status"] for e in events if e["type"] == "tool.result"] == ["ok", "ok"]
    assert len(openai_stub.requests) == 1
    assert_grammar(events)
