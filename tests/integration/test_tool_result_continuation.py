"""A turn continued by the client's tool results: the model is called with the results last, and nothing
invented is stored or replayed as a user message (Responses, Chat Completions, AG-UI; OpenAI and Bedrock)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.domain.models import Message, Role
from agent_core.store.memory_table import MemoryTable
from agent_core.wires.client_turn import client_chat_id
from tests.support.bedrock_stub import BedrockScript, BedrockStub
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.server import serve
from tests.support.sse import events_in

WEATHER: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
RESULT = {"role": "tool", "tool_call_id": "call_w", "content": '{"temp": 18}'}
USER = "user-a"


def _stored(context: AppContext, chat_id: str) -> list[Message]:
    page = asyncio.run(context.deps.chats.list_messages(chat_id, USER, 100, None))
    assert page is not None
    return page.items


def _replay(base_url: str, chat_id: str) -> list[dict[str, Any]]:
    root = base_url.removesuffix("/v1")
    answer = httpx.get(f"{root}/api/ap/chat", params={"chatId": chat_id}, headers={"Authorization": f"Bearer {USER}"})
    assert answer.status_code == 200
    events: list[dict[str, Any]] = answer.json()["events"]
    return events


def _assert_continued_cleanly(messages: list[Message], replay: list[dict[str, Any]], question: str) -> None:
    """The chat holds the question, the call, its result and the answer; the replay has one question."""
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert [m.content for m in messages if m.role == Role.USER] == [question]
    queries = [e["message"] for e in replay if e["type"] == "request.query"]
    assert queries == [question]
    assert [e["type"] for e in replay if e["type"] in ("run.complete", "run.error", "run.cancel")] == [
        "run.complete",
        "run.complete",
    ]


def test_responses_function_call_output_is_the_last_message(
    client: openai.OpenAI, openai_stub: OpenAiStub, base_url: str, context: AppContext
) -> None:
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "call_w", "name": "get_weather", "arguments": {"city": "Paris"}}])
    )
    first = client.responses.create(model="main-agent", input="Weather in Paris?", tools=[WEATHER])  # type: ignore[list-item]
    openai_stub.enqueue(StubScript.text("It is 18°C in Paris."))
    second = client.responses.create(
        model="main-agent",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": "call_w", "output": '{"temp": 18}'}],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert second.output_text == "It is 18°C in Paris."
    assert openai_stub.requests[-1]["messages"][-1] == RESULT
    assert second.conversation is not None
    chat_id = second.conversation.id
    _assert_continued_cleanly(_stored(context, chat_id), _replay(base_url, chat_id), "Weather in Paris?")
    items = client.conversations.items.list(chat_id, order="asc").data
    assert [i.type for i in items] == ["message", "function_call", "function_call_output", "message"]


def test_chat_completions_tool_message_is_the_last_message(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    call = {"id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    tool = {"type": "function", "function": {k: v for k, v in WEATHER.items() if k != "type"}}
    for stream in (False, True):
        openai_stub.enqueue(StubScript.text("It is 18°C in Paris."))
        completion = client.chat.completions.create(
            model="main-agent",
            messages=[
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": None, "tool_calls": [call]},  # type: ignore[list-item]
                RESULT,  # type: ignore[list-item]
            ],
            tools=[tool],  # type: ignore[list-item]
            stream=stream,
        )
        if stream:
            list(completion)  # type: ignore[call-overload]
        sent = openai_stub.requests[-1]["messages"]
        assert sent[-1] == RESULT
        assert [m["role"] for m in sent if m["role"] != "system"] == ["user", "assistant", "tool"]


def _ag_ui(base_url: str, thread: str, run: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    body = {
        "threadId": thread,
        "runId": run,
        "state": {},
        "messages": messages,
        "tools": [{k: v for k, v in WEATHER.items() if k != "type"}],
        "context": [],
        "forwardedProps": {},
    }
    url = base_url.removesuffix("/v1") + "/api/ag-ui"
    answer = httpx.post(url, json=body, headers={"Authorization": f"Bearer {USER}"}, timeout=30)
    assert answer.status_code == 200
    return events_in(answer.text)


def test_ag_ui_tool_message_is_the_last_message(openai_stub: OpenAiStub, base_url: str, context: AppContext) -> None:
    openai_stub.enqueue(StubScript.tool_calls([{"id": "call_w", "name": "get_weather", "arguments": {"city": "Rome"}}]))
    first = [{"id": "m1", "role": "user", "content": "Weather in Rome?"}]
    assert _ag_ui(base_url, "t-cont", "r-1", first)[-1]["type"] == "RUN_FINISHED"
    openai_stub.enqueue(StubScript.text("18°C in Rome."))
    call = {"id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}}
    second = [
        *first,
        {"id": "a1", "role": "assistant", "toolCalls": [call]},
        {"id": "t1", "role": "tool", "toolCallId": "call_w", "content": '{"temp": 18}'},
    ]
    events = _ag_ui(base_url, "t-cont", "r-2", second)
    assert events[-1]["type"] == "RUN_FINISHED"
    assert openai_stub.requests[-1]["messages"][-1] == RESULT
    chat_id = client_chat_id(USER, "t-cont")
    _assert_continued_cleanly(_stored(context, chat_id), _replay(base_url, chat_id), "Weather in Rome?")


@pytest.fixture
def bedrock_base_url(bedrock_stub: BedrockStub) -> Iterator[tuple[str, AppContext]]:
    settings = make_settings(AGENT_LLM_PROVIDER="bedrock", AGENT_MODEL="amazon.nova-pro-v1:0")
    context = build_context(settings, table=MemoryTable(), audit=lambda line: None)
    with serve(build_app(*routes.local, context=context)) as base:
        yield f"{base}/v1", context


def test_bedrock_ends_with_a_user_message_of_tool_results_only(
    bedrock_stub: BedrockStub, bedrock_base_url: tuple[str, AppContext]
) -> None:
    base_url, context = bedrock_base_url
    client = openai.OpenAI(base_url=base_url, api_key=USER, max_retries=0, timeout=30)
    bedrock_stub.enqueue(BedrockScript.tool_calls([{"id": "call_w", "name": "get_weather", "input": {"city": "Oslo"}}]))
    first = client.responses.create(model="main-agent", input="Weather in Oslo?", tools=[WEATHER])  # type: ignore[list-item]
    assert [o.type for o in first.output] == ["function_call"]
    bedrock_stub.enqueue(BedrockScript.text("It is 18°C in Oslo."))
    second = client.responses.create(
        model="main-agent",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": "call_w", "output": '{"temp": 18}'}],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert second.output_text == "It is 18°C in Oslo."
    last = bedrock_stub.requests[-1]["messages"][-1]
    assert last["role"] == "user"
    assert last["content"] == [{"toolResult": {"toolUseId": "call_w", "content": [{"text": '{"temp": 18}'}]}}]
    assert second.conversation is not None
    chat_id = second.conversation.id
    _assert_continued_cleanly(_stored(context, chat_id), _replay(base_url, chat_id), "Weather in Oslo?")


def test_a_continuation_does_not_route_the_old_question_again(
    client: openai.OpenAI, openai_stub: OpenAiStub, base_url: str
) -> None:
    # Given a question a quick rule answers (the time tool) that also needs the client's tool
    question = "what time is it in Tokyo? And the weather in Paris"
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "call_w", "name": "get_weather", "arguments": {"city": "Paris"}}])
    )
    first = client.responses.create(model="main-agent", input=question, tools=[WEATHER])  # type: ignore[list-item]
    assert [o.type for o in first.output] == ["mcp_call", "function_call"]  # the quick rule ran `time`
    # When the client answers its call
    openai_stub.enqueue(StubScript.text("Evening in Tokyo, 18°C in Paris."))
    second = client.responses.create(
        model="main-agent",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": "call_w", "output": '{"temp": 18}'}],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    # Then the run goes on with the model: the quick rule does not run `time` a second time
    assert [o.type for o in second.output] == ["message"]
    assert openai_stub.requests[-1]["messages"][-1] == RESULT
    assert second.conversation is not None
    routes = [e for e in _replay(base_url, second.conversation.id) if e["type"] == "run.route"]
    assert [r.get("matchedTools") for r in routes] == [["time"], None]


def test_a_stateless_tool_result_must_answer_a_call_in_the_request(
    client: openai.OpenAI, openai_stub: OpenAiStub
) -> None:
    # A tool result that follows no call would reach the model as nothing at all (no call, no user message)
    with pytest.raises(openai.BadRequestError) as completions:
        client.chat.completions.create(
            model="main-agent",
            messages=[{"role": "user", "content": "hi"}, RESULT],  # type: ignore[list-item]
        )
    assert completions.value.body["param"] == "messages" and "call_w" in completions.value.message  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as responses:
        client.responses.create(
            model="main-agent",
            store=False,
            input=[{"type": "function_call_output", "call_id": "call_w", "output": "{}"}],
        )
    assert responses.value.body["param"] == "input" and "call_w" in responses.value.message  # type: ignore[index]
    assert openai_stub.requests == []
