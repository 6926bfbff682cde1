"""The run's decisions as a table: the model's ReAct / intent answer text in, the decision (or the error) out."""

from __future__ import annotations

import pytest

from agent_core.runtime.decisions import DecisionError, ReactDecision, first_json_object, parse_intent, parse_react

REACT_CASES: list[tuple[str, str, ReactDecision]] = [
    (
        "tool call",
        '{"thought":"need data","action":"tool_call","action_input":{"tool_name":"lookup","parameters":{"q":"x"}}}',
        ReactDecision("need data", "tool_call", tool_name="lookup", parameters={"q": "x"}),
    ),
    (
        "tool call without parameters",
        '{"thought":"t","action":"tool_call","action_input":{"tool_name":"now"}}',
        ReactDecision("t", "tool_call", tool_name="now", parameters={}),
    ),
    (
        "camelCase actionInput",
        '{"thought":"t","action":"final_answer","actionInput":"Done."}',
        ReactDecision("t", "final_answer", text="Done."),
    ),
    (
        "final answer in a json fence with prose around it",
        'Here you go:\n```json\n{"thought":"ok","action":"final_answer","action_input":"42"}\n```\nBye.',
        ReactDecision("ok", "final_answer", text="42"),
    ),
    (
        "an object answer is kept as JSON text",
        '{"thought":"","action":"final_answer","action_input":{"城市":"上海"}}',
        ReactDecision("", "final_answer", text='{"城市": "上海"}'),
    ),
    (
        "a list answer is kept as JSON text",
        '{"action":"user_input","action_input":["a","b"]}',
        ReactDecision("", "user_input", text='["a", "b"]'),
    ),
    (
        "missing thought and input",
        '{"action":" user_input "}',
        ReactDecision("", "user_input", text=""),
    ),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in REACT_CASES], ids=[c[0] for c in REACT_CASES])
def test_react_answers(text: str, expected: ReactDecision) -> None:
    assert parse_react(text) == expected


REACT_ERRORS: list[tuple[str, str, str]] = [
    ("no JSON at all", "I will just answer.", "no JSON object"),
    ("unknown action", '{"action":"dance"}', "action must be one of"),
    ("tool call without input", '{"action":"tool_call"}', "tool_call needs action_input"),
    ("tool name not a string", '{"action":"tool_call","action_input":{"tool_name":3}}', "tool_call needs"),
    (
        "parameters not an object",
        '{"action":"tool_call","action_input":{"tool_name":"x","parameters":[1]}}',
        "parameters must be an object",
    ),
]


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in REACT_ERRORS], ids=[c[0] for c in REACT_ERRORS])
def test_react_errors(text: str, message: str) -> None:
    with pytest.raises(DecisionError, match=message):
        parse_react(text)


def test_action_input_of_each_kind() -> None:
    call = ReactDecision("t", "tool_call", tool_name="lookup", parameters=None)
    assert call.action_input == {"tool_name": "lookup", "parameters": {}}
    assert ReactDecision("t", "final_answer", text="hi").action_input == "hi"


INTENT_CASES: list[tuple[str, str, tuple[str, str]]] = [
    ("direct", '{"mode":"direct","reason":"small talk"}', ("direct", "small talk")),
    ("react, upper case, no reason", '{"mode":" REACT "}', ("react", "")),
    ("fenced without a language", '```\n{"mode":"react","reason":"needs tools"}\n```', ("react", "needs tools")),
    ("prose then JSON", 'Sure. {"mode":"direct","reason":null} done', ("direct", "")),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in INTENT_CASES], ids=[c[0] for c in INTENT_CASES])
def test_intent_answers(text: str, expected: tuple[str, str]) -> None:
    assert parse_intent(text) == expected


@pytest.mark.parametrize("text", ['{"mode":"maybe"}', "[1, 2]", ""], ids=["unknown mode", "an array", "empty"])
def test_intent_errors(text: str) -> None:
    with pytest.raises(DecisionError):
        parse_intent(text)


JSON_CASES: list[tuple[str, str, dict[str, object]]] = [
    ("plain", '{"a":1}', {"a": 1}),
    ("trailing prose ignored", '{"a":1} and then {"b":2}', {"a": 1}),
    ("a broken brace before the object", 'x { not json } {"a":1}', {"a": 1}),
    ("an array's inner object", '[{"a":1}]', {"a": 1}),
    ("the fence wins over earlier prose", '{"early":1}\n```json\n{"late":2}\n```', {"late": 2}),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in JSON_CASES], ids=[c[0] for c in JSON_CASES])
def test_first_json_object(text: str, expected: dict[str, object]) -> None:
    assert first_json_object(text) == expected
