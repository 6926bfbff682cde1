"""Each strategy alone, over a fake `AgentRun` and a scripted model: the events it yields and the step it ends with."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_core.domain.events import ContentDelta, RunRoute, RunWarning, ToolResult
from agent_core.domain.models import ToolCall
from agent_core.errors import LlmRejectedTools
from agent_core.runtime.agents import AgentDefinition
from agent_core.runtime.next_step import Draft, FinalAnswer, RunAgain, Steps, StrategyError, WaitForClient
from agent_core.runtime.router import route_and_run
from agent_core.runtime.strategies.chain import chain_strategy, tool_branch
from agent_core.runtime.strategies.common import GATHERED, close_at_max_steps
from agent_core.runtime.strategies.direct import direct_strategy
from agent_core.runtime.strategies.function import function_loop, function_strategy
from agent_core.runtime.strategies.quick import call_tools_then_answer
from agent_core.runtime.strategies.react import react_strategy
from tests.support.fake_llm import Reply
from tests.support.fake_run import FakeRun, collect

TIME_CALL = ("c1", "time", {"timezone": "Asia/Tokyo"})


def agent(**fields: Any) -> AgentDefinition:
    return AgentDefinition(key="a", name="A", tools=["time"], **fields)


def decision(action: str, action_input: Any, thought: str = "") -> Reply:
    return Reply(text=json.dumps({"thought": thought, "action": action, "action_input": action_input}))


def streamed(events: list[Any]) -> str:
    return "".join(e.delta for e in events if isinstance(e, ContentDelta))


# ----- function -----


async def test_function_answers_a_step_without_calls() -> None:
    r = FakeRun(agent(), [Reply(text="It is noon.")])
    events, step = await collect(function_strategy, r)
    assert step == FinalAnswer("It is noon.", "stop")
    assert isinstance(events[0], RunRoute) and events[0].mode == "function"
    assert streamed(events) == "It is noon."
    assert r.requests[0].tools and r.requests[0].tools[0]["function"]["name"] == "time"


async def test_function_runs_the_calls_then_answers_from_their_results() -> None:
    r = FakeRun(agent(), [Reply(tool_calls=[TIME_CALL]), Reply(text="12:00 in Tokyo.")], results={"time": "12:00"})
    events, step = await collect(function_strategy, r)
    assert step == FinalAnswer("12:00 in Tokyo.")
    assert [c.name for c in r.executed] == ["time"]
    assert [e.tool_id for e in events if isinstance(e, ToolResult)] == ["c1"]
    assert r.requests[1].messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "12:00"}


async def test_function_hands_client_tools_to_the_caller() -> None:
    calls = [("c1", "pick_file", {}), TIME_CALL]
    r = FakeRun(agent(), [Reply(text="Let me look.", tool_calls=calls)], client_tools=frozenset({"pick_file"}))
    _, step = await collect(function_strategy, r)
    assert isinstance(step, WaitForClient)
    assert [c.name for c in step.calls] == ["pick_file"] and step.text == "Let me look."
    assert step.stored == "", "the text was saved with the server call that ran"
    assert [c.name for c in r.executed] == ["time"], "the server-side call of the same step runs first"


async def test_function_falls_back_to_react_when_the_provider_rejects_tools() -> None:
    rejected = LlmRejectedTools("tools are not supported")
    r = FakeRun(agent(), [Reply(error=rejected), decision("final_answer", "Noon.")])
    events, step = await collect(function_strategy, r)
    assert isinstance(step, RunAgain)
    assert [type(e) for e in events[-2:]] == [RunWarning, RunRoute]
    rest, then = await collect(step.then, r)
    assert then == FinalAnswer("Noon.") and streamed(rest) == "Noon."
    assert r.requests[1].purpose == "react" and r.requests[1].tools == []


async def test_function_at_max_steps_answers_from_what_was_gathered() -> None:
    replies = [Reply(tool_calls=[TIME_CALL]), Reply(text="By the results: noon.")]
    r = FakeRun(agent(max_steps=1), replies, results={"time": "12:00"})
    _, step = await collect(function_strategy, r)
    assert step == FinalAnswer("By the results: noon.", "max_steps")
    assert r.requests[1].tools == [], "the closing call offers no tools"
    assert "time(" in r.requests[1].messages[-2]["content"] and "-> 12:00" in r.requests[1].messages[-2]["content"]


async def test_function_loop_as_a_draft_streams_nothing_and_ends_with_a_draft() -> None:
    r = FakeRun(agent(), [Reply(text="raw text")])
    events, step = await collect(lambda run: function_loop(run, draft=True), r)
    assert step == Draft("raw text") and streamed(events) == ""
    assert r.requests[0].forward_content is False


# ----- react -----


async def test_react_final_answer_is_streamed_and_final() -> None:
    r = FakeRun(agent(mode="react"), [decision("final_answer", "It is noon.")])
    events, step = await collect(react_strategy, r)
    assert step == FinalAnswer("It is noon.")
    assert streamed(events) == "It is noon.", "the decision's JSON is not streamed, its answer is"


async def test_react_acts_on_a_tool_call_then_answers() -> None:
    replies = [decision("tool_call", {"tool_name": "time", "parameters": {}}), decision("final_answer", "Noon.")]
    r = FakeRun(agent(mode="react"), replies, results={"time": "12:00"})
    _, step = await collect(react_strategy, r)
    assert step == FinalAnswer("Noon.")
    assert [(c.id, c.name) for c in r.executed] == [("react_1", "time")]
    assert r.requests[1].messages[-1] == {"role": "user", "content": "Observation: 12:00"}


async def test_react_continued_from_a_checkpoint_sees_its_earlier_calls_as_steps() -> None:
    # A run continued in another process (runtime/continuation.py) already made a call: the loop goes on after it
    r = FakeRun(agent(mode="react"), [decision("final_answer", "Noon.")])
    wire = [{"id": "react_1", "type": "function", "function": {"name": "time", "arguments": "{}"}}]
    r.saved += [
        {"role": "assistant", "content": "", "tool_calls": wire},
        {"role": "tool", "tool_call_id": "react_1", "content": "12:00"},
    ]
    _, step = await collect(react_strategy, r)
    assert step == FinalAnswer("Noon.") and r.executed == []
    assert r.requests[0].messages[-1] == {"role": "user", "content": "Observation: 12:00"}


async def test_react_user_input_ends_the_run_asking() -> None:
    r = FakeRun(agent(mode="react"), [decision("user_input", "Which city?")])
    events, step = await collect(react_strategy, r)
    assert step == FinalAnswer("Which city?", "user_input") and streamed(events) == "Which city?"


async def test_react_with_enhance_answers_through_the_enhancement_call() -> None:
    replies = [decision("final_answer", "noon"), Reply(text="**It is noon.**")]
    r = FakeRun(agent(mode="react", enhance=True), replies)
    _, step = await collect(react_strategy, r)
    assert step == FinalAnswer("**It is noon.**") and r.requests[1].purpose == "enhance"


# ----- chain -----


async def test_chain_direct_answers_in_two_calls() -> None:
    replies = [Reply(text='{"mode": "direct", "reason": "greeting"}'), Reply(text="Hello!")]
    r = FakeRun(agent(mode="chain"), replies)
    events, step = await collect(chain_strategy, r)
    assert step == FinalAnswer("Hello!")
    assert [e.reason for e in events if isinstance(e, RunRoute)] == ["direct: greeting"]
    assert [q.purpose for q in r.requests] == ["intent", "chat"]


async def test_chain_enhances_the_draft_of_its_tool_branch() -> None:
    replies = [
        Reply(text='{"mode": "react", "reason": "needs the time"}'),
        decision("tool_call", {"tool_name": "time", "parameters": {}}),
        decision("final_answer", "12:00"),
        Reply(text="It is **12:00**."),
    ]
    r = FakeRun(agent(mode="chain"), replies, results={"time": "12:00"})
    events, step = await collect(chain_strategy, r)
    assert step == FinalAnswer("It is **12:00**.")
    assert streamed(events) == "It is **12:00**.", "the branch's text is not streamed, the enhanced answer is"
    assert r.requests[-1].purpose == "enhance" and "Raw result:\n12:00" in r.requests[-1].messages[-1]["content"]


async def test_chain_branch_that_asks_the_user_is_not_enhanced() -> None:
    replies = [Reply(text='{"mode": "react", "reason": "tools"}'), decision("user_input", "Which city?")]
    r = FakeRun(agent(mode="chain"), replies)
    _, step = await collect(chain_strategy, r)
    assert step == FinalAnswer("Which city?", "user_input")
    assert len(r.requests) == 2, "no enhancement call"


async def test_chain_tool_branch_hands_over_a_draft() -> None:
    r = FakeRun(agent(mode="chain", strategy="function"), [Reply(text="raw")])
    _, step = await collect(tool_branch, r)
    assert step == Draft("raw")


# ----- direct -----


async def test_direct_answers_in_one_call_offering_no_tools() -> None:
    r = FakeRun(agent(mode="direct"), [Reply(text="Hi there.")])
    events, step = await collect(direct_strategy, r)
    assert step == FinalAnswer("Hi there.") and r.requests[0].tools == []
    assert isinstance(events[0], RunRoute) and events[0].mode == "direct"


async def test_direct_whose_call_returns_calls_anyway_runs_again_in_the_tool_loop() -> None:
    r = FakeRun(agent(mode="direct"), [Reply(tool_calls=[TIME_CALL]), Reply(text="Noon.")])
    events, step = await collect(direct_strategy, r)
    assert isinstance(step, RunAgain) and any(isinstance(e, RunWarning) for e in events)
    _, then = await collect(step.then, r)
    assert then == FinalAnswer("Noon.") and r.requests[1].tools, "the tool loop offers the tools"


# ----- quick (calls the run made itself) and the max-steps close -----


async def test_quick_calls_run_then_the_tool_loop_continues() -> None:
    calls = [ToolCall(id="quick_0", name="time", arguments="{}")]
    r = FakeRun(agent(), [Reply(text="Noon.")], results={"time": "12:00"})
    _, step = await collect(lambda run: call_tools_then_answer(run, calls), r)
    assert isinstance(step, RunAgain) and [c.id for c in r.executed] == ["quick_0"]
    assert r.requests == [], "the answer call belongs to the loop that runs next"
    _, then = await collect(step.then, r)
    assert then == FinalAnswer("Noon.")


async def test_quick_calls_of_a_react_agent_seed_its_loop() -> None:
    calls = [ToolCall(id="quick_0", name="time", arguments="{}")]
    r = FakeRun(agent(mode="react"), [decision("final_answer", "Noon.")], results={"time": "12:00"})
    _, step = await collect(lambda run: call_tools_then_answer(run, calls), r)
    assert isinstance(step, RunAgain)
    _, then = await collect(step.then, r)
    assert then == FinalAnswer("Noon.")
    assert {"role": "user", "content": "Observation: 12:00"} in r.requests[0].messages


async def test_max_steps_close_in_a_draft_hands_the_gathered_results_over() -> None:
    r = FakeRun(agent(), [], results={"time": "12:00"})
    async for _ in r.run_calls([ToolCall(id="c1", name="time", arguments="{}")]):
        pass
    _, step = await collect(lambda run: close_at_max_steps(run, draft=True), r)
    assert step == Draft(GATHERED + "time({}) -> 12:00", "max_steps")


# ----- Steps: driving a strategy to its end -----


async def test_steps_follow_run_again_to_the_final_step() -> None:
    r = FakeRun(agent(mode="direct"), [Reply(tool_calls=[TIME_CALL]), Reply(text="Noon.")])
    steps = Steps(r, direct_strategy)
    events = [e async for e in steps]
    assert steps.ending() == FinalAnswer("Noon.")
    assert not any(isinstance(e, RunAgain) for e in events)


async def test_steps_refuse_a_strategy_without_a_step_or_with_events_after_it() -> None:
    async def silent(run: Any) -> Any:
        yield RunRoute(mode="x", reason="")

    async def chatty(run: Any) -> Any:
        yield FinalAnswer("a")
        yield RunRoute(mode="x", reason="")

    for strategy in (silent, chatty):
        with pytest.raises(StrategyError):
            _ = [e async for e in Steps(FakeRun(agent(), []), strategy)]


# ----- the router: a strategy over the protocol alone -----


async def test_the_router_answers_a_history_question_from_the_run_records_without_a_model_call() -> None:
    r = FakeRun(agent(), [], message="what did we talk about yesterday?")
    events, step = await collect(route_and_run, r)
    assert isinstance(step, FinalAnswer) and step.text and streamed(events) == step.text
    route = next(e for e in events if isinstance(e, RunRoute))
    assert route.mode == "time_query" and r.requests == [], "no records: the fixed reply, no model call"


async def test_the_router_sends_a_continuation_straight_to_the_agent_strategy() -> None:
    r = FakeRun(agent(), [Reply(text="Done.")], message="what did we talk about yesterday?", continuation=True)
    events, step = await collect(route_and_run, r)
    assert step == FinalAnswer("Done.")
    assert [e.mode for e in events if isinstance(e, RunRoute)] == ["function"]
