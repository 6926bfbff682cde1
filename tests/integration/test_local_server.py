"""`agent-core serve` started as a subprocess (embedded moto storage, offline model) and called over HTTP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _call(base: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        base + path, data=data, method=method, headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def server() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_", "AWS_"))}
    process = subprocess.Popen(
        [sys.executable, "-m", "agent_core.cli", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    banner = process.stdout.readline()  # printed once storage is up, before the socket opens
    assert f"127.0.0.1:{port}" in banner, banner
    base = f"http://127.0.0.1:{port}"
    for _ in range(200):  # wait for the socket to accept (bounded), not a timing assertion
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.05)
    try:
        yield base, process
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_local_server_chats_with_a_tool_and_audits_it(server: tuple[str, subprocess.Popen[str]]) -> None:
    base, process = server
    status, created = _call(base, "POST", "/api/v1/conversations", {"title": "local"})
    assert status == 201
    cid = created["conversationId"]
    status, reply = _call(base, "POST", f"/api/v1/conversations/{cid}/chat", {"message": "what time is it in London?"})
    assert status == 200
    assert reply["assistantMessage"].startswith("[offline model]") and "Europe/London" in reply["assistantMessage"]
    status, messages = _call(base, "GET", f"/api/v1/conversations/{cid}/messages")
    assert [m["role"] for m in messages["items"]] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]
    status, error = _call(base, "GET", "/api/v1/conversations/c_missing")
    assert status == 404 and error["error"]["code"] == "conversation_not_found"
    process.terminate()
    _, stderr = process.communicate(timeout=10)
    audit = [json.loads(line) for line in stderr.splitlines() if '"logger": "TOOL_AUDIT"' in line]
    assert [(a["toolName"], a["status"], a["conversationId"]) for a in audit] == [("time", "ok", cid)]
