"""An emulation of the Lambda Web Adapter's documented contract (stdlib only; run as its own process).

What the adapter layer does for a function with `AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap`:
- the wrapper starts the function's handler script `${LAMBDA_TASK_ROOT}/${_HANDLER}` (here `run.sh`), which
  runs the web server on `AWS_LWA_PORT`/`PORT` (default 8080);
- the adapter polls the readiness check, `GET` on `AWS_LWA_READINESS_CHECK_PATH` (default `/`), until the app
  answers with any status below 500, and only then asks the Runtime API for the first invocation;
- each event (API Gateway REST payload 1.0, HTTP API / Function URL payload 2.0) becomes an HTTP request to the
  app; the event's `requestContext` travels as JSON in the `x-amzn-request-context` header (a client-sent one
  is dropped, as adapter >= 1.0 does) and the invocation context in `x-amzn-lambda-context`;
- with `AWS_LWA_INVOKE_MODE=response_stream` the response is streamed to the Runtime API as it is produced
  (`Lambda-Runtime-Function-Response-Mode: streaming`, a JSON prelude, eight NUL bytes, the body); otherwise
  it is returned as one proxy result (base64 for non-text bodies).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

PREFIX = "/2018-06-01/runtime"
TEXT_TYPES = ("text/", "application/json", "application/javascript", "application/xml", "application/x-ndjson")
DROPPED_CLIENT_HEADERS = ("x-amzn-request-context", "x-amzn-lambda-context")


def runtime_call(method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
    conn = http.client.HTTPConnection(os.environ["AWS_LAMBDA_RUNTIME_API"], timeout=None)
    conn.request(method, f"{PREFIX}{path}", body=body, headers=headers or {})
    return conn.getresponse()


def wait_ready(port: int, path: str, child: subprocess.Popen[bytes]) -> None:
    while True:
        if child.poll() is not None:
            error = {"errorType": "Runtime.ExitError", "errorMessage": f"handler exited with {child.returncode}"}
            runtime_call("POST", "/init/error", json.dumps(error)).read()
            sys.exit(1)
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            status = conn.getresponse().status
            conn.close()
            if status < 500:
                return
        except OSError:
            pass
        time.sleep(0.01)


def to_request(event: dict[str, Any], lambda_context: dict[str, Any]) -> tuple[str, str, dict[str, str], bytes]:
    """(method, target, headers, body) of the HTTP request an API Gateway / Function URL event stands for."""
    if event.get("version") == "2.0":
        method = event["requestContext"]["http"]["method"]
        target = event.get("rawPath", "/") + (f"?{event['rawQueryString']}" if event.get("rawQueryString") else "")
        headers = dict(event.get("headers") or {})
        if event.get("cookies"):
            headers["cookie"] = "; ".join(event["cookies"])
    else:
        method = event["httpMethod"]
        query = event.get("multiValueQueryStringParameters") or {}
        pairs = [(k, v) for k, values in query.items() for v in values] or list(
            (event.get("queryStringParameters") or {}).items()
        )
        target = event["path"] + (f"?{urlencode(pairs)}" if pairs else "")
        headers = {k: ", ".join(v) for k, v in (event.get("multiValueHeaders") or {}).items()} or dict(
            event.get("headers") or {}
        )
    headers = {k: v for k, v in headers.items() if k.lower() not in DROPPED_CLIENT_HEADERS}
    headers["x-amzn-request-context"] = json.dumps(event.get("requestContext") or {})
    headers["x-amzn-lambda-context"] = json.dumps(lambda_context)
    raw = event.get("body") or ""
    body = base64.b64decode(raw) if event.get("isBase64Encoded") else raw.encode()
    headers = {k: v for k, v in headers.items() if k.lower() not in ("content-length", "transfer-encoding")}
    headers["content-length"] = str(len(body))
    return method, target, headers, body


def _stream(prelude: dict[str, Any], response: http.client.HTTPResponse) -> Iterator[bytes]:
    yield json.dumps(prelude).encode() + b"\x00" * 8
    while True:
        piece = response.read1(65536)
        if not piece:
            return
        yield piece


def serve(port: int) -> None:
    streaming = os.environ.get("AWS_LWA_INVOKE_MODE", "buffered").lower() == "response_stream"
    while True:
        nxt = runtime_call("GET", "/invocation/next")
        event = json.loads(nxt.read())
        request_id = nxt.getheader("Lambda-Runtime-Aws-Request-Id")
        lambda_context = {
            "request_id": request_id,
            "deadline": int(nxt.getheader("Lambda-Runtime-Deadline-Ms") or 0),
            "invoked_function_arn": nxt.getheader("Lambda-Runtime-Invoked-Function-Arn"),
            "xray_trace_id": nxt.getheader("Lambda-Runtime-Trace-Id"),
            "env_config": {
                "function_name": os.environ.get("AWS_LAMBDA_FUNCTION_NAME"),
                "memory": int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE") or 0),
                "version": os.environ.get("AWS_LAMBDA_FUNCTION_VERSION"),
            },
        }
        try:
            method, target, headers, body = to_request(event, lambda_context)
            app = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
            app.request(method, target, body=body, headers=headers)
            response = app.getresponse()
        except Exception as exc:  # the app is gone or the event is not an HTTP one
            error = {"errorType": type(exc).__name__, "errorMessage": str(exc)}
            runtime_call("POST", f"/invocation/{request_id}/error", json.dumps(error)).read()
            continue
        out_headers: dict[str, str] = {}
        cookies: list[str] = []
        for name, value in response.getheaders():
            if name.lower() == "set-cookie":
                cookies.append(value)
            elif name.lower() not in ("transfer-encoding", "connection", "content-length"):
                out_headers[name.lower()] = value
        if streaming:
            prelude = {"statusCode": response.status, "headers": out_headers, "cookies": cookies}
            headers = {
                "Lambda-Runtime-Function-Response-Mode": "streaming",
                "Content-Type": "application/vnd.awslambda.http-integration-response",
            }
            conn = http.client.HTTPConnection(os.environ["AWS_LAMBDA_RUNTIME_API"], timeout=None)
            conn.request(
                "POST",
                f"{PREFIX}/invocation/{request_id}/response",
                body=_stream(prelude, response),
                headers=headers,
                encode_chunked=True,
            )
            conn.getresponse().read()
        else:
            data = response.read()
            textual = out_headers.get("content-type", "").startswith(TEXT_TYPES)
            result = {
                "statusCode": response.status,
                "headers": out_headers,
                "multiValueHeaders": {"set-cookie": cookies} if cookies else {},
                "body": data.decode() if textual else base64.b64encode(data).decode(),
                "isBase64Encoded": not textual,
            }
            runtime_call("POST", f"/invocation/{request_id}/response", json.dumps(result)).read()
        app.close()


def main() -> None:
    port = int(os.environ.get("AWS_LWA_PORT") or os.environ.get("PORT") or 8080)
    readiness = os.environ.get("AWS_LWA_READINESS_CHECK_PATH", "/")
    handler = os.path.join(os.environ["LAMBDA_TASK_ROOT"], os.environ["_HANDLER"])
    child = subprocess.Popen([handler])  # what /opt/bootstrap does: exec the handler script
    wait_ready(port, readiness, child)
    serve(port)


if __name__ == "__main__":
    main()
