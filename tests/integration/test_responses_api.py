"""The OpenAI Responses API, driven by the real openai SDK over loopback HTTP (see tests/support/responses_app.py)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import openai
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.llm.openai_client import OpenAiLlmClient
from agent_core.runtime.interrupted import INTERRUPTED_MESSAGE, settle_interrupted_run
from agent_core.store.dynamodb import DynamoTable
from tests.support.faults import FaultPlan
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.openai_wire import WireCheck
from tests.support.responses_app import chat_messages, table_items, wait_status
from tests.support.server import serve

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TERMINAL = {"response.completed", "response.failed", "response.incomplete"}


# ----- blocking and streaming -----


def test_blocking_text_is_the_aggregated_response(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    # Given a model answering in two deltas
    openai_stub.enqueue(StubScript.text("Hello ", "world"))
    # When a blocking response is created with instructions and sampling options
    response = client.responses.create(
        model="main-agent",
        input="Say hello",
        instructions="Answer briefly.",
        temperature=0.2,
        max_output_tokens=50,
        metadata={"ticket": "42"},
    )
    # Then the Response object is complete
    assert response.id.startswith("resp_") and response.object == "response"
    assert response.status == "completed" and response.output_text == "Hello world"
    assert response.model == "main-agent" and response.conversation is not None
    assert response.metadata == {"ticket": "42"} and response.instructions == "Answer briefly."
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (11, 7, 18)
    [message] = response.output
    assert message.type == "message" and message.status == "completed" and message.role == "assistant"
    # And the instructions, temperature and token limit reached the model
    sent = openai_stub.requests[-1]
    assert ("system", "Answer briefly.") in chat_messages(sent) and chat_messages(sent)[-1] == ("user", "Say hello")
    assert sent["temperature"] == 0.2 and sent["max_tokens"] == 50
    # And retrieval returns the same object; its input items are listed
    again = client.responses.retrieve(response.id)
    assert again.model_dump() == response.model_dump()
    [item] = client.responses.input_items.list(response.id).data
    assert item.type == "message" and item.role == "user"


def test_create_stream_true_follows_the_event_grammar(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("One ", "two ", "three", reasoning=["Let me ", "think"]))
    events = list(client.responses.create(model="main-agent", input="Count", stream=True))
    types = [e.type for e in events]
    # One Response per stream: created first, one terminal event last, sequence numbers strictly increasing
    assert types[:2] == ["response.created", "response.in_progress"] and types[-1] == "response.completed"
    assert sum(t in TERMINAL for t in types) == 1
    assert [e.sequence_number for e in events] == list(range(len(events)))
    # Reasoning, then the message, each added before its deltas and done after them
    assert types[2:] == [
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert deltas == ["One ", "two ", "three"], "one delta per upstream delta"
    done = next(e for e in events if e.type == "response.output_text.done")
    assert done.text == "One two three" and done.output_index == 1
    completed = events[-1].response
    assert [o.type for o in completed.output] == ["reasoning", "message"]
    assert completed.output_text == "One two three" and completed.usage is not None


def test_stream_helper_and_final_response(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("Streamed ", "answer"))
    with client.responses.stream(model="main-agent", input="Stream it") as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert text == "Streamed answer" and final.output_text == text and final.status == "completed"
    # A stored response replays through the same helper (snapshot granularity)
    with client.responses.stream(response_id=final.id) as replay:
        assert replay.get_final_response().output_text == text


# ----- tools -----


def test_server_side_tool_is_an_mcp_call_inside_the_run(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    # Given a model that calls the built-in `time` tool, then answers
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "call_t", "name": "time", "arguments": {"timezone": "Asia/Tokyo"}}]),
        StubScript.text("It is evening in Tokyo."),
    )
    with client.responses.stream(model="main-agent", input="Tokyo clock, please") as stream:
        types = [e.type for e in stream]
        final = stream.get_final_response()
    # Then the tool ran server-side as an mcp_call (never a function_call); output_index keeps growing
    assert [o.type for o in final.output] == ["mcp_call", "message"]
    call = final.output[0]
    assert call.type == "mcp_call" and call.name == "time" and call.server_label == "main-agent"
    assert call.arguments == '{"timezone": "Asia/Tokyo"}' and call.status == "completed" and call.error is None
    assert call.output is not None and "Asia/Tokyo" in call.output
    for kind in ("mcp_call.in_progress", "mcp_call_arguments.delta", "mcp_call_arguments.done", "mcp_call.completed"):
        assert f"response.{kind}" in types
    assert "response.function_call_arguments.delta" not in types
    assert final.output_text == "It is evening in Tokyo."
    # And the model saw the tool result in the same run; the conversation lists the call as an mcp_call
    assert openai_stub.requests[-1]["messages"][-1]["role"] == "tool"
    assert final.conversation is not None
    items = client.conversations.items.list(final.conversation.id, order="asc").data
    assert [i.type for i in items] == ["message", "mcp_call", "message"]


def test_client_function_tool_round_trip(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    # Given a model that calls the client's function
    openai_stub.enqueue(
        StubScript.tool_calls([{"id": "call_w", "name": "get_weather", "arguments": {"city": "Paris"}}]),
    )
    first = client.responses.create(model="main-agent", input="Weather in Paris?", tools=[WEATHER_TOOL])
    # Then the response ends with the function_call (status completed): nothing ran server-side
    assert first.status == "completed" and len(openai_stub.requests) == 1
    [call] = first.output
    assert call.type == "function_call" and call.call_id == "call_w" and call.name == "get_weather"
    assert call.arguments == '{"city": "Paris"}'
    declared = [t["function"]["name"] for t in openai_stub.requests[0]["tools"]]
    assert "get_weather" in declared and "ask_user" not in declared, "browser tools are not offered to API clients"
    # When the client returns the output, continuing the previous response
    openai_stub.enqueue(StubScript.text("It is 18°C in Paris."))
    second = client.responses.create(
        model="main-agent",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": "call_w", "output": '{"temp": 18}'}],
        tools=[WEATHER_TOOL],
    )
    # Then the model sees its call and the output, and answers in the same conversation
    assert second.output_text == "It is 18°C in Paris." and second.previous_response_id == first.id
    assert second.conversation is not None and first.conversation is not None
    assert second.conversation.id == first.conversation.id
    sent = openai_stub.requests[-1]["messages"]
    assistant = next(m for m in sent if m.get("tool_calls"))
    assert assistant["tool_calls"][0]["id"] == "call_w"
    assert {"role": "tool", "tool_call_id": "call_w", "content": '{"temp": 18}'} in sent
    # And the conversation lists call, output and answer (no marker message)
    items = client.conversations.items.list(first.conversation.id, order="asc").data
    assert [i.type for i in items] == ["message", "function_call", "function_call_output", "message"]
    assert [getattr(i, "role", None) for i in items] == ["user", None, None, "assistant"]


def test_a_step_calling_a_server_tool_and_a_client_tool_runs_the_server_one(
    client: openai.OpenAI, openai_stub: OpenAiStub
) -> None:
    openai_stub.enqueue(
        StubScript.tool_calls(
            [
                {"id": "call_t", "name": "time", "arguments": {"timezone": "UTC"}},
                {"id": "call_w", "name": "get_weather", "arguments": {"city": "Oslo"}},
            ]
        )
    )
    response = client.responses.create(model="main-agent", input="Time and weather in Oslo", tools=[WEATHER_TOOL])
    assert [o.type for o in response.output] == ["mcp_call", "function_call"]
    assert response.output[0].status == "completed" and len(openai_stub.requests) == 1
    # Continuing without the owed output is refused
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="main-agent", previous_response_id=response.id, input="and now?")
    assert "call_w" in refused.value.message


def test_tool_choice_none_offers_no_tools(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("No tools needed."))
    response = client.responses.create(model="main-agent", input="hi", tools=[WEATHER_TOOL], tool_choice="none")
    assert response.tool_choice == "none" and [t.name for t in response.tools] == ["get_weather"]  # type: ignore[union-attr]
    assert "tools" not in openai_stub.requests[-1]


def test_a_failed_run_ends_with_error_and_response_failed(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.error(400, "model refuses"), StubScript.error(400, "model refuses"))
    events = list(client.responses.create(model="main-agent", input="fail", stream=True))
    assert [e.type for e in events][-2:] == ["error", "response.failed"]
    failed = events[-1].response
    assert failed.status == "failed" and failed.error is not None and "llm_unavailable" in failed.error.message
    # Blocking: an error status with a stable code in OpenAI's error shape, never a 200; the Response is
    # kept `failed` with its error
    with pytest.raises(openai.InternalServerError) as error:
        client.responses.create(model="main-agent", input="fail again")
    assert error.value.status_code == 502 and error.value.code == "llm_unavailable"
    assert error.value.type == "server_error"
    assert _stored_statuses().count("failed") == 2


def test_the_sdk_does_not_retry_a_failed_stored_response(base_url: str, openai_stub: OpenAiStub) -> None:
    """Its question is stored (and a conversation's would be asked twice): the answer says x-should-retry: false."""
    eager = openai.OpenAI(base_url=base_url, api_key="user-a", max_retries=2, timeout=30)
    before = _stored_statuses().count("failed")
    openai_stub.enqueue(*[StubScript.error(400, "model refuses")] * 6)
    with pytest.raises(openai.InternalServerError) as error:
        eager.responses.create(model="main-agent", input="fail once only")
    assert error.value.status_code == 502 and error.value.response.headers["x-should-retry"] == "false"
    assert _stored_statuses().count("failed") == before + 1, "one Response: the SDK did not retry"


def _stored_statuses() -> list[str]:
    """The statuses of the stored Responses (tests only: no request path scans)."""
    scan = boto3.client("dynamodb", region_name="us-east-1").scan(TableName=make_settings().table_name)
    return [i["status"]["S"] for i in scan["Items"] if i["pk"]["S"].startswith("RESP#")]


@contextlib.contextmanager
def _app_client(openai_stub: OpenAiStub, moto_table: DynamoTable, **env: str) -> Iterator[openai.OpenAI]:
    """The stream function's routes on their own server, with these settings."""
    settings = make_settings(
        AGENT_LLM_PROVIDER="openai", OPENAI_BASE_URL=openai_stub.base_url, OPENAI_API_KEY="sk-t", **env
    )
    context = build_context(settings, table=moto_table, llm=OpenAiLlmClient(settings), audit=lambda line: None)
    checked = WireCheck(build_app(*routes.stream_routes, context=context))
    with serve(checked) as base:
        yield openai.OpenAI(base_url=f"{base}/v1", api_key="user-a", max_retries=0, timeout=30)
    assert checked.errors == [], "\n\n".join(checked.errors)


WRITE_ATTEMPTS = 5  # AGENT_STORE_WRITE_ATTEMPTS' default: a lasting fault outlives every retry
HANG = threading.Event()  # never set while the test runs: the model stalls after its first chunk


def test_blocking_responses_and_chat_completions_have_the_turn_deadline_and_answer_504(
    openai_stub: OpenAiStub, moto_table: DynamoTable
) -> None:
    # The stream deadline (14 minutes by default) is far beyond the client's 30 s timeout: only the turn
    # deadline can end this run in time
    openai_stub.enqueue(StubScript.text("thinking", " forever", gate=HANG))
    try:
        with _app_client(openai_stub, moto_table, AGENT_TURN_DEADLINE_MS="300") as client:
            conversation = client.conversations.create().id
            with pytest.raises(openai.InternalServerError) as error:
                client.responses.create(model="main-agent", input="think hard", conversation=conversation)
            assert error.value.status_code == 504 and error.value.code == "deadline_exceeded"
            assert _stored_statuses() == ["failed"]
            # A buffered Chat Completion has the same deadline
            HANG.set()  # the stalled handler thread finishes
            HANG.clear()
            openai_stub.discard_pending()  # the deadline may have passed before the request reached the stub
            openai_stub.enqueue(StubScript.text("thinking", " forever", gate=HANG))
            with pytest.raises(openai.InternalServerError) as error:
                client.chat.completions.create(model="main-agent", messages=[{"role": "user", "content": "hm?"}])
            assert error.value.status_code == 504 and error.value.code == "deadline_exceeded"
            # The conversation's lease was released: its next turn runs at once
            openai_stub.discard_pending()
            after = client.responses.create(model="main-agent", input="and now?", conversation=conversation)
            assert after.status == "completed"
    finally:
        HANG.set()  # release the stub's stalled handler thread
        HANG.clear()


def test_a_blocking_response_whose_end_cannot_be_stored_answers_503_with_retry_after(
    openai_stub: OpenAiStub, moto_table: DynamoTable
) -> None:
    ddb = moto_table._client_factory()
    with _app_client(openai_stub, moto_table, AGENT_STORE_RETRY_BASE_MS="1") as client:
        # A clean blocking response, to number its storage calls (after a first one, which also reads the
        # user's usage limits, cached from then on): the last transaction but one is its end, the last the
        # usage ledger's record, written after the answer
        assert client.responses.create(model="main-agent", input="store this").status == "completed"
        recorded = FaultPlan().install(ddb)
        assert client.responses.create(model="main-agent", input="store this").status == "completed"
        recorded.uninstall()
        transactions = [n for n, call in enumerate(recorded.calls, start=1) if call.operation == "TransactWriteItems"]
        last = transactions[-2]
        # The same request whose end (answer, run record, lease release) fails through every retry
        plan = FaultPlan(kind="server_error", at=last, times=WRITE_ATTEMPTS).install(ddb)
        try:
            with pytest.raises(openai.InternalServerError) as error:
                client.responses.create(model="main-agent", input="store this")
        finally:
            plan.uninstall()
        assert len(plan.injected) == WRITE_ATTEMPTS, plan.injected
        assert error.value.status_code == 503 and error.value.code == "service_unavailable"
        assert error.value.response.headers["retry-after"] == "1"
        assert _stored_statuses().count("failed") == 1


# ----- store:false -----


def test_store_false_writes_nothing_and_is_not_retrievable(
    client: openai.OpenAI, openai_stub: OpenAiStub, context: AppContext
) -> None:
    before = table_items(context)
    openai_stub.enqueue(
        StubScript.text("Stateless."),
        StubScript.tool_calls([{"id": "call_t", "name": "time", "arguments": {"timezone": "UTC"}}]),
        StubScript.text("Done."),
    )
    blocking = client.responses.create(model="main-agent", input="hi", store=False)
    with client.responses.stream(model="main-agent", input="time?", store=False) as stream:
        streamed = stream.get_final_response()
    assert blocking.output_text == "Stateless." and blocking.conversation is None
    assert [o.type for o in streamed.output] == ["mcp_call", "message"]
    # A stateless client carries the history itself
    openai_stub.enqueue(StubScript.text("You said hi."))
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Stateless."},
        {"role": "user", "content": "what did I say?"},
    ]
    carried = client.responses.create(model="main-agent", input=history, store=False)  # type: ignore[arg-type]
    assert carried.output_text == "You said hi."
    assert chat_messages(openai_stub.requests[-1])[-3:] == [
        ("user", "hi"),
        ("assistant", "Stateless."),
        ("user", "what did I say?"),
    ]
    assert table_items(context) == before, "store:false wrote to the table"
    for response in (blocking, streamed, carried):
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(response.id)


# ----- rules -----


@pytest.mark.parametrize(
    ("params", "param", "code"),
    [
        ({"previous_response_id": "resp_x", "conversation": "c_x"}, "previous_response_id", "invalid_request"),
        ({"store": False, "previous_response_id": "resp_x"}, "previous_response_id", "invalid_request"),
        ({"store": False, "conversation": "c_x"}, "conversation", "invalid_request"),
        ({"store": False, "background": True}, "background", "invalid_request"),
        ({"previous_response_id": "resp_unknown"}, "previous_response_id", "previous_response_not_found"),
        ({"input": openai.omit}, "input", "invalid_request"),
        ({"input": "   "}, "input", "blank_message"),
        ({"tools": [{"type": "web_search"}]}, "tools.0.type", "invalid_request"),
        ({"input": [{"role": "assistant", "content": "no question"}]}, "input", "invalid_request"),
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type", "invalid_request"),
        ({"temperature": 5}, "temperature", "invalid_request"),
    ],
)
def test_parameter_rules_are_bad_requests(
    client: openai.OpenAI, openai_stub: OpenAiStub, params: dict[str, Any], param: str, code: str
) -> None:
    body: dict[str, Any] = {"model": "main-agent", "input": "hi", **params}
    with pytest.raises(openai.BadRequestError) as error:
        client.responses.create(**body)
    assert error.value.status_code == 400 and error.value.code == code
    assert error.value.body["type"] == "invalid_request_error" and error.value.body["param"] == param  # type: ignore[index]
    assert openai_stub.requests == [], "rejected before any model call"


# ----- background -----


def test_background_is_queued_then_polled_to_completion(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    gate = threading.Event()
    openai_stub.enqueue(StubScript.text("Background ", "answer", gate=gate))
    queued = client.responses.create(model="main-agent", input="Work on this", background=True)
    assert queued.status == "queued" and queued.background is True and queued.output == []
    running = wait_status(client, queued.id, {"in_progress"})
    assert running.status == "in_progress"
    with pytest.raises(openai.ConflictError):  # its chat is busy until it ends
        client.responses.create(model="main-agent", input="more", previous_response_id=queued.id)
    gate.set()
    done = wait_status(client, queued.id, {"completed", "failed"})
    assert done.status == "completed" and done.output_text == "Background answer"
    assert done.usage is not None and done.usage.total_tokens == 18


def test_a_response_whose_run_was_interrupted_reads_failed_with_the_error(
    client: openai.OpenAI, openai_stub: OpenAiStub, context: AppContext
) -> None:
    gate = threading.Event()
    openai_stub.enqueue(StubScript.text("Late ", "answer", gate=gate))
    try:
        queued = client.responses.create(model="main-agent", input="Long job", background=True)
        wait_status(client, queued.id, {"in_progress"})
        # Given its run settled `interrupted`, as after its process died (the idle pass, a turn taking the lease)
        record = asyncio.run(context.responses.load(queued.id))
        assert record is not None and record.chat_id and record.run_id
        at_ms = int(time.time() * 1000)
        assert asyncio.run(settle_interrupted_run(context.deps.turns, record.chat_id, record.run_id, at_ms))
        # Then retrieving it reads `failed` with the run's error, as any failed Response (it read in_progress)
        failed = client.responses.retrieve(queued.id)
        assert failed.status == "failed" and failed.error is not None
        assert failed.error.message == f"[interrupted] {INTERRUPTED_MESSAGE}"
        assert failed.completed_at == at_ms // 1000
    finally:
        gate.set()
    # Nothing was written: a run settled while it was in fact alive still stores its Response when it ends
    done = wait_status(client, queued.id, {"completed"})
    assert done.output_text == "Late answer"


def test_background_cancel_keeps_what_streamed_and_ends_cancelled(
    client: openai.OpenAI, openai_stub: OpenAiStub
) -> None:
    gate = threading.Event()
    openai_stub.enqueue(StubScript.text("Partial ", "never sent", gate=gate))
    try:
        queued = client.responses.create(model="main-agent", input="Long job", background=True)
        wait_status(client, queued.id, {"in_progress"})
        cancelled = client.responses.cancel(queued.id)
        assert cancelled.status == "cancelled"
        assert client.responses.retrieve(queued.id).status == "cancelled"
    finally:
        gate.set()
    # Cancelling a response that did not run in the background is refused
    openai_stub.enqueue(StubScript.text("now"))
    foreground = client.responses.create(model="main-agent", input="quick")
    with pytest.raises(openai.BadRequestError):
        client.responses.cancel(foreground.id)


def test_background_stream_follows_the_run(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("Followed ", "live"))
    with client.responses.stream(model="main-agent", input="bg stream", background=True) as stream:
        final = stream.get_final_response()
    assert final.output_text == "Followed live" and final.background is True
    assert client.responses.retrieve(final.id).status == "completed"


def test_in_lambda_a_background_response_is_a_job_for_the_worker(
    openai_stub: OpenAiStub, moto_table: DynamoTable
) -> None:
    # Nothing runs after a Lambda response ends: the request answers `queued` and a ResponseJob goes on the
    # work queue (here the in-process queue stands in for SQS; the worker runs the same job map).
    settings = make_settings(
        AGENT_LLM_PROVIDER="openai",
        OPENAI_BASE_URL=openai_stub.base_url,
        OPENAI_API_KEY="sk-t",
        AWS_LAMBDA_FUNCTION_NAME="agent-core-stream",
    )
    context = build_context(settings, table=moto_table, llm=OpenAiLlmClient(settings), audit=lambda line: None)
    openai_stub.enqueue(StubScript.text("Done in Lambda."))
    with serve(build_app(*routes.stream_routes, context=context)) as base:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="user-a", max_retries=0, timeout=30)
        response = client.responses.create(model="main-agent", input="bg", background=True)
        assert response.status == "queued"
        final = wait_status(client, response.id, {"completed", "failed", "cancelled"})
    assert final.status == "completed" and final.output_text == "Done in Lambda."
