"""The chat function deployed with `llmProvider=bedrock`: the template's model and environment, boto3 signing
with the function role's credentials, ConverseStream answered by the loopback Bedrock Runtime."""

from __future__ import annotations

import json
from typing import Any

from tests.deployed.conftest import BEDROCK_MODEL, FALLBACK
from tests.support.bedrock_stub import BedrockScript
from tests.support.deployed.stack import LLM_API_KEY, DeployedStack
from tests.support.lambda_events import rest_v1_event
from tests.support.openai_stub import StubScript

ALICE = {"X-User-Id": "alice"}


def _json(result: dict[str, Any]) -> Any:
    return json.loads(result["body"]) if result.get("body") else None


def test_the_chat_function_answers_on_bedrock_with_a_tool_call(stack: DeployedStack) -> None:
    # Given the chat function of the bedrock variant: no API-key secret, the provider and model from the template
    variables = stack.definition("chat", "bedrock").variables
    assert variables["AGENT_LLM_PROVIDER"] == "bedrock" and variables["AGENT_MODEL"] == BEDROCK_MODEL
    assert "AGENT_LLM_API_KEY_SECRET" not in variables
    chat = stack.function("chat", "bedrock")
    created = chat.invoke(rest_v1_event("POST", "/api/v1/conversations", {"title": "bedrock"}, ALICE))
    assert created["statusCode"] == 201, created
    cid = _json(created)["conversationId"]
    stack.bedrock.enqueue(
        BedrockScript.tool_calls([{"id": "tu_1", "name": "time", "input": {"timezone": "UTC"}}]),
        BedrockScript.text("Answered ", "on Bedrock.", usage=(50, 6, 40, 0)),
    )
    before, openai_before = len(stack.bedrock.calls), len(stack.llm.requests)
    # When a turn runs
    turn = chat.invoke(rest_v1_event("POST", f"/api/v1/conversations/{cid}/chat", {"message": "clock?"}, ALICE))
    # Then the model answered through ConverseStream, after the tool ran
    assert turn["statusCode"] == 200, turn
    body = _json(turn)
    assert body["assistantMessage"] == "Answered on Bedrock."
    assert [(c["id"], c["status"]) for c in body["toolCalls"]] == [("tu_1", "ok")]
    calls = stack.bedrock.calls[before:]
    assert [c.model_id for c in calls] == [BEDROCK_MODEL, BEDROCK_MODEL]
    assert len(stack.llm.requests) == openai_before, "the OpenAI-compatible stub was not called"
    # signed with the function role's temporary credentials (SigV4 for bedrock in the function's Region)
    authorization = calls[0].headers["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256") and "/bedrock/aws4_request" in authorization
    assert "X-Amz-Security-Token" in calls[0].headers
    results = [
        b["toolResult"]["toolUseId"] for m in calls[1].body["messages"] for b in m["content"] if "toolResult" in b
    ]
    assert results == ["tu_1"]


def test_access_denied_on_bedrock_falls_back_to_the_openai_model(stack: DeployedStack) -> None:
    # Given the fallback variant: Bedrock first, then the OpenAI-compatible model with the secret's key
    variables = stack.definition("chat", "fallback").variables
    assert variables["AGENT_LLM_FALLBACK"] == FALLBACK and "AGENT_LLM_API_KEY_SECRET" in variables
    chat = stack.function("chat", "fallback")
    created = chat.invoke(rest_v1_event("POST", "/api/v1/conversations", {"title": "fallback"}, ALICE))
    cid = _json(created)["conversationId"]
    # When Bedrock refuses the model (no model access) before any output
    stack.bedrock.enqueue(BedrockScript.error(403, "AccessDeniedException", "You don't have access to the model"))
    stack.llm.enqueue(StubScript.text("From ", "the fallback."))
    before, openai_before = len(stack.bedrock.calls), len(stack.llm.requests)
    turn = chat.invoke(rest_v1_event("POST", f"/api/v1/conversations/{cid}/chat", {"message": "hello"}, ALICE))
    # Then the fallback model answered, called with its own model name and the key from the secret
    assert turn["statusCode"] == 200, turn
    assert _json(turn)["assistantMessage"] == "From the fallback."
    assert len(stack.bedrock.calls) == before + 1, "access denied is not retried"
    assert [r["model"] for r in stack.llm.requests[openai_before:]] == ["gpt-4.1-mini"]
    assert stack.llm.authorizations[openai_before:] == [f"Bearer {LLM_API_KEY}"]
