"""What a client receives from a function's proxy result, through each front door of the template.

- REST API (Lambda proxy): a base64 body (`isBase64Encoded`) reaches the client as bytes only when the API's
  `BinaryMediaTypes` match the request's `Accept` or the response's `Content-Type`; otherwise API Gateway passes
  the base64 text through.
- Function URL: a base64 body is always decoded.
"""

from __future__ import annotations

import base64
import fnmatch
from typing import Any


def binary_media_types(template: dict[str, Any]) -> list[str]:
    apis = [r for r in template["Resources"].values() if r["Type"] == "AWS::ApiGateway::RestApi"]
    return [str(t).replace("~1", "/") for api in apis for t in api["Properties"].get("BinaryMediaTypes", [])]


def _header(result: dict[str, Any], name: str) -> str:
    return next((str(v) for k, v in (result.get("headers") or {}).items() if k.lower() == name), "")


def rest_api_body(result: dict[str, Any], template: dict[str, Any], accept: str = "") -> bytes:
    body = str(result.get("body") or "")
    if not result.get("isBase64Encoded"):
        return body.encode()
    candidates = [accept.split(",")[0].strip(), _header(result, "content-type").split(";")[0].strip()]
    if any(c and fnmatch.fnmatch(c, pattern) for pattern in binary_media_types(template) for c in candidates):
        return base64.b64decode(body)
    return body.encode()


def function_url_body(result: dict[str, Any]) -> bytes:
    body = str(result.get("body") or "")
    return base64.b64decode(body) if result.get("isBase64Encoded") else body.encode()
