"""OpenAiLlmClient driving the real openai SDK against the loopback OpenAI stub."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import openai
import pytest
from openai.types.chat import ChatCompletionMessageFunctionToolCall

from agent_core.config import Settings
from agent_core.domain.models import Usage
from agent_core.errors import LlmUnavailable
from agent_core.llm.base import LlmDelta, LlmRequest, complete_text
from agent_core.llm.openai_client import OpenAiLlmClient
from tests.support import fixtures
from tests.support.openai_stub import OpenAiStub, StubScript

API_KEY = "sk-test-very-secret-123456"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]

openai_stub = fixtures.openai_stub  # shared fixture, also re-exported by tests/conftest.py


class RetryLog(logging.Handler):
    """The openai SDK's own record of each retry it makes ("Retrying request in <s> seconds ..."): its waits."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.calls: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Retrying request in") and isinstance(record.args, tuple):
            self.calls.append(float(cast(float, record.args[0])))


def make_settings(stub: OpenAiStub, **overrides: Any) -> Settings:
    """Settings pointing at the stub, via the environment-variable aliases."""
    values: dict[str, Any] = {
        "OPENAI_BASE_URL": stub.base_url,
        "OPENAI_API_KEY": API_KEY,
        "AGENT_LLM_PROVIDER": "openai",
        "AGENT_LLM_MAX_RETRIES": 2,
        "AGENT_LLM_TIMEOUT_S": 10.0,
    }
    values.update(overrides)
    return Settings(**values)


def make_request(**overrides: Any) -> LlmRequest:
    """A one-message chat request."""
    values: dict[str, Any] = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
    values.update(overrides)
    return LlmRequest(**values)


@pytest.fixture
def sleep() -> Iterator[RetryLog]:
    """The waits before each retry, as the SDK logs them (the stub's errors say `retry-after-ms: 1`)."""
    log, handler = logging.getLogger("openai"), RetryLog()
    level = log.level
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    yield handler
    log.removeHandler(handler)
    log.setLevel(level)


@pytest.fixture
async def llm(openai_stub: OpenAiStub) -> AsyncIterator[OpenAiLlmClient]:
    """An adapter bound to the stub; closed after the test."""
    client = OpenAiLlmClient(make_settings(openai_stub))
    yield client
    await client.aclose()


async def collect(client: OpenAiLlmClient, request: LlmRequest | None = None) -> list[LlmDelta]:
    """Every delta of one streamed call."""
    return [d async for d in client.stream(request or make_request())]


def reassemble(deltas: list[LlmDelta]) -> dict[int, dict[str, str]]:
    """Fold tool-call fragments by index into {index: {id, name, arguments}}."""
    calls: dict[int, dict[str, str]] = {}
    for delta in deltas:
        for frag in delta.tool_calls:
            call = calls.setdefault(frag.index, {"id": "", "name": "", "arguments": ""})
            call["id"] = frag.id or call["id"]
            call["name"] = frag.name or call["name"]
            call["arguments"] += frag.arguments
    return calls


async def test_text_chunks_arrive_one_delta_each_in_order(openai_stub: OpenAiStub, llm: OpenAiLlmClient) -> None:
    openai_stub.enqueue(StubScript.text("Hel", "lo", " wor", "ld"))
    deltas = await collect(llm)
    assert [d.content for d in deltas[:4]] == ["Hel", "lo", " wor", "ld"]
    assert deltas[4].finish_reason == "stop" and deltas[4].content is None
    assert deltas[5].usage == Usage(prompt_tokens=11, completion_tokens=7)
    assert len(deltas) == 6


async def test_usage_parsed_and_complete_text(openai_stub: OpenAiStub, llm: OpenAiLlmClient) -> None:
    openai_stub.enqueue(StubScript.text("Hello", " world", usage=(123, 45)))
    text, usage = await complete_text(llm, make_request())
    assert text == "Hello world"
    assert usage == Usage(prompt_tokens=123, completion_tokens=45)


async def test_reasoning_content_is_kept(openai_stub: OpenAiStub, llm: OpenAiLlmClient) -> None:
    openai_stub.enqueue(StubScript.text("42", reasoning=["Let me ", "think."]))
    deltas = await collect(llm)
    assert [d.reasoning for d in deltas if d.reasoning] == ["Let me ", "think."]
    assert [d.content for d in deltas if d.content] == ["42"]


async def test_split_tool_call_arguments_reassemble(openai_stub: OpenAiStub, llm: OpenAiLlmClient) -> None:
    args = {"city": "Shanghai", "units": "metric", "days": 3}
    openai_stub.enqueue(StubScript.tool_calls([{"id": "call_1", "name": "get_weather", "arguments": args}]))
    deltas = await collect(llm, make_request(tools=TOOLS))
    assert sum(1 for d in deltas if d.tool_calls) > 3
    calls = reassemble(deltas)
    assert list(calls) == [0]
    assert calls[0]["id"] == "call_1" and calls[0]["name"] == "get_weather"
    assert json.loads(calls[0]["arguments"]) == args
    assert deltas[-2].finish_reason == "tool_calls"


async def test_parallel_interleaved_tool_calls_reassemble(openai_stub: OpenAiStub, llm: OpenAiLlmClient) -> None:
    first, second = {"city": "Paris"}, {"city": "Beijing", "days": 2}
    openai_stub.enqueue(
        StubScript.tool_calls(
            [
                {"id": "call_a", "name": "get_weather", "arguments": first},
                {"id": "call_b", "name": "get_time", "arguments": second},
            ],
            piece_size=5,
            interleave=True,
        )
    )
    deltas = await collect(llm, make_request(tools=TOOLS))
    indexes = [f.index for d in deltas for f in d.tool_calls]
    assert indexes[:4] == [0, 1, 0, 1]
    calls = reassemble(deltas)
    assert (calls[0]["id"], calls[0]["name"]) == ("call_a", "get_weather")
    assert (calls[1]["id"], calls[1]["name"]) == ("call_b", "get_time")
    assert json.loads(calls[0]["arguments"]) == first
    assert json.loads(calls[1]["arguments"]) == second


async def test_request_carries_stream_options_tools_and_key(openai_stub: OpenAiStub, llm: OpenAiLlmClient) -> None:
    await collect(llm, make_request(tools=TOOLS, temperature=0.2, max_tokens=64))
    await collect(llm)
    with_tools, without_tools = openai_stub.requests
    assert with_tools["stream"] is True
    assert with_tools["stream_options"] == {"include_usage": True}
    assert with_tools["tools"] == TOOLS
    assert with_tools["model"] == "gpt-test"
    assert with_tools["messages"] == [{"role": "user", "content": "hi"}]
    assert with_tools["temperature"] == 0.2 and with_tools["max_tokens"] == 64
    assert "tools" not in without_tools and "temperature" not in without_tools
    assert openai_stub.authorizations == [f"Bearer {API_KEY}"] * 2


async def test_429_then_success_honours_retry_after(
    openai_stub: OpenAiStub, llm: OpenAiLlmClient, sleep: RetryLog
) -> None:
    openai_stub.enqueue(StubScript.error(429, retry_after=0.002), StubScript.text("ok"))
    deltas = await collect(llm)
    assert [d.content for d in deltas if d.content] == ["ok"]
    assert sleep.calls == [0.002]
    assert len(openai_stub.requests) == 2


async def test_retry_after_is_honoured_and_backoff_is_bounded(
    openai_stub: OpenAiStub, llm: OpenAiLlmClient, sleep: RetryLog
) -> None:
    openai_stub.enqueue(
        StubScript.error(429, retry_after_ms=7), StubScript.error(503, retry_after_ms=None), StubScript.text("ok")
    )
    await collect(llm)
    assert sleep.calls[0] == 0.007
    assert 0.5 <= sleep.calls[1] <= 1.0  # second retry: base 0.5 * 2, less up to 25 % jitter (the SDK's)


async def test_a_retry_after_longer_than_the_cap_fails_at_once(
    openai_stub: OpenAiStub, llm: OpenAiLlmClient, sleep: RetryLog
) -> None:
    # Waiting an hour would hold the turn past any deadline: llm_unavailable now, saying when to retry
    openai_stub.enqueue(StubScript.error(429, retry_after=3600))
    with pytest.raises(LlmUnavailable) as info:
        await collect(llm)
    assert sleep.calls == [] and len(openai_stub.requests) == 1
    assert "429" in info.value.message and "retry after 3600s" in info.value.message


async def test_persistent_500_gives_llm_unavailable_after_max_retries(
    openai_stub: OpenAiStub, llm: OpenAiLlmClient, sleep: RetryLog
) -> None:
    openai_stub.enqueue(*[StubScript.error(500) for _ in range(5)])
    with pytest.raises(LlmUnavailable) as info:
        await collect(llm)
    assert len(openai_stub.requests) == 1 + 2
    assert len(sleep.calls) == 2
    assert info.value.code == "llm_unavailable"
    assert "500" in info.value.message and "after 2 retries" in info.value.message


async def test_400_is_not_retried(openai_stub: OpenAiStub, llm: OpenAiLlmClient, sleep: RetryLog) -> None:
    openai_stub.enqueue(StubScript.error(400, "messages: invalid role"))
    with pytest.raises(LlmUnavailable) as info:
        await collect(llm)
    assert len(openai_stub.requests) == 1
    assert sleep.calls == []
    assert "400" in info.value.message and "invalid role" in info.value.message


async def test_api_key_never_in_error_message(openai_stub: OpenAiStub, llm: OpenAiLlmClient) -> None:
    openai_stub.enqueue(StubScript.error(401, f"Incorrect API key provided: {API_KEY}"))
    with pytest.raises(LlmUnavailable) as info:
        await collect(llm)
    assert API_KEY not in str(info.value)
    assert API_KEY[:12] not in info.value.message
    assert "401" in info.value.message


async def test_streaming_is_not_buffered(openai_stub: OpenAiStub, llm: OpenAiLlmClient) -> None:
    gate = threading.Event()
    openai_stub.enqueue(StubScript.text("first", "second", gate=gate))
    stream = llm.stream(make_request())
    try:
        first = await asyncio.wait_for(anext(stream), timeout=5)
        assert first.content == "first"
        assert not gate.is_set()
    finally:
        gate.set()
    rest = [d async for d in stream]
    assert [d.content for d in rest if d.content] == ["second"]


async def test_no_retry_once_streaming_started(openai_stub: OpenAiStub, llm: OpenAiLlmClient, sleep: RetryLog) -> None:
    openai_stub.enqueue(StubScript(chunks=StubScript.text("a", "b", "c").chunks, abort_after=2))
    seen: list[LlmDelta] = []
    with pytest.raises(LlmUnavailable) as info:
        async for delta in llm.stream(make_request()):
            seen.append(delta)
    assert [d.content for d in seen] == ["a", "b"]
    assert len(openai_stub.requests) == 1 and sleep.calls == []
    assert "interrupted" in info.value.message


async def test_connection_drop_before_the_response_is_retried(
    openai_stub: OpenAiStub, llm: OpenAiLlmClient, sleep: RetryLog
) -> None:
    openai_stub.enqueue(StubScript(drop=True), StubScript.text("ok"))
    deltas = await collect(llm)
    assert [d.content for d in deltas if d.content] == ["ok"]
    assert len(openai_stub.requests) == 2 and len(sleep.calls) == 1


async def test_connection_drop_after_the_response_started_is_not_retried(
    openai_stub: OpenAiStub, llm: OpenAiLlmClient, sleep: RetryLog
) -> None:
    # The SDK retries a streamed call only until its response starts: a drop after the status line, even
    # before the first chunk, is llm_unavailable (the fallback chain's turn), never a repeated stream.
    openai_stub.enqueue(StubScript(chunks=StubScript.text("x").chunks, abort_after=0), StubScript.text("ok"))
    with pytest.raises(LlmUnavailable) as info:
        await collect(llm)
    assert len(openai_stub.requests) == 1 and sleep.calls == []
    assert info.value.code == "llm_unavailable" and "interrupted" not in info.value.message


@pytest.mark.parametrize(
    ("status", "retried"),
    [
        (408, True),
        (409, True),
        (429, True),
        (500, True),
        (503, True),
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (422, False),
    ],
)
async def test_which_statuses_are_retried(
    openai_stub: OpenAiStub, llm: OpenAiLlmClient, sleep: RetryLog, status: int, retried: bool
) -> None:
    openai_stub.enqueue(StubScript.error(status), StubScript.text("ok"))
    if retried:
        assert [d.content for d in await collect(llm) if d.content] == ["ok"]
    else:
        with pytest.raises(LlmUnavailable):
            await collect(llm)
    assert len(openai_stub.requests) == (2 if retried else 1) and len(sleep.calls) == int(retried)


async def test_the_server_decides_with_x_should_retry(
    openai_stub: OpenAiStub, llm: OpenAiLlmClient, sleep: RetryLog
) -> None:
    openai_stub.enqueue(StubScript.error(503, headers={"x-should-retry": "false"}))
    with pytest.raises(LlmUnavailable) as info:
        await collect(llm)
    assert len(openai_stub.requests) == 1 and "503" in info.value.message
    openai_stub.enqueue(StubScript.error(400, headers={"x-should-retry": "true"}), StubScript.text("ok"))
    assert [d.content for d in await collect(llm) if d.content] == ["ok"]
    assert len(openai_stub.requests) == 3 and len(sleep.calls) == 1


async def test_default_reply_when_queue_empty(openai_stub: OpenAiStub, llm: OpenAiLlmClient) -> None:
    text, _ = await complete_text(llm, make_request())
    assert text == "stub reply"


async def test_api_key_read_from_secret(openai_stub: OpenAiStub, monkeypatch: pytest.MonkeyPatch) -> None:
    from aws_lambda_powertools.utilities import parameters

    calls: list[tuple[str, int | None]] = []

    def fake_get_secret(name: str, max_age: int | None = None, **_: Any) -> str:
        calls.append((name, max_age))
        return "sk-from-secret"

    monkeypatch.setattr(parameters, "get_secret", fake_get_secret)
    settings = make_settings(openai_stub, OPENAI_API_KEY="", AGENT_LLM_API_KEY_SECRET="llm/key")
    client = OpenAiLlmClient(settings)
    await collect(client)
    await collect(client)
    await client.aclose()
    assert calls == [("llm/key", 300)]
    assert openai_stub.authorizations == ["Bearer sk-from-secret"] * 2


async def test_azure_provider_uses_deployment_path(openai_stub: OpenAiStub) -> None:
    root = openai_stub.base_url.removesuffix("/v1")
    client = OpenAiLlmClient(make_settings(openai_stub, AGENT_LLM_PROVIDER="azure", OPENAI_BASE_URL=root))
    text, _ = await complete_text(client, make_request(model="my-deployment"))
    await client.aclose()
    assert text == "stub reply"
    headers = {k.lower(): v for k, v in openai_stub.headers[0].items()}
    assert headers["api-key"] == API_KEY


async def test_injected_client_and_non_streaming_stub(openai_stub: OpenAiStub) -> None:
    sdk = openai.AsyncOpenAI(api_key="sk-injected", base_url=openai_stub.base_url, max_retries=0)
    llm = OpenAiLlmClient(make_settings(openai_stub, OPENAI_API_KEY=""), client=sdk)
    assert [d.content for d in await collect(llm) if d.content] == ["stub reply"]
    openai_stub.enqueue(StubScript.tool_calls([{"id": "c1", "name": "get_weather", "arguments": {"a": 1}}]))
    done = await sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    await sdk.close()
    call = (done.choices[0].message.tool_calls or [])[0]
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert call.id == "c1" and json.loads(call.function.arguments) == {"a": 1}
    assert openai_stub.authorizations[0] == "Bearer sk-injected"


async def test_tool_choice_and_parallel_tool_calls_reach_the_provider(
    openai_stub: OpenAiStub, llm: OpenAiLlmClient
) -> None:
    tools = [{"type": "function", "function": {"name": "time", "parameters": {"type": "object", "properties": {}}}}]
    request = make_request(tools=tools).model_copy(update={"tool_choice": "required", "parallel_tool_calls": False})
    await complete_text(llm, request)
    sent = openai_stub.requests[-1]
    assert sent["tool_choice"] == "required" and sent["parallel_tool_calls"] is False


async def test_a_stream_that_opened_after_a_retry_then_broke_says_so(
    openai_stub: OpenAiStub, llm: OpenAiLlmClient, sleep: RetryLog
) -> None:
    # A 500 (retried by the SDK), then a stream that ends before any output without a finish reason
    openai_stub.enqueue(StubScript.error(500), StubScript(chunks=[], done=False))
    with pytest.raises(LlmUnavailable) as info:
        await collect(llm)
    assert len(openai_stub.requests) == 2 and len(sleep.calls) == 1
    assert "no finish_reason" in info.value.message and "after 1 retry" in info.value.message
