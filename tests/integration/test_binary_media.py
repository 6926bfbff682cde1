"""What the REST API's binary media type `*/*` (infra/components/api.py) means for the buffered functions.

API Gateway then hands every request body to the function base64-encoded, and decodes a response for the
client only when the function marks it `isBase64Encoded`: the functions must decode bodies, mark binary
files, and leave text as text.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import boto3

from agent_core.domain.ids import new_chat_id
from agent_core.tools.data_path import data_file, data_key
from agent_core.tools.data_token import sign_data_token
from tests.integration.test_function_entrypoints import _fresh
from tests.support.lambda_events import FakeLambdaContext, rest_v1_event

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
BUCKET = "agent-core-test-data"  # lambda_env's AGENT_DATA_BUCKET
TOKEN_KEY = "test-secret-data-link-key-32-bytes"  # lambda_env's AGENT_DATA_TOKEN_SECRET


def _as_api_gateway_sends_it(event: dict[str, Any]) -> dict[str, Any]:
    """The event with its body base64-encoded, as the REST API sends any body when every type is binary."""
    body = event["body"] or ""
    return {**event, "body": base64.b64encode(body.encode()).decode(), "isBase64Encoded": True}


def _data_event(chat_id: str, name: str) -> dict[str, Any]:
    file = data_file(chat_id, name)
    token = sign_data_token(TOKEN_KEY, chat_id, file, 300, time.time())
    # A browser's <img> request: its first Accept type is not image/png.
    headers = {"Accept": "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"}
    return rest_v1_event("GET", "/api/ap/data", None, headers, {"file": file, "t": token})


def test_a_base64_encoded_json_body_reaches_the_route(lambda_env: None) -> None:
    from functions.submit import handler as submit_module

    submit = _fresh(submit_module)
    event = rest_v1_event("POST", "/api/ap/submit", {"runId": "r1", "toolId": "t1", "params": {}}, {"X-User-Id": "u1"})
    answer = submit(_as_api_gateway_sends_it(event), FakeLambdaContext())
    assert answer["statusCode"] == 200, answer  # parsed (a body left encoded would be a 422)
    assert json.loads(answer["body"]) == {"accepted": False, "status": "unmatched"}
    assert answer["isBase64Encoded"] is False  # JSON stays text: API Gateway passes it through as is


def test_a_png_is_marked_binary_and_text_files_stay_text(lambda_env: None) -> None:
    from functions.data import handler as data_module

    chat_id = new_chat_id()
    s3 = boto3.client("s3")
    s3.put_object(Bucket=BUCKET, Key=data_key(chat_id, "chart.png"), Body=PNG, ContentType="image/png")
    s3.put_object(Bucket=BUCKET, Key=data_key(chat_id, "a.csv"), Body=b"x,y\n1,2\n", ContentType="text/csv")
    data = _fresh(data_module)

    png = data(_data_event(chat_id, "chart.png"), FakeLambdaContext())
    assert png["statusCode"] == 200, png
    assert png["headers"]["content-type"] == "image/png"
    assert png["isBase64Encoded"] is True  # decoded to bytes by the REST API (binary media type */*)
    assert base64.b64decode(png["body"]) == PNG

    csv = data(_data_event(chat_id, "a.csv"), FakeLambdaContext())
    assert csv["statusCode"] == 200, csv
    assert csv["isBase64Encoded"] is False and csv["body"] == "x,y\n1,2\n"
