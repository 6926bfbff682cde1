"""The OpenAI Chat Completions encoder: native run events -> `chat.completion.chunk` objects (one choice).

The answer's text streams as `delta.content`, the model's reasoning as `delta.reasoning_content` (the
field OpenAI-compatible servers and clients use for it). Server-side tools run inside the request and
are not shown; tools the client declared become `delta.tool_calls` and the run ends with
`finish_reason: "tool_calls"`. The same events fold into the blocking `chat.completion` object.
"""

from __future__ import annotations

from typing import Any

from agent_core.domain.events import (
    ActionStart,
    ContentDelta,
    ContentStart,
    Event,
    ReasoningDelta,
    RunCancel,
    RunComplete,
    RunError,
    ToolArgs,
    ToolEnd,
    ToolStart,
)
from agent_core.runtime.envelope import Envelope
from agent_core.wires.encoder import OpenCall, SseData, Terminal, WireEncoderBase

Wire = dict[str, Any]
DONE = "[DONE]"  # the last message's data, unless an error chunk ended the stream
_FINISH = {"tool_calls": "tool_calls", "deadline": "length"}


def usage_object(native: dict[str, int] | None) -> Wire:
    """The native usage ({promptTokens, completionTokens}) in the Chat Completions shape."""
    prompt = (native or {}).get("promptTokens", 0)
    completion = (native or {}).get("completionTokens", 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class ChatCompletionsEncoder(WireEncoderBase[Wire | str]):
    """Stateful translation for one completion; `completion()` is the blocking answer so far."""

    def __init__(
        self, completion_id: str, *, created: int, model: str, client_tools: frozenset[str], include_usage: bool
    ) -> None:
        super().__init__()
        self.id, self.created, self.model = completion_id, created, model
        self.client_tools = client_tools
        self.include_usage = include_usage
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.tool_calls: list[Wire] = []
        self._calls: dict[str, int] = {}  # native tool id -> index in tool_calls
        self.finish_reason: str | None = None
        self.usage: Wire | None = None
        self.error: RunError | None = None

    def _chunk(self, delta: Wire, finish_reason: str | None = None) -> Wire:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        chunk: Wire = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        }
        if self.include_usage:
            chunk["usage"] = None
        return chunk

    def opening(self) -> list[Wire | str]:
        """The first chunk: the assistant's role, before any model output."""
        return [self._chunk({"role": "assistant", "content": ""})]

    def frames(self, event: Event, envelope: Envelope | Event) -> list[Wire | str]:
        """The chunks for one native event (none for events without a Chat Completions meaning)."""
        match event:
            case ContentDelta(delta=delta) if delta:
                self.content.append(delta)
                return [self._chunk({"content": delta})]
            case ContentStart():
                if self.content:  # a later model step's text: a paragraph break from the earlier one
                    self.content.append("\n\n")
                    return [self._chunk({"content": "\n\n"})]
            case ReasoningDelta(delta=delta) if delta:
                self.reasoning.append(delta)
                return [self._chunk({"reasoning_content": delta})]
            case ToolStart(tool_id=native, tool_name=name) if name in self.client_tools:
                index = len(self.tool_calls)
                self._calls[native] = index
                self.tool_calls.append({"id": native, "type": "function", "function": {"name": name, "arguments": ""}})
                call = {"index": index, "id": native, "type": "function", "function": {"name": name, "arguments": ""}}
                return [self._chunk({"tool_calls": [call]})]
            case ToolStart(tool_id=native) | ActionStart(action_id=native):  # run by the server: not shown
                self.calls.done(native)
            case ToolArgs(tool_id=native, delta=delta) if native in self._calls and delta:
                index = self._calls[native]
                self.tool_calls[index]["function"]["arguments"] += delta
                return [self._chunk({"tool_calls": [{"index": index, "function": {"arguments": delta}}]})]
            case ToolEnd(tool_id=native):
                self.calls.done(native)  # the client answers it: the finish chunk says `tool_calls`
        return []

    def close_call(self, call: OpenCall, terminal: Terminal) -> list[Wire | str]:
        """A client call cut off mid-arguments has no chunk of its own to close it: the chunk that ends the
        stream (the finish or the error) does; no later delta reaches it."""
        self._calls.pop(call.native_id, None)
        return []

    def terminal(self, terminal: Terminal, closing: list[Wire | str], envelope: Envelope | Event) -> list[Wire | str]:
        match terminal:
            case RunComplete(finish_reason=finish_reason, usage=usage):
                return [*closing, *self._finish(_FINISH.get(finish_reason, "stop"), usage)]
            case RunCancel():
                return [*closing, *self._finish("stop", None)]
        self.error = terminal
        error = {"code": terminal.code, "message": terminal.message, "type": "server_error", "param": None}
        return [*closing, {"error": error}]

    def trailer(self) -> list[Wire | str]:
        """`[DONE]`, unless an error chunk ended the stream (it is the stream's last message)."""
        return [] if self.error is not None else [DONE]

    def sse(self, frame: Any) -> SseData:
        return frame, None

    def _finish(self, finish_reason: str, usage: dict[str, int] | None) -> list[Wire | str]:
        self.finish_reason = finish_reason
        self.usage = usage_object(usage)
        chunks: list[Wire | str] = [self._chunk({}, finish_reason)]
        if self.include_usage:
            chunks.append({**self._chunk({}), "choices": [], "usage": self.usage})
        return chunks

    def completion(self) -> Wire:
        """The `chat.completion` object the events so far make."""
        message: Wire = {"role": "assistant", "content": "".join(self.content) or None, "refusal": None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": self.finish_reason or "stop"}
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self.usage or usage_object(None),
        }
