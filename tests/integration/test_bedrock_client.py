"""The Bedrock adapter through the real boto3 client against the loopback ConverseStream stub."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import pytest

from agent_core.domain.models import Usage
from agent_core.errors import LlmAccessDenied, LlmRejectedTools, LlmRequestInvalid, LlmUnavailable
from agent_core.llm.base import LlmDelta, LlmRequest
from agent_core.llm.bedrock_client import BedrockLlmClient
from tests.support.bedrock_stub import BedrockScript, BedrockStub, converse_problem, encode_message
from tests.support.fixtures import make_settings

PROFILE = "us.anthropic.claude-sonnet-4-20250514-v1:0"
TIME_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "time",
        "description": "The current time",
        "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}},
    },
}


async def _no_sleep(seconds: float) -> None:
    return None


def _client(**overrides: Any) -> BedrockLlmClient:
    settings = make_settings(AGENT_LLM_PROVIDER="bedrock", AGENT_MODEL=PROFILE, **overrides)
    return BedrockLlmClient(settings, sleep=_no_sleep)


async def _collect(client: BedrockLlmClient, request: LlmRequest) -> list[LlmDelta]:
    return [delta async for delta in client.stream(request)]


def _request(**fields: Any) -> LlmRequest:
    fields.setdefault("messages", [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])
    return LlmRequest(model=PROFILE, **fields)


def test_the_stub_refuses_what_converse_refuses() -> None:
    use = {"toolUse": {"toolUseId": "t", "name": "time", "input": {}}}
    assert converse_problem({"messages": [{"role": "assistant", "content": [{"text": "x"}]}]})
    assert converse_problem({"messages": [{"role": "user", "content": [{"text": "a"}]}] * 2})
    assert converse_problem({"messages": [{"role": "user", "content": [{"text": ""}]}]})
    assert converse_problem(
        {"messages": [{"role": "user", "content": [{"text": "a"}]}, {"role": "assistant", "content": [use]}]}
    )
    assert converse_problem({"messages": [{"role": "user", "content": [{"text": "a"}]}]}) is None


def test_the_encoder_writes_what_botocore_parses() -> None:
    from botocore.eventstream import EventStreamBuffer

    buffer = EventStreamBuffer()
    buffer.add_data(encode_message({":event-type": "messageStart", ":message-type": "event"}, b'{"role":"x"}'))
    [message] = list(buffer)
    assert message.headers == {":event-type": "messageStart", ":message-type": "event"}
    assert message.payload == b'{"role":"x"}'


async def test_plain_answer_streams_text_with_usage_and_a_cache_point_after_the_system_prompt(
    bedrock_stub: BedrockStub,
) -> None:
    bedrock_stub.enqueue(BedrockScript.text("Hel", "lo.", usage=(30, 4, 20, 6)))
    deltas = await _collect(_client(), _request(max_tokens=100, temperature=0.2))
    assert "".join(d.content or "" for d in deltas) == "Hello."
    assert [d.finish_reason for d in deltas if d.finish_reason] == ["stop"]
    assert [d.usage for d in deltas if d.usage] == [
        Usage(prompt_tokens=30, completion_tokens=4, cache_read_tokens=20, cache_write_tokens=6)
    ]
    [call] = bedrock_stub.calls
    assert call.model_id == PROFILE, "the inference profile id round-trips through the URL path"
    assert call.body["system"] == [{"text": "Be brief."}, {"cachePoint": {"type": "default"}}]
    assert call.body["messages"] == [{"role": "user", "content": [{"text": "hi"}]}]
    assert call.body["inferenceConfig"] == {"maxTokens": 100, "temperature": 0.2}
    assert "toolConfig" not in call.body
    assert call.headers["Authorization"].startswith("AWS4-HMAC-SHA256"), "the real SigV4-signed client"


async def test_one_tool_call_streams_split_input_and_declares_the_tool_spec(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue(BedrockScript.tool_calls([{"id": "tu_1", "name": "time", "input": {"timezone": "UTC"}}]))
    deltas = await _collect(_client(), _request(tools=[TIME_TOOL], tool_choice="auto"))
    fragments = [f for d in deltas for f in d.tool_calls]
    assert (fragments[0].index, fragments[0].id, fragments[0].name) == (0, "tu_1", "time")
    assert len(fragments) > 2 and all(f.index == 0 for f in fragments)
    assert json.loads("".join(f.arguments for f in fragments)) == {"timezone": "UTC"}
    assert [d.finish_reason for d in deltas if d.finish_reason] == ["tool_calls"]
    config = bedrock_stub.requests[0]["toolConfig"]
    assert config["tools"] == [
        {
            "toolSpec": {
                "name": "time",
                "description": "The current time",
                "inputSchema": {"json": TIME_TOOL["function"]["parameters"]},
            }
        }
    ]
    assert config["toolChoice"] == {"auto": {}}


async def test_two_tool_calls_after_text_get_indexes_in_stream_order(bedrock_stub: BedrockStub) -> None:
    calls = [
        {"id": "tu_a", "name": "time", "input": {"timezone": "Asia/Tokyo"}},
        {"id": "tu_b", "name": "time", "input": {"timezone": "Europe/London"}},
    ]
    bedrock_stub.enqueue(BedrockScript.tool_calls(calls, lead="Checking. "))
    deltas = await _collect(_client(), _request(tools=[TIME_TOOL], tool_choice="required"))
    assert "".join(d.content or "" for d in deltas) == "Checking. "
    by_index: dict[int, str] = {}
    ids = {}
    for fragment in (f for d in deltas for f in d.tool_calls):
        by_index[fragment.index] = by_index.get(fragment.index, "") + fragment.arguments
        if fragment.id:
            ids[fragment.index] = fragment.id
    assert ids == {0: "tu_a", 1: "tu_b"}
    assert {i: json.loads(a) for i, a in by_index.items()} == {
        0: {"timezone": "Asia/Tokyo"},
        1: {"timezone": "Europe/London"},
    }
    assert bedrock_stub.requests[0]["toolConfig"]["toolChoice"] == {"any": {}}


async def test_each_event_is_yielded_as_it_arrives(bedrock_stub: BedrockStub) -> None:
    # Given a stream that sends nothing after the first delta until the test has seen that delta
    gate = threading.Event()
    script = BedrockScript(frames=BedrockScript.text("first", "second").frames, gate=gate)
    bedrock_stub.enqueue(script)
    seen: list[str] = []
    async for delta in _client().stream(_request()):
        if delta.content:
            # Then the first delta arrived while the rest was still held back (no buffering on the way)
            assert gate.is_set() == bool(seen)
            seen.append(delta.content)
            gate.set()
    assert seen == ["first", "second"] and not script.gate_timed_out


async def test_reasoning_content_becomes_reasoning_deltas(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue(BedrockScript.text("42.", reasoning=["Let me ", "think."]))
    deltas = await _collect(_client(), _request())
    assert "".join(d.reasoning or "" for d in deltas) == "Let me think."
    assert "".join(d.content or "" for d in deltas) == "42."


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("max_tokens", "length"),
        ("stop_sequence", "stop"),
        ("guardrail_intervened", "content_filter"),
        ("content_filtered", "content_filter"),
    ],
)
async def test_stop_reasons_map_to_finish_reasons(bedrock_stub: BedrockStub, stop_reason: str, finish: str) -> None:
    bedrock_stub.enqueue(BedrockScript.text("x", stop_reason=stop_reason))
    deltas = await _collect(_client(), _request())
    assert [d.finish_reason for d in deltas if d.finish_reason] == [finish]


async def test_tool_use_and_results_round_trip_with_their_ids(bedrock_stub: BedrockStub) -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "system", "content": "Summary of earlier turns."},
        {"role": "user", "content": "times?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "tu_a", "type": "function", "function": {"name": "time", "arguments": '{"timezone": "UTC"}'}},
                {"id": "tu_b", "type": "function", "function": {"name": "time", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "tu_a", "content": "12:00"},
        {"role": "tool", "tool_call_id": "tu_b", "content": "13:00"},
    ]
    await _collect(_client(), _request(messages=messages, tools=[TIME_TOOL]))
    body = bedrock_stub.requests[0]
    assert body["system"] == [
        {"text": "sys"},
        {"text": "Summary of earlier turns."},
        {"cachePoint": {"type": "default"}},
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"text": "times?"}]},
        {
            "role": "assistant",
            "content": [
                {"toolUse": {"toolUseId": "tu_a", "name": "time", "input": {"timezone": "UTC"}}},
                {"toolUse": {"toolUseId": "tu_b", "name": "time", "input": {}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "tu_a", "content": [{"text": "12:00"}]}},
                {"toolResult": {"toolUseId": "tu_b", "content": [{"text": "13:00"}]}},
            ],
        },
    ]


async def test_a_call_without_tools_writes_earlier_tool_calls_as_text(bedrock_stub: BedrockStub) -> None:
    # Converse refuses toolUse/toolResult blocks in a request without toolConfig
    messages = [
        {"role": "user", "content": "time?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "tu_a", "type": "function", "function": {"name": "time", "arguments": '{"timezone": "UTC"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "tu_a", "content": "12:00"},
        {"role": "assistant", "content": "It is noon."},
        {"role": "user", "content": "thanks"},
    ]
    await _collect(_client(), _request(messages=messages))
    body = bedrock_stub.requests[0]
    assert "toolConfig" not in body
    assert body["messages"] == [
        {"role": "user", "content": [{"text": "time?"}]},
        {"role": "assistant", "content": [{"text": '[called tool time with {"timezone": "UTC"}]'}]},
        {"role": "user", "content": [{"text": "[result of time: 12:00]"}]},
        {"role": "assistant", "content": [{"text": "It is noon."}]},
        {"role": "user", "content": [{"text": "thanks"}]},
    ]


async def test_throttling_is_retried_before_output(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue(BedrockScript.error(429, "ThrottlingException", "Too many requests"), BedrockScript.text("ok"))
    deltas = await _collect(_client(), _request())
    assert "".join(d.content or "" for d in deltas) == "ok"
    assert len(bedrock_stub.calls) == 2


async def test_persistent_unavailability_fails_after_the_retries(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue(*[BedrockScript.error(503, "ServiceUnavailableException") for _ in range(3)])
    with pytest.raises(LlmUnavailable) as caught:
        await _collect(_client(AGENT_LLM_MAX_RETRIES="2"), _request())
    assert type(caught.value) is LlmUnavailable and caught.value.fallback_ok
    assert "ServiceUnavailableException" in caught.value.message and "after 2 retries" in caught.value.message
    assert len(bedrock_stub.calls) == 3


async def test_an_exception_event_mid_stream_is_not_retried(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue(BedrockScript.interrupted("partial ", "answer"), BedrockScript.text("never"))
    seen: list[str] = []
    with pytest.raises(LlmUnavailable) as caught:
        async for delta in _client().stream(_request()):
            seen.append(delta.content or "")
    assert "".join(seen) == "partial answer"
    assert "modelStreamErrorException" in caught.value.message and "after output started" in caught.value.message
    assert len(bedrock_stub.calls) == 1


async def test_validation_errors_are_not_retried(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue(BedrockScript.error(400, "ValidationException", "messages: malformed"))
    with pytest.raises(LlmRequestInvalid) as caught:
        await _collect(_client(), _request())
    assert caught.value.code == "llm_request_invalid" and not caught.value.fallback_ok
    bedrock_stub.enqueue(BedrockScript.error(400, "ValidationException", "This model doesn't support tool use."))
    with pytest.raises(LlmRejectedTools):
        await _collect(_client(), _request(tools=[TIME_TOOL]))
    assert len(bedrock_stub.calls) == 2


async def test_access_denied_is_a_configuration_error_naming_the_model(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue(BedrockScript.error(403, "AccessDeniedException", "not authorized"))
    with pytest.raises(LlmAccessDenied) as caught:
        await _collect(_client(), _request())
    assert caught.value.code == "llm_access_denied" and PROFILE in caught.value.message
    assert "bedrock:InvokeModelWithResponseStream" in caught.value.message
    assert len(bedrock_stub.calls) == 1


@pytest.mark.parametrize(
    "message",
    [
        "Invocation of model ID anthropic.claude-sonnet-4 with on-demand throughput isn't supported. Retry your "
        "request with the ID or ARN of an inference profile that contains this model.",
        "The provided model identifier is invalid.",
    ],
)
async def test_a_model_id_the_region_cannot_serve_is_a_configuration_error(
    bedrock_stub: BedrockStub, message: str
) -> None:
    bedrock_stub.enqueue(BedrockScript.error(400, "ValidationException", message))
    with pytest.raises(LlmAccessDenied) as caught:
        await _collect(_client(), _request())
    assert caught.value.fallback_ok and "check AGENT_MODEL" in caught.value.message


def test_the_bedrock_path_does_not_import_openai() -> None:
    code = (
        "import sys\n"
        "from agent_core.config import Settings\n"
        "from agent_core.context import build_context\n"
        "ctx = build_context(Settings(AGENT_LLM_PROVIDER='bedrock', AGENT_STORAGE='memory'))\n"
        "assert type(ctx.deps.llm).__name__ == 'BedrockLlmClient', ctx.deps.llm\n"
        "assert 'openai' not in sys.modules, 'openai was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
