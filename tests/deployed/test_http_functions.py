"""chat, submit and data as deployed: API Gateway REST (payload 1.0) and Function URL (payload 2.0) events
through the Runtime API to processes started from the synthesized template, on the moto account."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import pytest

from agent_core.tools.data_path import data_key
from tests.support.deployed.gateway import function_url_body, rest_api_body
from tests.support.deployed.stack import LLM_API_KEY, DeployedStack
from tests.support.lambda_events import http_v2_event, rest_v1_event
from tests.support.openai_stub import StubScript

ALICE = {"X-User-Id": "alice"}
BOB = {"X-User-Id": "bob"}
CSV = "a,b\n1,2\n"
# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def _json(result: dict[str, Any]) -> Any:
    return json.loads(result["body"]) if result.get("body") else None


@pytest.fixture(scope="module")
def saved(stack: DeployedStack) -> dict[str, Any]:
    """alice's conversation (REST API) with one turn whose model calls save_file: the chat and the tool result."""
    chat = stack.function("chat")
    created = chat.invoke(rest_v1_event("POST", "/api/v1/conversations", {"title": "deployed"}, ALICE))
    assert created["statusCode"] == 201, created
    cid = _json(created)["conversationId"]
    args = {"name": "report.csv", "content": CSV, "mediaType": "text/csv"}
    stack.llm.enqueue(
        StubScript.tool_calls([{"id": "call_1", "name": "save_file", "arguments": args}]),
        StubScript.text("Saved ", "report.csv."),
    )
    before = len(stack.llm.requests)
    turn = chat.invoke(rest_v1_event("POST", f"/api/v1/conversations/{cid}/chat", {"message": "save it"}, ALICE))
    assert turn["statusCode"] == 200, turn
    requests = stack.llm.requests[before:]
    # The tool result the model was given holds the data link.
    tool_message = next(m for m in requests[-1]["messages"] if m["role"] == "tool")
    link = json.loads(tool_message["content"])["url"]
    return {"cid": cid, "turn": _json(turn), "llm_requests": requests, "before": before, "link": link}


def test_chat_turn_with_a_tool_call_uses_the_secret_key_and_the_template_model(
    stack: DeployedStack, saved: dict[str, Any]
) -> None:
    turn = saved["turn"]
    assert turn["assistantMessage"] == "Saved report.csv."
    (call,) = turn["toolCalls"]
    assert call["toolName"] == "save_file" and call["status"] == "ok", call
    assert saved["link"].split("?")[0].endswith("/api/ap/data")
    # The key came from the Secrets Manager secret the template names; the model from AGENT_MODEL.
    assert stack.llm.authorizations[saved["before"] :] == [f"Bearer {LLM_API_KEY}"] * 2
    model = stack.definition("chat").variables["AGENT_MODEL"]
    assert [r["model"] for r in saved["llm_requests"]] == [model, model]


def test_chat_lists_and_replays_through_the_function_url(stack: DeployedStack, saved: dict[str, Any]) -> None:
    chat = stack.function("chat")
    listed = chat.invoke(http_v2_event("GET", "/api/v1/conversations", None, {"x-user-id": "alice"}))
    assert listed["statusCode"] == 200
    assert saved["cid"] in [i["conversationId"] for i in _json(listed)["items"]]
    chats = chat.invoke(http_v2_event("GET", "/api/ap/chats", None, {"x-user-id": "alice"}))
    assert saved["cid"] in [i["chatId"] for i in _json(chats)["items"]]
    replay = chat.invoke(
        http_v2_event(
            "GET", "/api/ap/chat", None, {"x-user-id": "alice"}, f"chatId={saved['cid']}&includeRawMessages=true"
        )
    )
    assert replay["statusCode"] == 200, replay
    body = _json(replay)
    kinds = [e["type"] for e in body["events"]]
    assert "tool.result" in kinds and kinds[-1] == "run.complete", kinds
    assert [m["role"] for m in body["rawMessages"]] == ["user", "assistant", "tool", "assistant"]


def test_chat_refuses_a_foreign_user_and_bad_json(stack: DeployedStack, saved: dict[str, Any]) -> None:
    chat = stack.function("chat")
    foreign = chat.invoke(rest_v1_event("GET", f"/api/v1/conversations/{saved['cid']}", None, BOB))
    assert foreign["statusCode"] == 404 and _json(foreign)["error"]["code"] == "conversation_not_found"
    replay = chat.invoke(http_v2_event("GET", "/api/ap/chat", None, {"x-user-id": "bob"}, f"chatId={saved['cid']}"))
    assert replay["statusCode"] == 404
    event = rest_v1_event("POST", f"/api/v1/conversations/{saved['cid']}/chat", None, ALICE)
    event["body"] = '{"message": "unterminated'
    bad = chat.invoke(event)
    assert 400 <= bad["statusCode"] < 500 and set(_json(bad)["error"]) >= {"code", "message", "type", "param"}


def test_data_links_made_behind_the_rest_api_keep_its_stage(saved: dict[str, Any]) -> None:
    assert "/prod/api/ap/data?" in saved["link"], saved["link"]


def test_submit_answers_unmatched_and_refuses_bad_input(stack: DeployedStack) -> None:
    submit = stack.function("submit")
    body = {"runId": "r_unknown", "toolId": "call_x", "params": {"a": 1}}
    for event in (
        rest_v1_event("POST", "/api/ap/submit", body, ALICE),
        http_v2_event("POST", "/api/ap/submit", body, {"x-user-id": "alice"}),
    ):
        answer = submit.invoke(event)
        assert answer["statusCode"] == 200 and _json(answer) == {"accepted": False, "status": "unmatched"}
    bad = http_v2_event("POST", "/api/ap/submit", None, {"x-user-id": "alice"})
    bad["body"] = "{not json"
    refused = submit.invoke(bad)
    assert 400 <= refused["statusCode"] < 500 and "error" in _json(refused)


def _data(stack: DeployedStack, query: dict[str, str], headers: dict[str, str] | None = None, *, rest: bool) -> Any:
    data = stack.function("data")
    if rest:
        return data.invoke(rest_v1_event("GET", "/api/ap/data", None, headers or {}, query))
    raw = "&".join(f"{k}={v}" for k, v in query.items())
    return data.invoke(
        http_v2_event("GET", "/api/ap/data", None, {k.lower(): v for k, v in (headers or {}).items()}, raw)
    )


def _link_query(saved: dict[str, Any]) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(saved["link"]).query))


def test_data_serves_the_signed_link_the_owner_and_refuses_others(stack: DeployedStack, saved: dict[str, Any]) -> None:
    query = _link_query(saved)
    signed = _data(stack, query, rest=False)  # the link alone: no user header
    assert signed["statusCode"] == 200 and function_url_body(signed) == CSV.encode(), signed
    file = query["file"]
    owner = _data(stack, {"file": file}, ALICE, rest=True)
    assert owner["statusCode"] == 200 and owner["body"] == CSV
    stranger = _data(stack, {"file": file}, BOB, rest=True)
    assert stranger["statusCode"] == 404
    forged = _data(stack, {"file": file, "t": query["t"][:-4] + "AAAA"}, rest=False)
    assert forged["statusCode"] == 403 and _json(forged)["error"]["code"] == "data_token_invalid"
    traversal = _data(stack, {"file": "..%2f..%2fetc%2fpasswd"}, ALICE, rest=False)
    assert traversal["statusCode"] == 400


def _claims(link: str) -> dict[str, Any]:
    body = dict(parse_qsl(urlsplit(link).query))["t"].split(".")[1]
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    return claims


def test_replay_signs_the_stored_link_afresh_with_the_secret_key(stack: DeployedStack, saved: dict[str, Any]) -> None:
    # The chat function signs the replayed link (the Secrets Manager key); the data function accepts it
    chat = stack.function("chat")
    replay = chat.invoke(rest_v1_event("GET", "/api/ap/chat", None, ALICE, {"chatId": saved["cid"]}))
    assert replay["statusCode"] == 200, replay
    [result] = [e["result"] for e in _json(replay)["events"] if e["type"] == "tool.result"]
    link = result["url"]
    assert "/prod/api/ap/data?" in link and _claims(link)["exp"] >= _claims(saved["link"])["exp"]
    opened = _data(stack, dict(parse_qsl(urlsplit(link).query)), rest=False)  # the link alone: no user header
    assert opened["statusCode"] == 200 and function_url_body(opened) == CSV.encode(), opened


def test_data_shows_a_browser_a_page_for_a_refused_link(stack: DeployedStack, saved: dict[str, Any]) -> None:
    query = _link_query(saved)
    forged = {"file": query["file"], "t": query["t"][:-4] + "AAAA"}
    page = _data(stack, forged, {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}, rest=True)
    assert page["statusCode"] == 403 and page["headers"]["content-type"].startswith("text/html"), page
    assert "This link is not valid" in page["body"]


def test_data_redirects_a_large_file_to_a_presigned_url(stack: DeployedStack, saved: dict[str, Any]) -> None:
    big = b"x" * (4 * 1024 * 1024 + 1)
    bucket = stack.resource("StorageDataBucket")
    stack.account.client("s3").put_object(Bucket=bucket, Key=data_key(saved["cid"], "big.bin"), Body=big)
    moved = _data(stack, {"file": f"{saved['cid']}/big.bin"}, ALICE, rest=False)
    assert moved["statusCode"] == 302, moved
    # A GET of that object presigned by the data function's role (moto cannot authorise presigned URLs
    # under IAM enforcement, so the URL itself is checked).
    url = urlsplit(moved["headers"]["location"])
    query = dict(parse_qsl(url.query))
    assert f"{url.scheme}://{url.netloc}" == stack.proxy.url
    assert unquote(url.path) == f"/{bucket}/{data_key(saved['cid'], 'big.bin')}"
    data_key_id = stack.function("data").credentials.access_key
    assert query["X-Amz-Credential"].startswith(f"{data_key_id}/") and query["X-Amz-Expires"] == "60"
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256" and query["X-Amz-Signature"]


@pytest.fixture(scope="module")
def png_file(stack: DeployedStack, saved: dict[str, Any]) -> str:
    bucket = stack.resource("StorageDataBucket")
    key = data_key(saved["cid"], "chart.png")
    stack.account.client("s3").put_object(Bucket=bucket, Key=key, Body=PNG, ContentType="image/png")
    return f"{saved['cid']}/chart.png"


def test_data_serves_a_binary_file_through_the_function_url(stack: DeployedStack, png_file: str) -> None:
    result = _data(stack, {"file": png_file}, ALICE, rest=False)
    assert result["statusCode"] == 200 and result["isBase64Encoded"] is True
    assert function_url_body(result) == PNG


def test_data_serves_a_binary_file_through_the_rest_api(stack: DeployedStack, png_file: str) -> None:
    result = _data(stack, {"file": png_file}, {**ALICE, "Accept": "image/png"}, rest=True)
    assert result["statusCode"] == 200
    assert rest_api_body(result, stack.synthesis.template, accept="image/png") == PNG


def test_jwt_mode_verifies_tokens_with_the_templates_issuer_audience_and_jwks(stack: DeployedStack, jwks: Any) -> None:
    submit = stack.function("submit", "jwt")
    body = {"runId": "r_unknown", "toolId": "call_x", "params": {}}
    ok = submit.invoke(http_v2_event("POST", "/api/ap/submit", body, {"authorization": f"Bearer {jwks.token()}"}))
    assert ok["statusCode"] == 200 and _json(ok)["status"] == "unmatched"
    wrong_audience = jwks.token(aud="someone-else")
    refused = submit.invoke(
        http_v2_event("POST", "/api/ap/submit", body, {"authorization": f"Bearer {wrong_audience}"})
    )
    assert refused["statusCode"] == 401
    # ES256 in the header, the RSA key's kid: refused by the key's own algorithm, never a 500
    forged = jwks.token(jwks.ec_key, algorithm="ES256")
    mismatched = submit.invoke(http_v2_event("POST", "/api/ap/submit", body, {"authorization": f"Bearer {forged}"}))
    assert mismatched["statusCode"] == 401 and _json(mismatched)["error"]["code"] == "unauthorized"
    anonymous = submit.invoke(rest_v1_event("POST", "/api/ap/submit", body, ALICE))
    assert anonymous["statusCode"] == 401


def test_deleting_the_conversation_removes_its_files_and_links(stack: DeployedStack, saved: dict[str, Any]) -> None:
    gone = stack.function("chat").invoke(rest_v1_event("DELETE", f"/api/v1/conversations/{saved['cid']}", None, ALICE))
    assert gone["statusCode"] == 204, gone
    listed = stack.account.client("s3").list_objects_v2(Bucket=stack.resource("StorageDataBucket"), Prefix="data/")
    assert [o["Key"] for o in listed.get("Contents", []) if saved["cid"] in o["Key"]] == []
    signed = _data(stack, _link_query(saved), rest=False)
    assert signed["statusCode"] == 404


@pytest.fixture(scope="module")
def spilled(stack: DeployedStack) -> tuple[str, str]:
    """grace's conversation whose one run's replay snapshot was too large for its item: spilled to S3."""
    chat = stack.function("chat")
    grace = {"X-User-Id": "grace"}
    created = chat.invoke(rest_v1_event("POST", "/api/v1/conversations", {"title": "long answer"}, grace))
    cid = _json(created)["conversationId"]
    stack.llm.enqueue(StubScript.text(*(["All work and no play. " * 150] * 110)))
    turn = chat.invoke(rest_v1_event("POST", f"/api/v1/conversations/{cid}/chat", {"message": "write"}, grace))
    assert turn["statusCode"] == 200, turn
    bucket = stack.resource("StorageDataBucket")
    keys = [
        o["Key"]
        for o in stack.account.client("s3")
        .list_objects_v2(Bucket=bucket, Prefix=f"spill/CHAT/{cid}/")
        .get("Contents", [])
    ]
    if not keys:
        pytest.fail("the run's snapshot was not spilled to S3")
    return cid, bucket


def test_deleting_a_conversation_removes_its_spilled_snapshots(stack: DeployedStack, spilled: tuple[str, str]) -> None:
    cid, bucket = spilled
    gone = stack.function("chat").invoke(
        rest_v1_event("DELETE", f"/api/v1/conversations/{cid}", None, {"X-User-Id": "grace"})
    )
    assert gone["statusCode"] == 204, gone
    left = stack.account.client("s3").list_objects_v2(Bucket=bucket, Prefix=f"spill/CHAT/{cid}/").get("Contents", [])
    assert left == []


def test_the_profile_time_zone_is_set_through_the_rest_api_and_validated(stack: DeployedStack) -> None:
    chat, frank = stack.function("chat"), {"X-User-Id": "frank"}
    changed = chat.invoke(rest_v1_event("PATCH", "/api/ap/profile", {"timezone": "Europe/Paris"}, frank))
    assert changed["statusCode"] == 200, changed
    profile = _json(chat.invoke(rest_v1_event("GET", "/api/ap/profile", None, frank)))
    assert profile["timezone"] == "Europe/Paris"
    refused = chat.invoke(rest_v1_event("PATCH", "/api/ap/profile", {"timezone": "Mars/Olympus"}, frank))
    assert refused["statusCode"] == 400 and _json(refused)["error"]["code"] == "invalid_timezone"


def test_usage_shows_the_callers_runs_under_the_budgets_the_template_sets(
    stack: DeployedStack, saved: dict[str, Any]
) -> None:
    from tests.support.deployed.stack import USAGE_DAILY_COST_USD, USAGE_DAILY_TOKENS, USAGE_REQUESTS_PER_MINUTE

    chat = stack.function("chat")
    variables = stack.definition("chat").variables
    assert variables["AGENT_USAGE_DAILY_TOKEN_BUDGET"] == str(USAGE_DAILY_TOKENS)
    # alice's turn with a tool call (the `saved` fixture) is in her ledger, read through the REST API's route
    usage = chat.invoke(rest_v1_event("GET", "/api/ap/usage", None, ALICE))
    assert usage["statusCode"] == 200, usage
    report = _json(usage)
    runs = [row for row in report["items"] if row["runs"]]
    assert sum(row["runs"] for row in runs) >= 1 and sum(row["toolCalls"] for row in runs) >= 1
    # the template model's runs are there (other deployed cases, the Bedrock one among them, run as alice too)
    assert variables["AGENT_MODEL"] in {row["model"] for row in runs}
    budget = report["budget"]
    assert (budget["dailyTokens"], budget["requestsPerMinute"]) == (USAGE_DAILY_TOKENS, USAGE_REQUESTS_PER_MINUTE)
    assert budget["dailyCostUsd"] == USAGE_DAILY_COST_USD
    assert 0 < budget["remainingTokens"] < USAGE_DAILY_TOKENS
    assert 0 < budget["remainingCostUsd"] < USAGE_DAILY_COST_USD  # the template model is priced by default
    # A malformed range is a 422 with its code
    bad = chat.invoke(rest_v1_event("GET", "/api/ap/usage", None, ALICE, query={"from": "soon"}))
    assert bad["statusCode"] == 422 and _json(bad)["error"]["code"] == "invalid_date"
