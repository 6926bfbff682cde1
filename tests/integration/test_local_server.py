"""`agent-core serve` started as a subprocess (embedded SQLite storage, offline model) and called over HTTP."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.local_server import local_server


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
    with local_server() as running:
        yield running


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
