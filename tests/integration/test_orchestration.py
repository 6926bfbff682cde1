"""Routing and strategies: quick rules, function, ReAct, direct, chain, fallback, maxSteps, progressive answers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agent_core.context import AppContext, build_context
from agent_core.llm.openai_client import OpenAiLlmClient
from agent_core.runtime.agents import AgentCatalog, AgentDefinition
from agent_core.store.memory_table import MemoryTable
from agent_core.tools.base import Tool, ToolContext
from tests.support.fake_llm import Reply, ScriptedLlm
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.runs import run_turn, text, types


def _context(llm: Any, *agents: AgentDefinition, **settings: Any) -> AppContext:
    context = build_context(make_settings(**settings), table=MemoryTable(), llm=llm, audit=lambda _: None)
    context.deps.agents = AgentCatalog(list(agents))
    return context


def _json(value: dict[str, Any]) -> Reply:
    return Reply(text=json.dumps(value))


async def test_quick_rules_call_tools_with_no_routing_call_and_the_answer_call_offers_the_tools() -> None:
    llm = ScriptedLlm(Reply(text="It is late in Tokyo."), Reply(text="Both done."))
    agent = AgentDefinition(key="a", name="A", tools=["time", "save_file"])
    context = _context(llm, agent)
    # One tool
    events = await run_turn(context, "a", "what time is it in Tokyo?")
    route = next(e for e in events if e["type"] == "run.route")
    assert route["matchedTools"] == ["time"] and route["reason"] == "quick rule matched"
    assert [e["toolId"] for e in events if e["type"] == "tool.start"] == ["quick_0"]
    assert len(llm.requests) == 1, "exactly one LLM call: the answer"
    offered = [t["function"]["name"] for t in llm.requests[0].tools]
    assert offered == ["time", "save_file"], "the answer call still offers the agent's tools"
    assert text(events) == "It is late in Tokyo."
    # Two places in one question: one call per place
    events = await run_turn(context, "a", "what time is it in Tokyo and in London?")
    args = [json.loads(e["delta"]) for e in events if e["type"] == "tool.args"]
    assert args == [{"timezone": "Asia/Tokyo"}, {"timezone": "Europe/London"}]
    assert len(llm.requests) == 2 and all(e["status"] == "ok" for e in events if e["type"] == "tool.result")


async def test_a_quick_rule_override_and_a_disabled_rule() -> None:
    llm = ScriptedLlm()
    agent = AgentDefinition.model_validate(
        {
            "key": "a",
            "name": "A",
            "tools": [{"name": "time", "quickMatch": "^clock$"}, {"name": "ask_user", "quickMatch": None}],
        }
    )
    context = _context(llm, agent)
    assert "run.route" in types(events := await run_turn(context, "a", "clock"))
    assert next(e for e in events if e["type"] == "run.route")["matchedTools"] == ["time"]
    events = await run_turn(context, "a", "what time is it? ask me")
    route = next(e for e in events if e["type"] == "run.route")
    assert route["mode"] == "function" and "matchedTools" not in route


async def test_react_loop_over_several_steps_with_verbose_steps() -> None:
    llm = ScriptedLlm(
        _json(
            {
                "thought": "need the time",
                "action": "tool_call",
                "action_input": {"tool_name": "time", "parameters": {"timezone": "UTC"}},
            }
        ),
        Reply(
            text='```json\n{"thought": "and Paris", "action": "tool_call", "action_input": {"tool_name": "time", "parameters": {"timezone": "Europe/Paris"}}}\n```\nDone.'
        ),
        _json({"thought": "enough", "action": "final_answer", "action_input": "UTC and Paris times found."}),
    )
    agent = AgentDefinition(key="r", name="R", mode="react", react_verbose=True, tools=["time"])
    events = await run_turn(_context(llm, agent), "r", "compare UTC and Paris")
    assert [e["toolId"] for e in events if e["type"] == "tool.start"] == ["react_1", "react_2"]
    steps = [e for e in events if e["type"] == "react.step"]
    assert [(s["step"], s["action"]) for s in steps] == [(1, "time"), (2, "time"), (3, "final_answer")]
    assert steps[0]["actionInput"] == {"tool_name": "time", "parameters": {"timezone": "UTC"}}
    assert steps[0]["observation"] and "UTC" in steps[0]["observation"]
    assert text(events) == "UTC and Paris times found."
    assert "Observation:" in llm.requests[1].messages[-1]["content"]
    assert all(r.tools == [] for r in llm.requests), "ReAct is a prompt strategy"


async def test_react_unparsable_decision_gets_one_retry_then_run_error() -> None:
    llm = ScriptedLlm(Reply(text="not json"), Reply(text="still not json"))
    agent = AgentDefinition(key="r", name="R", mode="react", tools=["time"])
    events = await run_turn(_context(llm, agent), "r", "hi")
    assert events[-1]["type"] == "run.error" and events[-1]["code"] == "react_parse_error"
    assert "could not be parsed" in llm.requests[1].messages[-1]["content"]


async def test_react_user_input_ends_the_run() -> None:
    llm = ScriptedLlm(_json({"thought": "?", "action": "user_input", "action_input": "Which city?"}))
    events = await run_turn(_context(llm, AgentDefinition(key="r", name="R", mode="react")), "r", "time please")
    assert events[-1]["finishReason"] == "user_input" and text(events) == "Which city?"


async def test_chain_direct_streams_the_answer_from_one_call_and_the_tool_branch_is_enhanced() -> None:
    agent = AgentDefinition(key="c", name="C", mode="chain", tools=["time"])
    # Direct: intent + one streamed answer, no enhancement
    llm = ScriptedLlm(_json({"mode": "direct", "reason": "knowledge"}), Reply(text="raw direct answer"))
    events = await run_turn(_context(llm, agent), "c", "tell me")
    route = next(e for e in events if e["type"] == "run.route")
    assert route["mode"] == "chain" and route["reason"].startswith("direct")
    assert text(events) == "raw direct answer" and len(llm.requests) == 2
    assert [r.purpose for r in llm.requests] == ["intent", "chat"]
    # Tool branch (prompt strategy by default), then the enhancement call streams the answer
    llm = ScriptedLlm(
        _json({"mode": "react", "reason": "needs the clock"}),
        _json({"thought": "t", "action": "tool_call", "action_input": {"tool_name": "time", "parameters": {}}}),
        _json({"thought": "t", "action": "final_answer", "action_input": "raw react answer"}),
        Reply(text="**Polished** answer"),
    )
    events = await run_turn(_context(llm, agent), "c", "tell me")
    assert len([e for e in events if e["type"] == "tool.start"]) == 1
    assert text(events) == "**Polished** answer", "only the enhanced answer is streamed"
    assert "raw react answer" in llm.requests[-1].messages[-1]["content"]
    assert [r.purpose for r in llm.requests] == ["intent", "react", "react", "enhance"]


async def test_direct_mode_offers_no_tools() -> None:
    llm = ScriptedLlm(Reply(text="plain"))
    events = await run_turn(_context(llm, AgentDefinition(key="d", name="D", mode="direct", tools=["time"])), "d", "hi")
    assert text(events) == "plain" and llm.requests[0].tools == []


async def test_max_steps_answers_from_the_tool_results_gathered() -> None:
    llm = ScriptedLlm(*[Reply(tool_calls=[(f"c{i}", "time", {"timezone": "UTC"})]) for i in range(3)])
    llm.replies.append(Reply(text="From the clock I read: it is daytime in UTC."))
    agent = AgentDefinition(key="f", name="F", tools=["time"], max_steps=3)
    events = await run_turn(_context(llm, agent), "f", "loop")
    # Three steps, then one answer call offering no tools, over the three results
    assert len(llm.requests) == 4 and llm.requests[-1].tools == []
    prompt = "\n".join(str(m["content"]) for m in llm.requests[-1].messages)
    assert prompt.count('time({"timezone": "UTC"}) -> ') == 3
    assert llm.requests[-1].messages[-1]["role"] == "user", "the records come before the question"
    assert text(events) == "From the clock I read: it is daytime in UTC."
    assert events[-1]["finishReason"] == "max_steps"


async def test_max_steps_with_no_answer_from_the_model_ends_with_a_closing_message() -> None:
    llm = ScriptedLlm(*[Reply(tool_calls=[(f"c{i}", "time", {})]) for i in range(5)])
    agent = AgentDefinition(key="f", name="F", tools=["time"], max_steps=3)
    events = await run_turn(_context(llm, agent), "f", "loop")
    assert len(llm.requests) == 4, "three steps, then the answer call (which only called tools again)"
    assert events[-1]["finishReason"] == "max_steps" and "3 steps" in text(events)


async def test_a_tool_outside_the_agents_list_is_denied() -> None:
    llm = ScriptedLlm(Reply(tool_calls=[("c1", "http_get", {"url": "https://example.com"})]), Reply(text="ok"))
    audit: list[dict[str, Any]] = []
    context = build_context(make_settings(), table=MemoryTable(), llm=llm, audit=audit.append)
    context.deps.agents = AgentCatalog([AgentDefinition(key="t", name="T", tools=["time"])])
    events = await run_turn(context, "t", "fetch it")
    result = next(e for e in events if e["type"] == "tool.result")
    assert (result["status"], result["reason"]) == ("denied", "not_allowed")
    assert [(a["toolName"], a["status"], a["reason"]) for a in audit] == [("http_get", "denied", "not_allowed")]


async def test_function_falls_back_to_react_when_the_provider_rejects_tools(openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(
        StubScript.error(400, "tools is not supported for this model"),
        StubScript.text(
            json.dumps({"thought": "fine", "action": "final_answer", "action_input": "answered without tools"})
        ),
    )
    settings = make_settings(AGENT_LLM_PROVIDER="openai", OPENAI_BASE_URL=openai_stub.base_url, OPENAI_API_KEY="k")
    context = _context(OpenAiLlmClient(settings), AgentDefinition(key="f", name="F", tools=["time"]))
    events = await run_turn(context, "f", "hello")
    warning = next(e for e in events if e["type"] == "run.warning")
    assert warning["code"] == "tools_rejected"
    assert [e["mode"] for e in events if e["type"] == "run.route"] == ["function", "react"]
    assert text(events) == "answered without tools" and events[-1]["type"] == "run.complete"
    assert "tools" in openai_stub.requests[0] and "tools" not in openai_stub.requests[1]


class _GateArgs(BaseModel):
    pass


def _gated_tool(name: str, gate: asyncio.Event) -> Tool:
    class Gated(Tool):
        description = f"{name} (finishes when the test says so)"
        args_model = _GateArgs

        async def run(self, args: Any, ctx: ToolContext) -> Any:
            await gate.wait()
            return {"from": name}

    Gated.name = name
    return Gated()


async def test_progressive_answers_follow_tool_completion_order() -> None:
    # Given two tools; "slow" finishes only after "fast"'s answer part has streamed
    fast_gate, slow_gate = asyncio.Event(), asyncio.Event()
    llm = ScriptedLlm(
        Reply(tool_calls=[("c_slow", "slow", {}), ("c_fast", "fast", {})]),
        Reply(text="Fast result is in."),
        Reply(text="Also, slow result is in."),
    )
    agent = AgentDefinition(key="p", name="P", tools=["slow", "fast"], compose="progressive")
    context = _context(llm, agent)
    context.deps.tools.registry.register(_gated_tool("slow", slow_gate))
    context.deps.tools.registry.register(_gated_tool("fast", fast_gate))
    fast_gate.set()

    original = llm.stream

    async def release_slow_after_first_part(request: Any) -> Any:
        async for delta in original(request):
            yield delta
        if len(llm.requests) == 2:
            slow_gate.set()

    llm.stream = release_slow_after_first_part  # type: ignore[method-assign]
    events = await run_turn(context, "p", "check both")
    order = [
        (e["type"], e.get("toolId") or e.get("delta")) for e in events if e["type"] in ("tool.result", "content.delta")
    ]
    assert order == [
        ("content.delta", "Let me look that up.\n\n"),
        ("tool.result", "c_fast"),
        ("content.delta", "Fast resu"),
        ("content.delta", "lt is in."),
        ("tool.result", "c_slow"),
        ("content.delta", "\n\n"),
        ("content.delta", "Also, slow r"),
        ("content.delta", "esult is in."),
    ]
    assert "transition" in llm.requests[2].messages[-1]["content"]
    assert events[-1]["type"] == "run.complete"


def test_invalid_agent_yaml_names_file_field_and_problem(tmp_path: Path) -> None:
    from agent_core.runtime.agents import AgentDefinitionError, load_definitions

    (tmp_path / "good.yaml").write_text("key: good\nname: Good\n")
    (tmp_path / "bad.yaml").write_text("key: bad\nname: Bad\nmode: sideways\n")
    with pytest.raises(AgentDefinitionError) as info:
        load_definitions(str(tmp_path))
    assert info.value.path.name == "bad.yaml" and info.value.field == "mode"
    assert "function" in info.value.problem
    (tmp_path / "bad.yaml").write_text("key: bad\nname: Bad\ntools: [{name: time, quickMatch: '('}]\n")
    with pytest.raises(AgentDefinitionError) as info:
        load_definitions(str(tmp_path))
    assert info.value.field == "tools.0.quickMatch"
