"""The Responses aggregator: folds a Responses event stream into its Response object (blocking and storage)."""

from __future__ import annotations

from typing import Any

from agent_core.wires.responses.request import ResponseCreate, ToolChoiceFunction

TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete"})
LIFECYCLE = frozenset({"response.created", "response.queued", "response.in_progress", *TERMINAL})
_TEXT_DELTAS = frozenset({"response.output_text.delta", "response.reasoning_text.delta"})
_TEXT_DONES = frozenset({"response.output_text.done", "response.reasoning_text.done"})
_ARG_DELTAS = frozenset({"response.function_call_arguments.delta", "response.mcp_call_arguments.delta"})
_ARG_DONES = frozenset({"response.function_call_arguments.done", "response.mcp_call_arguments.done"})


def response_object(
    body: ResponseCreate,
    *,
    response_id: str,
    created_at: int,
    model: str,
    status: str,
    conversation_id: str | None,
) -> dict[str, Any]:
    """A Response with no output yet, echoing the request's parameters."""
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": bool(body.background),
        "error": None,
        "incomplete_details": None,
        "instructions": body.instructions,
        "max_output_tokens": body.max_output_tokens,
        "metadata": body.metadata or {},
        "model": model,
        "output": [],
        "parallel_tool_calls": body.parallel_tool_calls is not False,
        "previous_response_id": body.previous_response_id,
        "conversation": {"id": conversation_id} if conversation_id else None,
        "store": body.stored,
        "temperature": body.temperature,
        "text": {"format": {"type": "text"}},
        "tool_choice": _tool_choice(body),
        "tools": [t.echo() for t in body.tools],
        "top_p": None,
        "truncation": "disabled",
        "usage": None,
        "user": body.user,
    }


def _tool_choice(body: ResponseCreate) -> Any:
    choice = body.tool_choice
    return choice.model_dump() if isinstance(choice, ToolChoiceFunction) else (choice or "auto")


def usage_object(native: dict[str, int] | None) -> dict[str, Any] | None:
    """The native run.complete usage ({promptTokens, completionTokens}) in the Responses shape."""
    if native is None:
        return None
    prompt, completion = native.get("promptTokens", 0), native.get("completionTokens", 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


class ResponseAggregator:
    """Applies Responses events in order; `snapshot()` is the Response as far as the events went."""

    def __init__(self, response: dict[str, Any]) -> None:
        self._base = {k: v for k, v in response.items() if k != "output"}
        self._items: dict[int, dict[str, Any]] = {}
        self._text: dict[tuple[int, int], list[str]] = {}
        self._args: dict[int, list[str]] = {}
        self.terminal: str | None = None

    @property
    def status(self) -> str:
        return str(self._base.get("status"))

    def apply(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind in _TEXT_DELTAS:
            self._text[(event["output_index"], event["content_index"])].append(event["delta"])
        elif kind in _ARG_DELTAS:
            self._args.setdefault(event["output_index"], []).append(event["delta"])
        elif kind == "response.output_item.added":
            item = dict(event["item"])
            if isinstance(item.get("content"), list):
                item["content"] = list(item["content"])
            self._items[event["output_index"]] = item
        elif kind == "response.content_part.added":
            index, part = event["output_index"], event["part"]
            self._items[index]["content"].append(dict(part))
            self._text[(index, event["content_index"])] = [part.get("text", "")]
        elif kind in _TEXT_DONES:
            self._text[(event["output_index"], event["content_index"])] = [event["text"]]
        elif kind in _ARG_DONES:
            self._args[event["output_index"]] = [event["arguments"]]
        elif kind == "response.output_item.done":
            index = event["output_index"]
            self._items[index] = event["item"]
            self._args.pop(index, None)
            for key in [k for k in self._text if k[0] == index]:
                del self._text[key]
        elif kind in LIFECYCLE:
            self._base.update({k: v for k, v in event["response"].items() if k != "output"})
            if kind in TERMINAL:
                self.terminal = kind

    def update(self, **fields: Any) -> None:
        """Set Response fields learnt after the start (the conversation a new chat became)."""
        self._base.update(fields)

    def text(self, index: int, content_index: int = 0) -> str:
        return "".join(self._text.get((index, content_index), ()))

    def arguments(self, index: int) -> str:
        return "".join(self._args.get(index, ()))

    def item(self, index: int) -> dict[str, Any]:
        """One output item with the text and arguments streamed into it so far."""
        item = dict(self._items[index])
        if isinstance(item.get("content"), list) and any(k[0] == index for k in self._text):
            item["content"] = [
                {**part, "text": self.text(index, n)} if (index, n) in self._text else part
                for n, part in enumerate(item["content"])
            ]
        if index in self._args:
            item["arguments"] = self.arguments(index)
        return item

    def snapshot(self) -> dict[str, Any]:
        return {**self._base, "output": [self.item(i) for i in sorted(self._items)]}
