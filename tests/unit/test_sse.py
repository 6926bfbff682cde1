"""The SSE response: one `data:` line per event (`event:` first when named), `: ping` comments while silent."""

from __future__ import annotations

import asyncio

import pytest
from starlette.requests import ClientDisconnect
from starlette.types import Message

from agent_core.api.sse import EventStream, Messages, sse_message

PING = b": ping\n\n"
SCOPE = {"type": "http", "method": "POST", "asgi": {"version": "3.0", "spec_version": "2.4"}}


def test_encode_is_one_data_line_per_event() -> None:
    assert (
        sse_message({"type": "content.delta", "delta": "你好"}).encode()
        == 'data: {"type":"content.delta","delta":"你好"}\n\n'.encode()
    )
    assert sse_message({"type": "response.created"}, event="response.created").encode() == (
        b'event: response.created\ndata: {"type":"response.created"}\n\n'
    )
    assert sse_message("[DONE]").encode() == b"data: [DONE]\n\n"


async def test_pings_flow_while_the_source_is_silent_then_the_event_passes() -> None:
    release = asyncio.Event()
    client_stays = asyncio.Event()  # never set: the client does not disconnect

    async def source() -> Messages:
        await release.wait()
        yield sse_message({})

    async def receive() -> Message:
        await client_stays.wait()
        return {"type": "http.disconnect"}

    received: list[bytes] = []

    async def send(message: Message) -> None:
        if message["type"] != "http.response.body" or not message.get("body"):
            return
        received.append(message["body"])
        if message["body"] == PING and len(received) == 2:
            release.set()  # two pings seen while silent: now let the event through

    await EventStream(source(), ping_s=0.001)(SCOPE, receive, send)
    assert received[:2] == [PING, PING] and received[-1] == b"data: {}\n\n"


async def test_a_stalled_client_ends_the_response_as_a_disconnect_and_the_turn_is_settled() -> None:
    stalled = asyncio.Event()  # never set: the client takes no further byte and does not disconnect
    ended: list[str] = []

    async def source() -> Messages:
        try:
            yield sse_message({"n": 1})
            yield sse_message({"n": 2})
        finally:
            ended.append("body closed")

    class Turn:
        async def settle(self) -> None:
            ended.append("turn settled")

    async def receive() -> Message:
        await stalled.wait()
        return {"type": "http.disconnect"}

    sent: list[bytes] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            if sent:
                await stalled.wait()  # the second message never leaves
            sent.append(message["body"])

    response = EventStream(source(), turn=Turn(), ping_s=0, send_timeout_s=0.01)
    with pytest.raises(ClientDisconnect):
        await asyncio.wait_for(response(SCOPE, receive, send), timeout=30)  # a guard: without the timeout it hangs
    assert sent == [b'data: {"n":1}\n\n'] and ended == ["body closed", "turn settled"]
