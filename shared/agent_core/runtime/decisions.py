"""Parsing the JSON a model returns for ReAct decisions and intent analysis (fences and prose tolerated)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agent_core.llm.json_answer import NoJsonObject
from agent_core.llm.json_answer import first_json_object as _first

REACT_ACTIONS = ("tool_call", "user_input", "final_answer")


class DecisionError(ValueError):
    """The model's output is not the JSON object asked for."""


def first_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in the answer, or DecisionError."""
    try:
        return _first(text)
    except NoJsonObject as error:
        raise DecisionError(str(error)) from error


@dataclass
class ReactDecision:
    thought: str
    action: str
    tool_name: str = ""
    parameters: dict[str, Any] | None = None
    text: str = ""

    @property
    def action_input(self) -> Any:
        if self.action == "tool_call":
            return {"tool_name": self.tool_name, "parameters": self.parameters or {}}
        return self.text


def parse_react(text: str) -> ReactDecision:
    """`{thought, action: tool_call|user_input|final_answer, action_input}`.

    For tool_call, action_input is `{tool_name, parameters}`; otherwise it is the text.
    """
    raw = first_json_object(text)
    action = str(raw.get("action", "")).strip()
    if action not in REACT_ACTIONS:
        raise DecisionError(f"action must be one of {', '.join(REACT_ACTIONS)}, got {action!r}")
    thought = str(raw.get("thought", "") or "")
    value = raw.get("action_input", raw.get("actionInput"))
    if action == "tool_call":
        if not isinstance(value, dict) or not isinstance(value.get("tool_name"), str):
            raise DecisionError("tool_call needs action_input {tool_name, parameters}")
        parameters = value.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise DecisionError("action_input.parameters must be an object")
        return ReactDecision(thought, action, tool_name=value["tool_name"], parameters=parameters)
    if isinstance(value, dict | list):
        value = json.dumps(value, ensure_ascii=False)
    return ReactDecision(thought, action, text=str(value or ""))


def parse_intent(text: str) -> tuple[str, str]:
    """`{mode: direct|react, reason}`."""
    raw = first_json_object(text)
    mode = str(raw.get("mode", "")).strip().lower()
    if mode not in ("direct", "react"):
        raise DecisionError(f"mode must be direct or react, got {mode!r}")
    return mode, str(raw.get("reason", "") or "")
