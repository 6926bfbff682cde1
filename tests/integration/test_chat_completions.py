"""POST /v1/chat/completions, driven by the real openai SDK over loopback HTTP (see tests/support/responses_app.py).

Every chunk and completion is validated with the SDK's own `openai.types.chat` models.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from agent_core.context import AppContext
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.responses_app import chat_messages, table_items

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def _chunks(stream: Any) -> list[ChatCompletionChunk]:
    chunks = list(stream)
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk.model_dump())  # the SDK's model, strictly re-validated
        assert chunk.object == "chat.completion.chunk"
    assert len({c.id for c in chunks}) == 1, "one completion id per stream"
    return chunks


def _text(chunks: list[ChatCompletionChunk]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_blocking_completion_and_options_reach_the_model(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("Hello ", "world"))
    completion = client.chat.completions.create(
        model="main-agent",
        messages=[{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Say hello"}],
        temperature=0.3,
        max_completion_tokens=40,
        stop=["\n\n", "END"],
    )
    ChatCompletion.model_validate(completion.model_dump())
    assert completion.object == "chat.completion" and completion.id.startswith("chatcmpl-")
    assert completion.model == "main-agent"
    [choice] = completion.choices
    assert choice.message.role == "assistant" and choice.message.content == "Hello world"
    assert choice.finish_reason == "stop" and choice.message.tool_calls is None
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens, completion.usage.total_tokens) == (
        11,
        7,
        18,
    )
    sent = openai_stub.requests[-1]
    assert sent["temperature"] == 0.3 and sent["max_tokens"] == 40 and sent["stop"] == ["\n\n", "END"]
    assert ("system", "Answer briefly.") in chat_messages(sent) and chat_messages(sent)[-1] == ("user", "Say hello")


def test_streamed_chunks_reasoning_text_finish_and_usage(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("One ", "two", reasoning=["Let me ", "count"]))
    stream = client.chat.completions.create(
        model="main-agent",
        messages=[{"role": "user", "content": "Count"}],
        stream=True,
        stream_options={"include_usage": True},
        max_tokens=25,
    )
    chunks = _chunks(stream)
    # The role first; one content delta per upstream delta; reasoning as reasoning_content
    assert chunks[0].choices[0].delta.role == "assistant"
    reasoning = [getattr(c.choices[0].delta, "reasoning_content", None) for c in chunks if c.choices]
    assert [r for r in reasoning if r] == ["Let me ", "count"]
    assert [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content] == ["One ", "two"]
    # Exactly one finish, then the usage chunk (no choices) last; every other chunk says usage null
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"] and chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 18
    assert all(c.usage is None for c in chunks[:-1])
    assert openai_stub.requests[-1]["max_tokens"] == 25


def test_stream_without_include_usage_has_no_usage_chunk(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("Hi"))
    chunks = _chunks(
        client.chat.completions.create(model="main-agent", messages=[{"role": "user", "content": "hi"}], stream=True)
    )
    assert all(c.choices for c in chunks) and all(c.usage is None for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop" and _text(chunks) == "Hi"


def test_stream_ends_with_done(base_url: str, openai_stub: OpenAiStub) -> None:
    # The wire itself: `id: <n>` (1, 2, ...) and data SSE messages, then `data: [DONE]`
    openai_stub.enqueue(StubScript.text("Hi"))
    body = {"model": "main-agent", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    response = httpx.post(f"{base_url}/chat/completions", json=body, headers={"Authorization": "Bearer user-a"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    messages = [m for m in response.text.split("\n\n") if m and not m.startswith(":")]
    ids = [m.split("\n", 1)[0] for m in messages]
    assert ids == [f"id: {n}" for n in range(1, len(messages) + 1)]
    data = [m.split("\n", 1)[1] for m in messages]
    assert data[-1] == "data: [DONE]" and all(d.startswith("data: ") and "\n" not in d for d in data)


def test_server_tools_run_inside_the_request(
    client: openai.OpenAI, openai_stub: OpenAiStub, context: AppContext
) -> None:
    before = table_items(context)
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "call_t", "name": "time", "arguments": {"timezone": "Asia/Tokyo"}}]),
        StubScript.text("It is evening in Tokyo."),
    )
    chunks = _chunks(
        client.chat.completions.create(
            model="main-agent", messages=[{"role": "user", "content": "Tokyo clock?"}], stream=True
        )
    )
    # The built-in tool ran server-side (the model saw its result); the client sees only the answer
    assert all(not c.choices or c.choices[0].delta.tool_calls is None for c in chunks)
    assert _text(chunks) == "It is evening in Tokyo." and chunks[-1].choices[0].finish_reason == "stop"
    assert openai_stub.requests[-1]["messages"][-1]["role"] == "tool"
    assert "Asia/Tokyo" in openai_stub.requests[-1]["messages"][-1]["content"]
    assert table_items(context) == before, "a chat completion is stateless: nothing is written"


def test_client_tool_calls_round_trip(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "call_w", "name": "get_weather", "arguments": {"city": "Paris"}}])
    )
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    chunks = _chunks(
        client.chat.completions.create(model="main-agent", messages=messages, tools=[WEATHER], stream=True)  # type: ignore[list-item]
    )
    calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
    assert calls[0].id == "call_w" and calls[0].function is not None and calls[0].function.name == "get_weather"
    assert {tc.index for tc in calls} == {0}
    arguments = "".join(tc.function.arguments or "" for tc in calls if tc.function)
    assert json.loads(arguments) == {"city": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls" and len(openai_stub.requests) == 1
    declared = [t["function"]["name"] for t in openai_stub.requests[0]["tools"]]
    assert "get_weather" in declared and "ask_user" not in declared
    # The client runs the tool and sends the whole conversation back (blocking this time)
    openai_stub.enqueue(StubScript.text("It is 18°C in Paris."))
    messages += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_w", "content": '{"temp": 18}'},
    ]
    completion = client.chat.completions.create(model="main-agent", messages=messages, tools=[WEATHER])  # type: ignore[list-item]
    assert completion.choices[0].message.content == "It is 18°C in Paris."
    sent = openai_stub.requests[-1]["messages"]
    assert next(m for m in sent if m.get("tool_calls"))["tool_calls"][0]["id"] == "call_w"
    assert {"role": "tool", "tool_call_id": "call_w", "content": '{"temp": 18}'} in sent


def test_blocking_tool_calls_completion(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.tool_calls([{"id": "call_w", "name": "get_weather", "arguments": {"city": "Oslo"}}]))
    completion = client.chat.completions.create(
        model="main-agent",
        messages=[{"role": "user", "content": "Oslo?"}],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    ChatCompletion.model_validate(completion.model_dump())
    [choice] = completion.choices
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls is not None
    [call] = choice.message.tool_calls
    assert call.id == "call_w" and call.type == "function"
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Oslo"}


def test_a_failed_run_is_an_error_on_both_wires(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(*[StubScript.error(400, "model refuses")] * 4)
    with pytest.raises(openai.APIStatusError) as blocking:
        client.chat.completions.create(model="main-agent", messages=[{"role": "user", "content": "fail"}])
    assert blocking.value.status_code == 502 and blocking.value.code == "llm_unavailable"
    stream = client.chat.completions.create(
        model="main-agent", messages=[{"role": "user", "content": "fail"}], stream=True
    )
    with pytest.raises(openai.APIError) as streamed:
        for _ in stream:
            pass
    assert streamed.value.code == "llm_unavailable" and "model refuses" in streamed.value.message  # as blocking


def test_unknown_model_is_model_not_found(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    assert "main-agent" in [m.id for m in client.models.list()]
    with pytest.raises(openai.NotFoundError) as error:
        client.chat.completions.create(model="no-such-agent", messages=[{"role": "user", "content": "hi"}])
    assert error.value.code == "model_not_found" and error.value.body["param"] == "model"  # type: ignore[index]
    assert openai_stub.requests == []


@pytest.mark.parametrize(
    ("params", "param", "code"),
    [
        ({"n": 2}, "n", "unsupported_parameter"),
        ({"logprobs": True}, "logprobs", "unsupported_parameter"),
        ({"response_format": {"type": "json_object"}}, "response_format", "unsupported_parameter"),
        ({"top_p": 0.5}, "top_p", "unsupported_parameter"),
        ({"stream_options": {"include_usage": True}}, "stream_options", "invalid_request"),
        ({"max_tokens": 10, "max_completion_tokens": 20}, "max_tokens", "invalid_request"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "invalid_request"),
        ({"temperature": 3}, "temperature", "invalid_request"),
        ({"messages": []}, "messages", "invalid_request"),
        ({"messages": [{"role": "narrator", "content": "x"}]}, "messages[0].role", "invalid_request"),
        ({"messages": [{"role": "assistant", "content": "alone"}]}, "messages", "invalid_request"),
        ({"store": True}, "store", "unsupported_parameter"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id", "invalid_request"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            "messages",
            "invalid_request",
        ),
        ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice", "invalid_request"),
    ],
)
def test_refused_parameters_are_bad_requests(
    client: openai.OpenAI, openai_stub: OpenAiStub, params: dict[str, Any], param: str, code: str
) -> None:
    body: dict[str, Any] = {"model": "main-agent", "messages": [{"role": "user", "content": "hi"}], **params}
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(**body)
    assert error.value.status_code == 400 and error.value.code == code
    assert error.value.body["param"] == param  # type: ignore[index]
    assert openai_stub.requests == [], "rejected before any model call"


def test_a_tool_gated_only_for_some_arguments_is_offered_and_a_call_needing_approval_does_not_run(
    client: openai.OpenAI, openai_stub: OpenAiStub, context: AppContext
) -> None:
    # Given the deployment's rule: `time` asks a person only for Antarctica/Troll
    from agent_core.domain.approval import parse_policy

    rule = parse_policy({"when": {"arg": "timezone", "equals": "Antarctica/Troll"}})
    context.deps.tools.approvals["time"] = [rule]
    openai_stub.enqueue(
        StubScript.tool_calls(
            [
                {"id": "call_troll", "name": "time", "arguments": {"timezone": "Antarctica/Troll"}},
                {"id": "call_tokyo", "name": "time", "arguments": {"timezone": "Asia/Tokyo"}},
            ]
        ),
        StubScript.text("Tokyo only."),
    )
    # When a Chat Completions request offers the agent (nobody here could answer an approval)
    done = client.chat.completions.create(model="main-agent", messages=[{"role": "user", "content": "clocks?"}])
    # Then it runs: the call that would need approval did not run and the model read why, naming where it can
    assert done.choices[0].message.content == "Tokyo only."
    results = {m["tool_call_id"]: m["content"] for m in openai_stub.requests[-1]["messages"] if m["role"] == "tool"}
    assert "needs approval" in results["call_troll"] and "/api/ap/query" in results["call_troll"]
    assert "Asia/Tokyo" in results["call_tokyo"] and "needs approval" not in results["call_tokyo"]


def test_oversized_message_is_413(client: openai.OpenAI, openai_stub: OpenAiStub, context: AppContext) -> None:
    big = "x" * (context.settings.max_message_bytes + 1)
    with pytest.raises(openai.APIStatusError) as error:
        client.chat.completions.create(model="main-agent", messages=[{"role": "user", "content": big}])
    assert error.value.status_code == 413 and openai_stub.requests == []


def test_an_agent_with_approval_gated_tools_is_refused_naming_the_wires_that_can_ask(
    client: openai.OpenAI, openai_stub: OpenAiStub, context: AppContext
) -> None:
    # Given the main agent's http_get gated by the deployment's approval rules
    from agent_core.domain.approval import parse_policy

    context.deps.tools.approvals["http_get"] = [parse_policy("always")]
    before = table_items(context)
    # When a Chat Completions request (or a stateless Responses one) would offer it, Then 400 before any work
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="main-agent", messages=[{"role": "user", "content": "fetch it"}])
    error = refused.value.body
    assert isinstance(error, dict) and error["code"] == "approval_unsupported" and error["param"] == "model"
    assert "http_get" in error["message"] and "/api/ap/query" in error["message"] and "store: true" in error["message"]
    with pytest.raises(openai.BadRequestError) as stateless:
        client.responses.create(model="main-agent", input="fetch it", store=False)
    assert isinstance(stateless.value.body, dict) and stateless.value.body["code"] == "approval_unsupported"
    assert openai_stub.requests == [] and table_items(context) == before
    # A request offering no tools has nothing to approve: it runs
    openai_stub.enqueue(StubScript.text("hi"))
    done = client.chat.completions.create(
        model="main-agent", messages=[{"role": "user", "content": "hi"}], tool_choice="none"
    )
    assert done.choices[0].message.content == "hi"
