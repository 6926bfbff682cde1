"""POST /api/chat/stream runs the chain for every agent: intent -> direct (2 LLM calls, streamed token by
token) or the tool branch per request `strategy`, then enhancement; `maxSteps` and `reactVerbose` per request.
LLM calls are counted at the loopback OpenAI stub."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.runtime.agents import AgentCatalog, AgentDefinition
from agent_core.store.memory_table import MemoryTable
from tests.integration.test_routing import assert_grammar, offered
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.runs import text
from tests.support.sse import events_in


def _context(stub: OpenAiStub | None = None) -> AppContext:
    settings = (
        make_settings(AGENT_LLM_PROVIDER="openai", OPENAI_BASE_URL=stub.base_url, OPENAI_API_KEY="k")
        if stub is not None
        else make_settings()
    )
    return build_context(settings, table=MemoryTable(), audit=lambda _: None)


async def _chain(context: AppContext, message: str, **options: Any) -> httpx.Response:
    app = build_app(*routes.local, context=context)
    body = {"messages": [{"role": "user", "content": message}], **options}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        return await client.post("/api/chat/stream", json=body)


def _intent(mode: str) -> StubScript:
    return StubScript.text(json.dumps({"mode": mode, "reason": f"{mode} fits"}))


def _decision(action: str, action_input: Any) -> StubScript:
    return StubScript.text(json.dumps({"thought": "t", "action": action, "action_input": action_input}))


async def test_direct_branch_streams_the_answer_from_one_call_two_llm_calls_in_all(openai_stub: OpenAiStub) -> None:
    # Given the built-in main-agent (its own mode is function) and an intent that picks direct
    openai_stub.enqueue(_intent("direct"), StubScript.text("Paris ", "is the ", "capital."))
    response = await _chain(_context(openai_stub), "What is the capital of France?")
    events = events_in(response.text)
    route = next(e for e in events if e["type"] == "run.route")
    assert route["mode"] == "chain" and route["reason"].startswith("direct")
    assert [e["delta"] for e in events if e["type"] == "content.delta"] == ["Paris ", "is the ", "capital."]
    assert len(openai_stub.requests) == 2 and not any(offered(r) for r in openai_stub.requests)
    assert "direct" in openai_stub.requests[0]["messages"][-1]["content"], "the first call is the intent analysis"
    assert events[0]["agentKey"] == "main-agent"
    assert_grammar(events)


async def test_tool_branch_defaults_to_prompt_then_enhances(openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(
        _intent("react"),
        _decision("tool_call", {"tool_name": "time", "parameters": {"timezone": "Asia/Tokyo"}}),
        _decision("final_answer", "raw: 13:00 in Tokyo"),
        StubScript.text("It is **13:00** in Tokyo."),
    )
    response = await _chain(_context(openai_stub), "time in Tokyo?", reactVerbose=True)
    events = events_in(response.text)
    assert [e["toolName"] for e in events if e["type"] == "tool.start"] == ["time"]
    assert [e["action"] for e in events if e["type"] == "react.step"] == ["time", "final_answer"]
    assert text(events) == "It is **13:00** in Tokyo.", "only the enhancement streams"
    assert len(openai_stub.requests) == 4 and not any(offered(r) for r in openai_stub.requests)
    assert "raw: 13:00 in Tokyo" in openai_stub.requests[3]["messages"][-1]["content"]
    assert_grammar(events)


async def test_function_strategy_runs_native_tools_then_enhances(openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(
        _intent("react"),
        StubScript.tool_calls([{"id": "c1", "name": "time", "arguments": {"timezone": "UTC"}}]),
        StubScript.text("raw answer"),
        StubScript.text("Enhanced answer."),
    )
    response = await _chain(_context(openai_stub), "time?", strategy="function")
    events = events_in(response.text)
    assert [e["toolId"] for e in events if e["type"] == "tool.start"] == ["c1"]
    assert text(events) == "Enhanced answer." and "react.step" not in [e["type"] for e in events]
    assert [bool(offered(r)) for r in openai_stub.requests] == [False, True, True, False]
    assert_grammar(events)


async def test_function_strategy_falls_back_to_prompt_when_the_provider_rejects_functions(
    openai_stub: OpenAiStub,
) -> None:
    openai_stub.enqueue(
        _intent("react"),
        StubScript.error(400, "functions are not supported by this deployment"),
        _decision("final_answer", "raw"),
        StubScript.text("Enhanced."),
    )
    response = await _chain(_context(openai_stub), "time?", strategy="function")
    events = events_in(response.text)
    assert next(e for e in events if e["type"] == "run.warning")["code"] == "tools_rejected"
    assert [e["mode"] for e in events if e["type"] == "run.route"] == ["chain", "react"]
    assert text(events) == "Enhanced." and events[-1]["type"] == "run.complete"
    assert_grammar(events)


async def test_max_steps_per_request_answers_from_what_the_tool_branch_gathered(openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(
        _intent("react"),
        _decision("tool_call", {"tool_name": "time", "parameters": {"timezone": "Asia/Tokyo"}}),
        StubScript.text("In Tokyo ", "it is morning."),
    )
    response = await _chain(_context(openai_stub), "time in Tokyo?", maxSteps=1)
    events = events_in(response.text)
    result = next(e for e in events if e["type"] == "tool.result")
    assert result["status"] == "ok"
    # Then the step budget ends the branch, and the enhancement call answers from the result it fetched
    assert len(openai_stub.requests) == 3, "intent + one step + the enhancement"
    enhancement = openai_stub.requests[2]
    assert offered(enhancement) == [], "no tools once the budget is spent"
    assert result["result"]["time"] in enhancement["messages"][-1]["content"]
    assert text(events) == "In Tokyo it is morning." and events[-1]["finishReason"] == "max_steps"
    assert "react.step" not in [e["type"] for e in events], "reactVerbose is off unless asked for"
    assert_grammar(events)


async def test_max_steps_in_the_function_branch_answers_from_its_results_too(openai_stub: OpenAiStub) -> None:
    call = {"id": "c1", "name": "time", "arguments": {"timezone": "Europe/London"}}
    openai_stub.enqueue(_intent("react"), StubScript.tool_calls([call]), StubScript.text("London: noon."))
    response = await _chain(_context(openai_stub), "time in London?", maxSteps=1, strategy="function")
    events = events_in(response.text)
    assert len(openai_stub.requests) == 3 and offered(openai_stub.requests[2]) == []
    assert "Europe/London" in openai_stub.requests[2]["messages"][-1]["content"]
    assert text(events) == "London: noon." and events[-1]["finishReason"] == "max_steps"
    assert_grammar(events)


@pytest.mark.parametrize("value", [0, 51, -3])
async def test_max_steps_out_of_range_is_a_400_before_any_work(openai_stub: OpenAiStub, value: int) -> None:
    response = await _chain(_context(openai_stub), "hi", maxSteps=value)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("option_out_of_range", "maxSteps")
    assert openai_stub.requests == []


@pytest.mark.parametrize(("option", "value"), [("strategy", "sideways"), ("maxSteps", True), ("maxSteps", "5")])
async def test_options_of_the_wrong_kind_are_rejected(openai_stub: OpenAiStub, option: str, value: Any) -> None:
    response = await _chain(_context(openai_stub), "hi", **{option: value})
    error = response.json()["error"]
    assert (response.status_code, error["code"], error["param"]) == (422, "invalid_request", option)
    assert openai_stub.requests == []


async def test_the_chain_runs_offline_too() -> None:
    context = _context()
    direct = events_in((await _chain(context, "hello there")).text)
    assert text(direct).startswith("[offline model]") and direct[-1]["type"] == "run.complete"
    tools = events_in((await _chain(context, "what time is it in Tokyo?")).text)
    assert next(e for e in tools if e["type"] == "run.route")["reason"].startswith("react")
    result = next(e for e in tools if e["type"] == "tool.result")
    assert result["status"] == "ok" and result["result"]["timezone"] == "Asia/Tokyo"
    assert text(tools) and tools[-1]["type"] == "run.complete"
    assert_grammar(tools)


async def test_a_yaml_chain_agent_behaves_the_same_on_the_stored_chat_route(openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(_intent("direct"), StubScript.text("Hi ", "there."))
    context = _context(openai_stub)
    context.deps.agents = AgentCatalog([AgentDefinition(key="chainy", name="Chainy", mode="chain", tools=["time"])])
    app = build_app(*routes.local, context=context)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        response = await client.post("/api/ap/query", json={"message": "hello", "agentKey": "chainy"})
    events = events_in(response.text)
    assert next(e for e in events if e["type"] == "run.route")["mode"] == "chain"
    assert [e["delta"] for e in events if e["type"] == "content.delta"] == ["Hi ", "there."]
    assert len(openai_stub.requests) == 2
    assert_grammar(events)


async def test_native_tool_calls_in_decision_calls_are_read_not_left_dangling(openai_stub: OpenAiStub) -> None:
    # Given a model that answers the intent call and a ReAct step with native tool calls (none offered)
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "i1", "name": "time", "arguments": {}}]),
        StubScript.tool_calls([{"id": "d1", "name": "time", "arguments": {"timezone": "UTC"}}]),
        _decision("final_answer", "raw"),
        StubScript.text("Enhanced."),
    )
    events = events_in((await _chain(_context(openai_stub), "time?")).text)
    # Then the intent counts as the tool branch and the step's call runs as a ReAct tool_call
    assert next(e for e in events if e["type"] == "run.route")["reason"].startswith("react")
    assert [e["toolId"] for e in events if e["type"] == "tool.start"] == ["react_1"]
    assert json.loads(next(e for e in events if e["type"] == "tool.args")["delta"]) == {"timezone": "UTC"}
    assert text(events) == "Enhanced."
    assert_grammar(events)


async def test_the_offline_model_chooses_only_among_the_tools_its_prompt_lists() -> None:
    context = _context()
    context.deps.agents = AgentCatalog([AgentDefinition(key="bare", name="Bare", mode="chain")])
    events = events_in((await _chain(context, "what time is it in Tokyo?", agentName="bare")).text)
    assert next(e for e in events if e["type"] == "run.route")["reason"].startswith("direct")
    assert "tool.start" not in [e["type"] for e in events] and events[-1]["type"] == "run.complete"
