"""Property: a stream cut anywhere and resumed is the uncut stream, byte for byte, on the native and Responses wires.

300 seeded runs, each with reasoning, text, a backend tool (time) and a frontend tool (ask_user) the test
answers through POST /api/ap/submit whenever the run waits for it (native; the Responses wire refuses server
frontend tools, so its runs see the call denied and go on). Each run's stream is cut at a random
event (the connection dropped: the app's next send fails), then resumed: on the same app or on a second app
instance sharing the table, sometimes cut and resumed again, sometimes only after the run has ended. What was
received joined to what the resumes returned must be exactly what the server's stream produced for the run
(every frame the live stream made, tapped in the app whether or not it reached the client): nothing lost,
nothing repeated, same bytes. Runs go in concurrent batches, in process (no sockets).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent_core.api import routes
from agent_core.api import sse as sse_module
from agent_core.api.app import build_app
from agent_core.api.routes import responses as responses_routes
from agent_core.api.sse import join_detached, sse_message
from agent_core.context import AppContext, build_context
from agent_core.domain.models import Usage
from agent_core.llm.base import LlmDelta, LlmRequest, ToolCallFragment
from agent_core.store.memory_table import MemoryTable
from agent_core.wires.responses import encoder as responses_encoder
from tests.support.asgi_stream import AsgiStream, open_stream
from tests.support.fixtures import make_settings
from tests.support.wait import apoll_until

SEED = 2611
RUNS = int(os.environ.get("RESUME_PROPERTY_RUNS", "300"))
BATCH = 30
USER = {"X-User-Id": "alice"}


def _pieces(rng: random.Random, text: str) -> list[str]:
    """`text` in 1..4 pieces at random cuts."""
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 3))))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


class PlayLlm:
    """A deterministic model per case (its number is in the user's message): reasoning, text and two tool
    calls (time, then ask_user) on the first step; an answer after the tools' results."""

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]:
        users = [m for m in request.messages if m.get("role") == "user"]
        found = re.search(r"case (\d+)", str(users[-1].get("content", ""))) if users else None
        case = int(found.group(1)) if found else 0
        rng = random.Random(SEED * 7919 + case)
        if request.purpose != "chat":
            yield LlmDelta(content="ok")
            yield LlmDelta(finish_reason="stop")
            return
        if not any(m.get("role") == "tool" for m in request.messages):
            for piece in _pieces(rng, f"thinking about case {case} " * rng.randint(1, 3)):
                yield LlmDelta(reasoning=piece)
            for piece in _pieces(rng, f"Let me check for case {case}."):
                yield LlmDelta(content=piece)
            calls = [
                (f"call_t{case}", "time", {"timezone": "Asia/Tokyo"}),
                (f"call_a{case}", "ask_user", {"question": f"pick for {case}", "choices": ["red", "blue"]}),
            ]
            for index, (call_id, name, args) in enumerate(calls):
                parts = _pieces(rng, json.dumps(args))
                yield LlmDelta(tool_calls=[ToolCallFragment(index=index, id=call_id, name=name, arguments=parts[0])])
                for part in parts[1:]:
                    yield LlmDelta(tool_calls=[ToolCallFragment(index=index, arguments=part)])
            yield LlmDelta(finish_reason="tool_calls")
        else:
            for word in range(rng.randint(2, 12)):
                yield LlmDelta(content=f"answer{word} ")
            yield LlmDelta(finish_reason="stop")
        yield LlmDelta(usage=Usage(prompt_tokens=10 + case, completion_tokens=5))


# ----- the tap: every frame each live stream produced, as the bytes its messages are -----

Taps = dict[str, list[str]]  # a run's or response's id -> its live stream's messages


def _tap(taps: Taps, original: Any) -> Any:
    def stream_frames(ctx: Any, frames: Any, sse: Any, *, ids: Any = None, **kwargs: Any) -> Any:
        tapped: list[str] = []

        async def tapping() -> AsyncIterator[Any]:
            number = 0
            async for frame in frames:
                number += 1
                data, event = sse(frame)
                tapped.append(sse_message(data, event, ids(frame) if ids else str(number)).encode().decode())
                key = _key(frame)
                if key:
                    taps.setdefault(key, tapped)
                yield frame

        return original(ctx, tapping(), sse, ids=ids, **kwargs)

    return stream_frames


def _key(frame: Any) -> str | None:
    frame = getattr(frame, "frame", frame)
    if isinstance(frame, dict):
        if frame.get("runId"):
            return str(frame["runId"])
        response = frame.get("response")
        if isinstance(response, dict):
            return str(response["id"])
    return None


def _text(message: str) -> str:
    return message + "\n\n"


# ----- one case -----


@dataclass
class Apps:
    first: Any
    second: Any
    contexts: list[AppContext]
    taps: Taps = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)  # how often each kind of case happened

    def count(self, kind: str) -> None:
        self.seen[kind] = self.seen.get(kind, 0) + 1


def _payload(message: str) -> dict[str, Any]:
    return json.loads(message.split("data: ", 1)[1])


async def _receive(
    stream: AsgiStream, cut_after: int | None, got: list[str], messages: AsyncIterator[str] | None = None
) -> bool:
    """Read messages into `got`; cut after `cut_after` of them (counting those already in `got` from this
    stream's `messages`). True when the stream ended by itself."""
    count = len(got) if messages is not None else 0
    if cut_after is not None and count >= cut_after:
        stream.cut()
        return False
    async for message in messages or stream.messages():
        got.append(message)
        count += 1
        if cut_after is not None and count >= cut_after:
            stream.cut()
            return False
    return True


async def _answer_the_frontend_tool(apps: Apps, run_id: str, tool_id: str) -> None:
    """Submit the ask_user answer once the run waits for it (on either instance)."""
    store = apps.contexts[0].deps.store
    await apoll_until(lambda: store.get_wait(run_id, tool_id), f"run {run_id} waits for {tool_id}")
    response = await _post(apps.second, "/api/ap/submit", {"runId": run_id, "toolId": tool_id, "params": {"c": 1}})
    assert response == {"accepted": True, "status": "accepted"}, response


async def _nothing() -> None:
    return None


async def _post(app: Any, path: str, body: dict[str, Any]) -> Any:
    stream = await open_stream(app, "POST", path, body=body, headers=USER)
    await stream.finished()
    return json.loads(stream.body)


async def _one_case(apps: Apps, case: int, wire: str) -> None:
    rng = random.Random(SEED * 31 + case)
    message = f"case {case} go"
    if wire == "native":
        live = await open_stream(apps.first, "POST", "/api/ap/query", body={"message": message}, headers=USER)
    else:
        body = {"model": "main-agent", "input": message, "stream": True}
        live = await open_stream(apps.first, "POST", "/v1/responses", body=body, headers=USER)
    assert live.status == 200
    got: list[str] = []
    messages = live.messages()
    got.append(await anext(messages))
    if wire == "native":
        run_id = str(_payload(got[0])["runId"])
        key = run_id
    else:
        key = str(_payload(got[0])["response"]["id"])
        record = await apoll_until(lambda: apps.contexts[0].responses.load(key), "the response is stored")
        run_id = str(record.run_id)
    # The Responses wire refuses server frontend tools (its client declares function tools): no wait there
    waits = wire == "native"
    submit = asyncio.create_task(_answer_the_frontend_tool(apps, run_id, f"call_a{case}") if waits else _nothing())
    ended = await _receive(live, rng.randint(1, 45), got, messages)
    if rng.random() < 0.2 and not ended:  # resumed only after the run has ended
        await submit
        await live.finished()
        apps.count("after_the_end")
    resumes = 0
    while not ended:
        app = apps.second if rng.random() < 0.5 else apps.first
        apps.count("other_instance" if app is apps.second else "same_instance")
        if resumes:
            apps.count("resumed_twice")
        if not live.task or not live.task.done():
            apps.count("resumed_while_live")
        again = await _resume(app, wire, key, got)
        assert again.status == 200, again.body
        resumes += 1
        cut = rng.randint(1, 30) if resumes == 1 and rng.random() < 0.3 else None  # sometimes cut twice
        ended = await _receive(again, cut, got)
        await again.finished()
    await submit
    await live.finished()
    _check(apps.taps[key], got, wire)


async def _resume(app: Any, wire: str, key: str, got: list[str]) -> AsgiStream:
    last = got[-1].split("\n", 1)[0].removeprefix("id: ")
    if wire == "native":
        return await open_stream(app, "GET", f"/api/ap/runs/{key}/events", headers={**USER, "Last-Event-ID": last})
    params = {"stream": "true", "starting_after": last}
    return await open_stream(app, "GET", f"/v1/responses/{key}", params=params, headers=USER)


def _check(tapped: list[str], got: list[str], wire: str) -> None:
    assert "".join(_text(m) for m in got) == "".join(tapped), _first_difference(tapped, got)
    numbers = [int(m.split("\n", 1)[0].removeprefix("id: ")) for m in got]
    start = 1 if wire == "native" else 0
    assert numbers == list(range(start, start + len(got)))  # 0 lost, 0 duplicated


def _first_difference(tapped: list[str], got: list[str]) -> str:
    for index, (want, have) in enumerate(zip(tapped, (_text(m) for m in got), strict=False)):
        if want != have:
            return f"message {index}: expected {want[:300]!r}, got {have[:300]!r}"
    return f"{len(tapped)} messages expected, {len(got)} received"


@pytest.fixture
def apps(monkeypatch: pytest.MonkeyPatch) -> Apps:
    table = MemoryTable()
    contexts = [build_context(make_settings(), table=table, llm=PlayLlm(), audit=lambda line: None) for _ in range(2)]
    made = Apps(*(build_app(*routes.local, context=c) for c in contexts), contexts=contexts)
    monkeypatch.setattr(sse_module, "stream_frames", _tap(made.taps, sse_module.stream_frames))
    # A clock that moves on every read: a re-encoded event that took its time from the clock would differ
    monkeypatch.setattr(responses_encoder, "_now", itertools.count(2_000_000_000).__next__)
    monkeypatch.setattr(responses_routes, "stream_frames", _tap(made.taps, responses_routes.stream_frames))
    return made


async def test_a_stream_cut_anywhere_resumes_byte_identical_on_any_instance(apps: Apps) -> None:
    cases = [(case, "native" if case % 2 == 0 else "responses") for case in range(RUNS)]
    for start in range(0, RUNS, BATCH):
        await asyncio.gather(*(_one_case(apps, case, wire) for case, wire in cases[start : start + BATCH]))
    await join_detached()
    assert len(apps.taps) == RUNS
    # Every kind of case happened (the seed is fixed: the counts are too)
    kinds = ("after_the_end", "other_instance", "same_instance", "resumed_twice", "resumed_while_live")
    assert all(apps.seen.get(kind, 0) >= RUNS // 30 for kind in kinds), apps.seen
