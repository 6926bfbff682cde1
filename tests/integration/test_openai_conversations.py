"""OpenAI Conversations (our chats), identity and /v1/models, driven by the real openai SDK over loopback HTTP."""

from __future__ import annotations

import openai
import pytest

from agent_core.context import AppContext
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.responses_app import chat_messages


def test_conversations_are_our_chats(client: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    conversation = client.conversations.create(
        metadata={"topic": "demo"}, items=[{"type": "message", "role": "user", "content": "I like tea."}]
    )
    assert conversation.id.startswith("c_") and conversation.metadata == {"topic": "demo"}
    assert client.conversations.retrieve(conversation.id).metadata == {"topic": "demo"}
    openai_stub.enqueue(StubScript.text("Noted: tea."))
    response = client.responses.create(
        model="main-agent", input="What do I like?", conversation={"id": conversation.id}
    )
    assert response.conversation is not None and response.conversation.id == conversation.id
    assert ("user", "I like tea.") in chat_messages(openai_stub.requests[-1])
    items = client.conversations.items.list(conversation.id, order="asc").data
    texts = [(i.role, i.content[0].text) for i in items if i.type == "message"]  # type: ignore[union-attr]
    assert texts == [("user", "I like tea."), ("user", "What do I like?"), ("assistant", "Noted: tea.")]
    # A follow-up by previous_response_id stays in the same conversation
    openai_stub.enqueue(StubScript.text("Still tea."))
    follow = client.responses.create(model="main-agent", input="Sure?", previous_response_id=response.id)
    assert follow.conversation is not None and follow.conversation.id == conversation.id
    deleted = client.conversations.delete(conversation.id)
    assert deleted.deleted is True
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(conversation.id)


def test_a_foreign_caller_gets_not_found(client: openai.OpenAI, other: openai.OpenAI, openai_stub: OpenAiStub) -> None:
    openai_stub.enqueue(StubScript.text("mine"))
    mine = client.responses.create(model="main-agent", input="private")
    assert mine.conversation is not None
    for call in (
        lambda: other.responses.retrieve(mine.id),
        lambda: other.responses.input_items.list(mine.id),
        lambda: other.responses.delete(mine.id),
        lambda: other.conversations.retrieve(mine.conversation.id),  # type: ignore[union-attr]
        lambda: other.conversations.items.list(mine.conversation.id),  # type: ignore[union-attr]
    ):
        with pytest.raises(openai.NotFoundError):
            call()
    with pytest.raises(openai.BadRequestError) as error:
        other.responses.create(model="main-agent", input="x", previous_response_id=mine.id)
    assert error.value.code == "previous_response_not_found"
    with pytest.raises(openai.NotFoundError):
        other.responses.create(model="main-agent", input="x", conversation=mine.conversation.id)
    # The owner still has it; deleting makes it not found
    client.responses.delete(mine.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(mine.id)


def test_models_are_the_agents_and_the_configured_model(
    client: openai.OpenAI, openai_stub: OpenAiStub, context: AppContext
) -> None:
    ids = [m.id for m in client.models.list().data]
    assert "main-agent" in ids and context.settings.model in ids
    # The configured model runs the default agent with that model
    openai_stub.enqueue(StubScript.text("ok"))
    model = context.settings.model
    response = client.responses.create(model=model, input="hi")
    assert response.model == model and openai_stub.requests[-1]["model"] == model


@pytest.mark.parametrize("stream", [False, True])
def test_an_unknown_model_is_model_not_found_as_on_chat_completions(
    client: openai.OpenAI, openai_stub: OpenAiStub, stream: bool
) -> None:
    assert "my-llm-7b" not in [m.id for m in client.models.list().data]
    with pytest.raises(openai.NotFoundError) as responses:
        client.responses.create(model="my-llm-7b", input="hi", stream=stream)
    with pytest.raises(openai.NotFoundError) as completions:
        client.chat.completions.create(model="my-llm-7b", messages=[{"role": "user", "content": "hi"}], stream=stream)
    for error in (responses.value, completions.value):
        assert error.status_code == 404 and error.code == "model_not_found"
        assert error.body == {  # OpenAI's error shape (the SDK hands over the `error` object)
            "message": "model 'my-llm-7b' not found",
            "type": "invalid_request_error",
            "param": "model",
            "code": "model_not_found",
        }
    assert openai_stub.requests == []
