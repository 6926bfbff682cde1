"""The chat function deployed with `guardrailId`: the template's guardrail settings, ApplyGuardrail signed with the
function role's credentials and answered by the loopback Bedrock Runtime, the message and the answer masked."""

from __future__ import annotations

import json
from typing import Any

from tests.deployed.conftest import GUARDRAIL
from tests.support.deployed.stack import DeployedStack
from tests.support.lambda_events import rest_v1_event
from tests.support.openai_stub import StubScript

ALICE = {"X-User-Id": "alice"}


def _json(result: dict[str, Any]) -> Any:
    return json.loads(result["body"]) if result.get("body") else None


def test_the_chat_function_masks_the_message_and_the_answer_through_bedrock(stack: DeployedStack) -> None:
    # Given the chat function of the guardrail variant: the guardrail's id, version and window from the template
    variables = stack.definition("chat", "guardrail").variables
    assert variables["AGENT_GUARDRAIL_ID"] == GUARDRAIL["guardrailId"]
    assert variables["AGENT_GUARDRAIL_VERSION"] == GUARDRAIL["guardrailVersion"]
    assert variables["AGENT_GUARDRAIL_HOLDBACK_CHARS"] == str(GUARDRAIL["guardrailHoldbackChars"])
    chat = stack.function("chat", "guardrail")
    created = chat.invoke(rest_v1_event("POST", "/api/v1/conversations", {"title": "guarded"}, ALICE))
    assert created["statusCode"] == 201, created
    cid = _json(created)["conversationId"]
    answer = ("Please write to our support desk, they answer within the day: ", "erin.fox@example.org", " thanks.")
    stack.llm.enqueue(StubScript.text(*answer, " " + "More words follow here to fill the window. " * 3))
    before, llm_before = len(stack.bedrock.guardrail_calls), len(stack.llm.requests)
    # When a turn runs with an e-mail address in the message and in the answer
    message = {"message": "I am gail.north@example.com, who do I write to?"}
    turn = chat.invoke(rest_v1_event("POST", f"/api/v1/conversations/{cid}/chat", message, ALICE))
    # Then the model saw the message masked and the caller got the answer masked (the stub anonymizes e-mails)
    assert turn["statusCode"] == 200, turn
    body = _json(turn)
    assert body["assistantMessage"].startswith(answer[0] + "{EMAIL} thanks.")
    assert "erin.fox" not in turn["body"]
    [sent] = stack.llm.requests[llm_before:]
    assert sent["messages"][-1]["content"] == "I am {EMAIL}, who do I write to?"
    calls = stack.bedrock.guardrail_calls[before:]
    assert {(c.guardrail_id, c.version) for c in calls} == {("gr7deployed", "4")}
    sources = [c.body["source"] for c in calls]
    # the input once; the answer in more than one piece: the 32-character window of the template, not the default
    assert sources[0] == "INPUT" and sources.count("OUTPUT") >= 2
    authorization = calls[0].headers["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256") and "/bedrock/aws4_request" in authorization
    assert "X-Amz-Security-Token" in calls[0].headers
    # and the stored chat holds the masked text only
    replay = chat.invoke(rest_v1_event("GET", "/api/ap/chat", None, ALICE, query={"chatId": cid}))
    assert replay["statusCode"] == 200 and "gail.north" not in replay["body"] and "erin.fox" not in replay["body"]
