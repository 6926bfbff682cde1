"""The OpenAI Responses encoder: native run events -> Responses stream events (one Response per run).

Every event gets the next `sequence_number`; output items are numbered in order of appearance across
the run's model steps. Server-side tools (built-in, MCP, actions) become `mcp_call` items; tools the
client declared become `function_call` items. The aggregator folds the same events into the Response.

A call of a tool an approval policy may gate (`gated`) is held from its start until the event after its end
says what it is: its `tool.approval` makes it an `mcp_approval_request` only (no `mcp_call` until it is
approved, as OpenAI's remote MCP answers); any other event shows it as the `mcp_call` it is, then that event.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_core.domain.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    ContentDelta,
    ContentEnd,
    ContentStart,
    Event,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    RunCancel,
    RunComplete,
    RunError,
    ToolApproval,
    ToolArgs,
    ToolEnd,
    ToolResult,
    ToolStart,
)
from agent_core.runtime.envelope import Envelope
from agent_core.wires.approval_answers import approval_request_id
from agent_core.wires.encoder import OpenCall, SseData, Terminal, WireEncoderBase
from agent_core.wires.responses.aggregate import ResponseAggregator, usage_object
from agent_core.wires.responses.items import mcp_names

Wire = dict[str, Any]


@dataclass
class _Item:
    index: int
    kind: str  # message / reasoning / function_call / mcp_call
    id: str


@dataclass
class _Held:
    """A gated call not shown yet: it may turn out to await approval."""

    name: str
    arguments: list[str] = field(default_factory=list)
    ended: bool = False


class ResponsesEncoder(WireEncoderBase[Wire]):
    """Stateful translation for one response; `aggregator.snapshot()` is the Response so far."""

    def __init__(
        self,
        response: Wire,
        *,
        client_tools: frozenset[str] = frozenset(),
        server_label: str = "agent",
        gated: frozenset[str] = frozenset(),
        approved: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.aggregator = ResponseAggregator(response)
        self.client_tools = client_tools
        self.server_label = server_label
        self.gated = gated  # tools whose calls may be handed over for approval: held until that is known
        self.approved = dict(approved or {})  # calls this response runs as decided -> their approval request id
        self._held: dict[str, _Held] = {}
        self._token = str(response["id"]).removeprefix("resp_")
        self._seq = 0
        self._open: dict[str, _Item] = {}  # native id (contentId, toolId, ...) -> its output item
        self._next = 0

    # ----- stamping -----

    def _event(self, kind: str, **fields: Any) -> Wire:
        event: Wire = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        self.aggregator.apply(event)
        return event

    def _lifecycle(self, kind: str, **changes: Any) -> Wire:
        response = {**self.aggregator.snapshot(), **changes}
        return self._event(kind, response=response)

    # ----- public -----

    def created(self) -> list[Wire]:
        """`response.created` with the Response as it is (queued or in_progress)."""
        return [self._lifecycle("response.created")]

    def in_progress(self) -> list[Wire]:
        return [self._lifecycle("response.in_progress", status="in_progress")]

    def frames(self, event: Event, envelope: Envelope | Event) -> list[Wire]:
        """The Responses events for one native event (none for events without a Responses meaning); held
        calls this event shows not to await approval come first."""
        return self._settle_held(event) + self._frames(event, envelope)

    def _frames(self, event: Event, envelope: Envelope | Event) -> list[Wire]:
        match event:
            case ContentDelta(content_id=native, delta=delta) | ReasoningDelta(reasoning_id=native, delta=delta):
                return self._text_delta(native, delta)
            case ToolArgs(tool_id=native, delta=delta) | ActionArgs(action_id=native, delta=delta):
                return self._args_delta(native, delta)
            case ContentStart(content_id=native):
                return self._open_text(native, "message")
            case ReasoningStart(reasoning_id=native):
                return self._open_text(native, "reasoning")
            case ContentEnd(content_id=native) | ReasoningEnd(reasoning_id=native):
                return self._close_text(native, "completed")
            case ToolStart(tool_id=native, tool_name=name):
                return self._start_call(native, name)
            case ActionStart(action_id=native, action_name=name):
                return self._open_call(native, name)
            case ToolEnd(tool_id=native) | ActionEnd(action_id=native):
                return self._args_done(native)
            case ToolResult(tool_id=native, result=result, status=status, reason=reason):
                return self._result(native, result, status, reason)
            case ActionResult(action_id=native, result=result):
                return self._result(native, result, "ok", None)
            case ToolApproval(tool_id=native, tool_name=name, args=args):
                run_id = envelope.run_id if isinstance(envelope, Envelope) else ""
                return self._approval(native, name, args, run_id)
        return []

    def fail(self, code: str, message: str) -> list[Wire]:
        """The run failed: an `error` event, open items closed, then `response.failed`."""
        return self.close(RunError(code=code, message=message))

    def cancel(self) -> list[Wire]:
        """Cancelled (by request or a client gone): what streamed so far stays, marked incomplete."""
        return self.close(RunCancel())

    def ending(self, terminal: Terminal) -> list[Wire]:
        """Calls still held are shown (then closed as incomplete with the other open items)."""
        events = [frame for native_id in list(self._held) for frame in self._show(native_id)]
        if isinstance(terminal, RunError):
            events.append(self._event("error", code=terminal.code, message=terminal.message, param=None))
        return events

    def close_open(self, calls: list[OpenCall], terminal: Terminal) -> list[Wire]:
        """Items still open when the run ends are closed as incomplete, in output order (calls and text)."""
        by_id = {call.native_id: call for call in calls}
        events: list[Wire] = []
        for native_id, _ in sorted(self._open.items(), key=lambda entry: entry[1].index):
            call = by_id.get(native_id)
            events += self._close_text(native_id, "incomplete") if call is None else self.close_call(call, terminal)
        return events

    def close_call(self, call: OpenCall, terminal: Terminal) -> list[Wire]:
        opened = self._open.get(call.native_id)
        if opened is None:
            return []
        if opened.kind == "function_call":
            return self._args_done(call.native_id, "incomplete")
        item = {**self.aggregator.item(opened.index), "status": "incomplete"}
        return [self._done(call.native_id, item)]

    def terminal(self, terminal: Terminal, closing: list[Wire], envelope: Envelope | Event) -> list[Wire]:
        # When the run's terminal event ended it, it says when (a stream re-encoded from the run's log is the same)
        at = envelope.timestamp // 1000 if isinstance(envelope, Envelope) else _now()
        match terminal:
            case RunComplete(finish_reason=finish_reason, usage=usage):
                return [*closing, self._complete(finish_reason, usage, at)]
            case RunError(code=code, message=message):
                error = failure_error(code, message)
                return [*closing, self._lifecycle("response.failed", status="failed", error=error, completed_at=at)]
        return [*closing, self._lifecycle("response.incomplete", status="cancelled", completed_at=at)]

    def sse(self, frame: Any) -> SseData:
        return sse(frame)

    def frame_id(self, frame: Any, seq: int, index: int) -> str:
        return sse_id(frame) or f"{seq}.{index}"

    # ----- items -----

    def _add(self, native_id: str, kind: str, prefix: str, item: Wire) -> tuple[_Item, Wire]:
        index = self._next
        self._next += 1
        opened = _Item(index, kind, f"{prefix}_{self._token}_{index}")
        self._open[native_id] = opened
        event = self._event("response.output_item.added", output_index=index, item={"id": opened.id, **item})
        return opened, event

    def _done(self, native_id: str, item: Wire) -> Wire:
        opened = self._open.pop(native_id)
        self.calls.done(native_id)
        return self._event("response.output_item.done", output_index=opened.index, item=item)

    def _part(self, kind: str, text: str) -> Wire:
        if kind == "message":
            return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        return {"type": "reasoning_text", "text": text}

    def _open_text(self, native_id: str, kind: str) -> list[Wire]:
        if kind == "message":
            item: Wire = {"type": "message", "status": "in_progress", "role": "assistant", "content": []}
            opened, added = self._add(native_id, kind, "msg", item)
        else:
            item = {"type": "reasoning", "status": "in_progress", "summary": [], "content": []}
            opened, added = self._add(native_id, kind, "rs", item)
        part = self._event(
            "response.content_part.added",
            item_id=opened.id,
            output_index=opened.index,
            content_index=0,
            part=self._part(kind, ""),
        )
        return [added, part]

    def _text_delta(self, native_id: str, delta: str) -> list[Wire]:
        opened = self._open.get(native_id)
        if opened is None:
            return []
        kind = "response.output_text.delta" if opened.kind == "message" else "response.reasoning_text.delta"
        extra: Wire = {"logprobs": []} if opened.kind == "message" else {}
        where = {"item_id": opened.id, "output_index": opened.index, "content_index": 0}
        return [self._event(kind, **where, delta=delta, **extra)]

    def _close_text(self, native_id: str, status: str) -> list[Wire]:
        opened = self._open.get(native_id)
        if opened is None:
            return []
        text = self.aggregator.text(opened.index)
        where = {"item_id": opened.id, "output_index": opened.index, "content_index": 0}
        part = self._part(opened.kind, text)
        if opened.kind == "message":
            done = self._event("response.output_text.done", **where, text=text, logprobs=[])
        else:
            done = self._event("response.reasoning_text.done", **where, text=text)
        part_done = self._event("response.content_part.done", **where, part=part)
        item = {**self.aggregator.item(opened.index), "status": status, "content": [part]}
        return [done, part_done, self._done(native_id, item)]

    # ----- calls held while they may await approval -----

    def _holds(self, native_id: str, name: str) -> bool:
        return name in self.gated and name not in self.client_tools and native_id not in self.approved

    def _held_part(self, event: Event) -> None:
        """A held call's arguments and end are kept (its approval, or any other event after its end, decides it)."""
        match event:
            case ToolArgs(tool_id=native, delta=delta) if native in self._held:
                self._held[native].arguments.append(delta)
            case ToolEnd(tool_id=native) if native in self._held:
                self._held[native].ended = True

    def _settle_held(self, event: Event) -> list[Wire]:
        """Held calls whose end this event follows, and which it does not ask approval for, shown now (a call
        that asks has its `tool.approval` right after its end); then the event's own part of a held call kept."""
        if not self._held:
            return []
        asked = event.tool_id if isinstance(event, ToolApproval) else None
        ended = [native_id for native_id, held in self._held.items() if held.ended and native_id != asked]
        frames = [frame for native_id in ended for frame in self._show(native_id)]
        self._held_part(event)
        return frames

    def _show(self, native_id: str) -> list[Wire]:
        """A held call as the mcp_call it is: added, its arguments in one delta, done when they ended."""
        held = self._held.pop(native_id)
        events = self._open_call(native_id, held.name)
        events += self._args_delta(native_id, "".join(held.arguments))
        return events + (self._args_done(native_id) if held.ended else [])

    # ----- calls -----

    def _start_call(self, native_id: str, name: str) -> list[Wire]:
        if self._holds(native_id, name):
            self._held[native_id] = _Held(name)
            return []
        return self._open_call(native_id, name)

    def _open_call(self, native_id: str, name: str) -> list[Wire]:
        if name in self.client_tools:
            item: Wire = {"type": "function_call", "status": "in_progress", "call_id": native_id}
            _, added = self._add(native_id, "function_call", "fc", {**item, "name": name, "arguments": ""})
            return [added]
        label, tool = mcp_names(name, self.server_label)
        item = {"type": "mcp_call", "status": "in_progress", "server_label": label, "name": tool, "arguments": ""}
        if native_id in self.approved:
            item["approval_request_id"] = self.approved[native_id]
        opened, added = self._add(native_id, "mcp_call", "mcp", item)
        where = {"item_id": opened.id, "output_index": opened.index}
        return [added, self._event("response.mcp_call.in_progress", **where)]

    def _args_delta(self, native_id: str, delta: str) -> list[Wire]:
        opened = self._open.get(native_id)
        if opened is None or not delta:
            return []
        kind = "function_call_arguments" if opened.kind == "function_call" else "mcp_call_arguments"
        return [self._event(f"response.{kind}.delta", item_id=opened.id, output_index=opened.index, delta=delta)]

    def _args_done(self, native_id: str, status: str = "completed") -> list[Wire]:
        opened = self._open.get(native_id)
        if opened is None:
            return []
        arguments = self.aggregator.arguments(opened.index)
        where = {"item_id": opened.id, "output_index": opened.index}
        if opened.kind == "mcp_call":  # open until its result
            return [self._event("response.mcp_call_arguments.done", **where, arguments=arguments)]
        done = self._event("response.function_call_arguments.done", **where, arguments=arguments)
        item = {**self.aggregator.item(opened.index), "arguments": arguments, "status": status}
        return [done, self._done(native_id, item)]

    def _result(self, native_id: str, result: Any, status: str, reason: str | None) -> list[Wire]:
        opened = self._open.get(native_id)
        if opened is None or opened.kind != "mcp_call":
            return []
        ok = status == "ok"
        output = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        where = {"item_id": opened.id, "output_index": opened.index}
        events = [self._event("response.mcp_call.completed" if ok else "response.mcp_call.failed", **where)]
        item = {**self.aggregator.item(opened.index), "output": output, "status": "completed" if ok else "failed"}
        item["error"] = None if ok else _failure(status, reason, result)
        events.append(self._done(native_id, item))
        return events

    def _approval(self, native_id: str, name: str, args: object, run_id: str) -> list[Wire]:
        """The call waits for a person: an mcp_approval_request (a held call was never shown; one shown as
        an mcp_call, its tool not known as gated, ends not run: incomplete).

        The request's id names the run and the call (`approval_request_id`); the caller answers it with an
        `mcp_approval_response` in its next request (`previous_response_id` or the conversation)."""
        events: list[Wire] = []
        if self._held.pop(native_id, None) is not None:
            self.calls.done(native_id)
        opened = self._open.get(native_id)
        if opened is not None and opened.kind == "mcp_call":
            events.append(self._done(native_id, {**self.aggregator.item(opened.index), "status": "incomplete"}))
        label, tool = mcp_names(name, self.server_label)
        request_id = approval_request_id(run_id, native_id)
        item: Wire = {"type": "mcp_approval_request", "id": request_id, "server_label": label, "name": tool}
        item["arguments"] = json.dumps(args, ensure_ascii=False)
        key = f"approval:{native_id}"
        added_item, added = self._add(key, "mcp_approval_request", "mcpr", item)
        return [*events, added, self._done(key, {**self.aggregator.item(added_item.index), **item})]

    def _complete(self, finish_reason: str, usage: dict[str, int] | None, at: int) -> Wire:
        done = {"usage": usage_object(usage), "completed_at": at}
        if finish_reason == "deadline":  # the turn's time budget ran out: what streamed so far is the answer
            # The API's reasons are a closed set: a cut-short answer is `max_output_tokens` (Chat Completions'
            # `length`), the one an SDK client already handles
            incomplete = {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}
            return self._lifecycle("response.incomplete", **incomplete, **done)
        return self._lifecycle("response.completed", status="completed", **done)


def sse(event: Wire) -> SseData:
    """A Responses event as `event: <type>` and `data: <json>`."""
    return event, str(event["type"])


def sse_id(event: Wire) -> str | None:
    """A Responses event's SSE `id:` is its `sequence_number` (`starting_after` / `Last-Event-ID` resume after it)."""
    number = event.get("sequence_number")
    return None if number is None else str(number)


def failure_error(code: str, message: str) -> Wire:
    """A failed Response's `error`: the run's `run.error` code and message."""
    return {"code": "server_error", "message": f"[{code}] {message}"}


def _failure(status: str, reason: str | None, result: Any) -> Wire:
    """A governed non-ok tool result as an mcp_call error (status and reason as the audit records them)."""
    content = {"status": status, "reason": reason or status, "result": result}
    return {"type": "mcp_tool_execution_error", "content": content}


def _now() -> int:
    return int(time.time())


def replay_events(response: Wire) -> list[Wire]:
    """A stored Response as a short stream: created, each item added and done, then its terminal event."""
    status = str(response.get("status"))
    base = {**response, "output": []}
    events: list[Wire] = [{"type": "response.created", "response": {**base, "status": "in_progress"}}]
    for index, item in enumerate(response.get("output") or []):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    terminal = {"completed": "response.completed", "failed": "response.failed"}.get(status, "response.incomplete")
    if status not in ("queued", "in_progress"):
        events.append({"type": terminal, "response": response})
    for seq, event in enumerate(events):
        event["sequence_number"] = seq
    return events
