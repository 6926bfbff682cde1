"""The chat function deployed with `llmProvider=bedrock`: the template's model and environment, boto3 signing
with the function role's credentials, ConverseStream answered by the loopback Bedrock Runtime."""

from __future__ import annotations

import json
from typing import Any

from tests.deployed.conftest import BEDROCK_MODEL
from tests.support.bedrock_stub import BedrockScript
from tests.support.deployed.stack import DeployedStack
from tests.support.lambda_events import rest_v1_event

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
