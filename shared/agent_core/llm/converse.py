"""The Bedrock Converse mapping: the port's OpenAI-format request to Converse, stream events to LlmDeltas."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agent_core.domain.models import Usage
from agent_core.llm.base import LlmDelta, LlmRequest, ToolCallFragment

# Converse stop reasons in the port's (Chat Completions) finish reasons.
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}
CACHE_POINT: dict[str, Any] = {"cachePoint": {"type": "default"}}


def converse_request(request: LlmRequest, model: str) -> dict[str, Any]:
    """The keyword arguments of `converse_stream` / `converse` for one port request.

    System messages (the agent's prompt, extra system blocks, the rolling summary) become `system`, followed
    by a cache point so the stable prefix is cached where the model supports it. Tool results become user
    `toolResult` blocks; consecutive messages of one role are merged (Converse requires alternation). A call
    that declares no tools cannot carry tool blocks (Converse refuses them without `toolConfig`): earlier
    tool calls and results are then written as text.
    """
    declares_tools = bool(request.tools) and request.tool_choice != "none"
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for message in request.messages:
        role = message.get("role")
        if role == "system":
            if text := _text(message.get("content")):
                system.append({"text": text})
            continue
        out_role, blocks = _blocks(message)
        if not declares_tools:
            blocks = [_as_text(block, names) for block in blocks]
        if not blocks:
            continue
        if messages and messages[-1]["role"] == out_role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": out_role, "content": blocks})
    if messages and messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": [{"text": "(conversation continues)"}]})
    kwargs: dict[str, Any] = {"modelId": model, "messages": messages}
    if system:
        kwargs["system"] = [*system, CACHE_POINT]
    inference: dict[str, Any] = {}
    if request.max_tokens is not None:
        inference["maxTokens"] = request.max_tokens
    if request.temperature is not None:
        inference["temperature"] = request.temperature
    if inference:
        kwargs["inferenceConfig"] = inference
    if declares_tools:
        config: dict[str, Any] = {"tools": [tool_spec(tool) for tool in request.tools]}
        if (choice := _tool_choice(request.tool_choice)) is not None:
            config["toolChoice"] = choice
        kwargs["toolConfig"] = config
    return kwargs


def tool_spec(tool: dict[str, Any]) -> dict[str, Any]:
    """One Chat Completions function tool as a Converse `toolSpec` (its JSON schema as `inputSchema.json`)."""
    fn = tool.get("function", tool)
    spec: dict[str, Any] = {
        "name": fn["name"],
        "inputSchema": {"json": fn.get("parameters") or {"type": "object", "properties": {}}},
    }
    if fn.get("description"):
        spec["description"] = fn["description"]
    return {"toolSpec": spec}


def _tool_choice(choice: str | dict[str, Any] | None) -> dict[str, Any] | None:
    if choice == "auto":
        return {"auto": {}}
    if choice == "required":
        return {"any": {}}
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") or choice.get("name")
        if name:
            return {"tool": {"name": name}}
    return None


def _text(content: Any) -> str:
    """Message content as plain text (a string, or a list of text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def _blocks(message: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """A non-system chat message as a Converse role and content blocks."""
    role = message.get("role")
    if role == "tool":
        result = {
            "toolUseId": message.get("tool_call_id") or "",
            "content": [{"text": _text(message.get("content")) or "(empty)"}],
        }
        return "user", [{"toolResult": result}]
    blocks: list[dict[str, Any]] = []
    if text := _text(message.get("content")):
        blocks.append({"text": text})
    if role == "assistant":
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            blocks.append({"toolUse": {"toolUseId": call["id"], "name": fn.get("name", ""), "input": _args(fn)}})
        return "assistant", blocks
    return "user", blocks


def _as_text(block: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """A toolUse / toolResult block as a text block (for calls that declare no tools); others unchanged."""
    if (use := block.get("toolUse")) is not None:
        names[use["toolUseId"]] = use["name"]
        return {"text": f"[called tool {use['name']} with {json.dumps(use['input'], ensure_ascii=False)}]"}
    if (result := block.get("toolResult")) is not None:
        name = names.get(result["toolUseId"], "a tool")
        text = "".join(part.get("text", "") for part in result["content"])
        return {"text": f"[result of {name}: {text}]"}
    return block


def _args(fn: dict[str, Any]) -> Any:
    """Tool-call arguments (a JSON string in chat format) as the JSON document Converse wants."""
    raw = fn.get("arguments") or "{}"
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"value": value}


@dataclass
class StreamMapper:
    """Turns ConverseStream events into LlmDeltas; tool-use blocks get indexes 0, 1, ... in stream order."""

    _tool_index: dict[int, int] = field(default_factory=dict)

    def delta(self, event: dict[str, Any]) -> LlmDelta | None:
        """The LlmDelta for one stream event, or None when it carries nothing for the port."""
        if (start := event.get("contentBlockStart")) is not None:
            tool = (start.get("start") or {}).get("toolUse")
            if not tool:
                return None
            index = self._tool_index.setdefault(start.get("contentBlockIndex", 0), len(self._tool_index))
            return LlmDelta(tool_calls=[ToolCallFragment(index=index, id=tool["toolUseId"], name=tool["name"])])
        if (block := event.get("contentBlockDelta")) is not None:
            return self._block_delta(block)
        if (stop := event.get("messageStop")) is not None:
            reason = stop.get("stopReason") or "end_turn"
            return LlmDelta(finish_reason=FINISH_REASONS.get(reason, reason))
        if (metadata := event.get("metadata")) is not None and (usage := metadata.get("usage")):
            return LlmDelta(usage=usage_of(usage))
        return None

    def _block_delta(self, block: dict[str, Any]) -> LlmDelta | None:
        delta = block.get("delta") or {}
        if text := delta.get("text"):
            return LlmDelta(content=text)
        if (tool := delta.get("toolUse")) is not None:
            index = self._tool_index.setdefault(block.get("contentBlockIndex", 0), len(self._tool_index))
            arguments = tool.get("input") or ""
            return LlmDelta(tool_calls=[ToolCallFragment(index=index, arguments=arguments)]) if arguments else None
        if (reasoning := delta.get("reasoningContent")) is not None and (text := reasoning.get("text")):
            return LlmDelta(reasoning=text)
        return None


def usage_of(usage: dict[str, Any]) -> Usage:
    """Converse token usage (cache reads and writes included) as the port's Usage."""
    return Usage(
        prompt_tokens=int(usage.get("inputTokens") or 0),
        completion_tokens=int(usage.get("outputTokens") or 0),
        cache_read_tokens=int(usage.get("cacheReadInputTokens") or 0),
        cache_write_tokens=int(usage.get("cacheWriteInputTokens") or 0),
    )
