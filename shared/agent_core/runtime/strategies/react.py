"""react: a prompt strategy; the model answers each step with a JSON decision, the run acts on it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agent_core.domain.events import Event, ReactStep, RunRoute
from agent_core.domain.models import ToolCall
from agent_core.errors import AgentError
from agent_core.runtime.composer import enhance
from agent_core.runtime.decisions import DecisionError, ReactDecision, parse_react
from agent_core.runtime.next_step import Draft, FinalAnswer, NextStep
from agent_core.runtime.run_protocol import AgentRun
from agent_core.runtime.strategies.common import close_at_max_steps

REACT_FORMAT = """You solve the task step by step. Answer every step with ONE JSON object and nothing else:
{"thought": "<your reasoning>", "action": "tool_call" | "user_input" | "final_answer", "action_input": ...}
- tool_call: action_input is {"tool_name": "<one of the tools>", "parameters": {...}}
- user_input: action_input is the question to ask the user (the run stops and waits for the reply)
- final_answer: action_input is the answer text
After a tool_call you receive "Observation: <result>".
Tools:
"""


class ReactParseError(AgentError):
    code = "react_parse_error"
    status = 502
    type = "server_error"


def react_prompt(r: AgentRun) -> str:
    tools = "\n".join(
        f"- {t['name']}: {t.get('description', '')} parameters: {json.dumps(t.get('parameters', {}))}"
        for t in r.toolset.describe()
    )
    return f"{r.agent.system_prompt}\n\n{REACT_FORMAT}{tools or '(none)'}"


async def _decide(r: AgentRun, messages: list[dict[str, Any]], holder: list[ReactDecision]) -> AsyncIterator[Event]:
    """One decision; an unparsable answer gets one retry with the parse error, then the run fails."""
    for attempt in range(2):
        step = r.model_step(messages, forward_content=False, purpose="react")
        async for event in step:
            yield event
        text = step.text()
        native = step.tool_calls()
        if native and not text.strip():  # a native call instead of the JSON: read it as a tool_call decision
            text = _decision_text(native[0])
        try:
            holder.append(parse_react(text))
            messages.append({"role": "assistant", "content": text})
            return
        except DecisionError as error:
            if attempt:
                raise ReactParseError(f"the model's ReAct decision could not be parsed: {error}") from error
            messages.append({"role": "assistant", "content": text})
            messages.append(
                {
                    "role": "user",
                    "content": f"Your answer could not be parsed ({error}). Reply with the JSON object only.",
                }
            )


def _decision_text(call: ToolCall) -> str:
    try:
        parameters = json.loads(call.arguments or "{}")
    except ValueError:
        parameters = {}
    action_input = {"tool_name": call.name, "parameters": parameters if isinstance(parameters, dict) else {}}
    return json.dumps({"thought": "", "action": "tool_call", "action_input": action_input}, ensure_ascii=False)


def _seeded(r: AgentRun, calls: list[ToolCall]) -> list[dict[str, Any]]:
    """Calls the run already made (quick rules) as ReAct steps: the decision, then its observation."""
    transcript: list[dict[str, Any]] = []
    for call in calls:
        transcript.append({"role": "assistant", "content": _decision_text(call)})
        transcript.append({"role": "user", "content": f"Observation: {r.result_of(call.id)}"})
    return transcript


async def react_loop(
    r: AgentRun, *, draft: bool = False, seed: list[ToolCall] | None = None
) -> AsyncIterator[Event | NextStep]:
    """The ReAct loop; the final answer is streamed (or enhanced), or with `draft` (chain) a `Draft`.

    `seed`: calls already made this run (quick rules), given to the model as earlier steps.
    """
    messages = r.window(react_prompt(r), include_run=False) + _seeded(r, seed or [])
    for step in range(1, r.agent.max_steps + 1):
        r.check_cancelled()
        holder: list[ReactDecision] = []
        async for event in _decide(r, messages, holder):
            yield event
        decision = holder[0]
        if decision.action == "tool_call":
            call = ToolCall(
                id=f"react_{step}",
                name=decision.tool_name,
                arguments=json.dumps(decision.parameters or {}, ensure_ascii=False),
            )
            async for event in r.announce([call]):
                yield event
            async for event in r.end_calls([(call, r.end_event(call))]):
                yield event
            async for event in r.run_calls([call], content=decision.thought):
                yield event
            observation = r.result_of(call.id)
            if r.agent.react_verbose:
                yield _step_event(step, decision, observation)
            messages.append({"role": "user", "content": f"Observation: {observation}"})
            continue
        if r.agent.react_verbose:
            yield _step_event(step, decision, None)
        if decision.action == "user_input":
            async for event in r.text_block(decision.text):
                yield event
            yield FinalAnswer(decision.text, "user_input")
            return
        if draft:
            yield Draft(decision.text)
            return
        if r.agent.enhance:
            async for item in enhance(r, decision.text):
                yield item
            return
        async for event in r.text_block(decision.text):
            yield event
        yield FinalAnswer(decision.text)
        return
    async for item in close_at_max_steps(r, draft=draft):
        yield item


def _step_event(step: int, decision: ReactDecision, observation: Any) -> ReactStep:
    return ReactStep(
        step=step,
        thought=decision.thought or None,
        action=decision.action if decision.action != "tool_call" else decision.tool_name,
        action_input=decision.action_input,
        observation=observation,
    )


async def react_strategy(r: AgentRun) -> AsyncIterator[Event | NextStep]:
    yield RunRoute(mode="react", reason="ReAct prompt strategy")
    async for item in react_loop(r, seed=r.calls_made()):  # a continued run's calls are its earlier steps
        yield item
