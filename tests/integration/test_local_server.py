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


def test_api_docs_and_their_scripts_are_served_by_the_local_server(server: tuple[str, subprocess.Popen[str]]) -> None:
    """/docs and /redoc work with no internet: their scripts come from the server, not a CDN."""
    base, process = server
    pages = {}
    for path in ("/docs", "/redoc"):
        with urllib.request.urlopen(base + path, timeout=30) as response:
            pages[path] = response.read().decode()
    assert "/static-offline-docs/swagger-ui-bundle.js" in pages["/docs"]
    assert "/static-offline-docs/redoc.standalone.js" in pages["/redoc"]
    assert all("https://" not in page for page in pages.values()), "no asset from outside the server"
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"):
        with urllib.request.urlopen(f"{base}/static-offline-docs/{asset}", timeout=30) as response:
            assert response.status == 200 and len(response.read()) > 10_000
    status, spec = _call(base, "GET", "/openapi.json")
    assert status == 200 and {"get", "patch", "delete"} <= set(spec["paths"]["/api/ap/profile"])
    # The start-up banner names the local identity rule and the docs.
    assert process.stdout is not None
    banner = [process.stdout.readline() for _ in range(3)]
    assert banner[0].startswith("User: the X-User-Id header, else Authorization: Bearer <user>")
    assert "local-user" in banner[0] and f"{base}/docs" in banner[1]
    assert banner[2].startswith(f"Playground: {base}/ ") and f"agent-core chat --url {base}" in banner[2]
    with urllib.request.urlopen(base + "/", timeout=30) as response:
        assert 'data-testid="composer"' in response.read().decode()


def test_a_busy_port_fails_with_one_clear_line_and_no_banner() -> None:
    import os
    import socket
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_", "AWS_"))}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "agent_core.cli", "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert done.returncode == 1
    assert done.stdout == "", "no 'listening on' banner before the failure"
    assert done.stderr.strip().splitlines() == [
        f"agent-core: cannot listen on 127.0.0.1:{port}: Address already in use (set PORT= for another)"
    ]


@pytest.mark.parametrize(
    ("host", "port", "line"),
    [
        (
            "127.0.0.1",
            "99999",
            "agent-core: cannot listen on 127.0.0.1:99999: port must be 0-65535 (set PORT= for another)",
        ),
        ("no-such-host.invalid", "8000", "(set HOST= for another)"),
    ],
)
def test_a_port_out_of_range_or_an_unknown_host_is_one_clear_line(host: str, port: str, line: str) -> None:
    """`PORT=99999 make run` once ended in a traceback (OverflowError from bind); a bad HOST said PORT=."""
    from agent_core import cli

    with pytest.raises(SystemExit) as stopped:
        cli.main(["serve", "--host", host, "--port", port])
    message = str(stopped.value.code)
    assert message.startswith(f"agent-core: cannot listen on {host}:{port}: ") and message.endswith(line)


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["jobs", "idle-sessions"]])
@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"AGENT_MAX_BODY_BYTES": "abc"},
            "AGENT_MAX_BODY_BYTES: Input should be a valid integer, unable to parse string as an integer",
        ),
        (
            {"AGENT_STAGE": "prod", "AGENT_ALLOW_CLOCK_OVERRIDE": "true"},
            "AGENT_ALLOW_CLOCK_OVERRIDE is a dev-only feature and is refused with AGENT_STAGE='prod': unset it, "
            "or run the local server with AGENT_STAGE=dev",
        ),
    ],
)
def test_an_invalid_setting_is_one_line_naming_it_and_never_echoes_the_environment(
    command: list[str], env: dict[str, str], line: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Once pydantic's dump (a traceback for `jobs`), which quoted the settings it was given: a key among them."""
    import os

    from agent_core import cli
    from agent_core.config import get_settings

    for name in [k for k in os.environ if k.startswith(("AGENT_", "OPENAI_", "AWS_LAMBDA"))]:
        monkeypatch.delenv(name)
    for name, value in {**env, "OPENAI_API_KEY": "sk-do-not-print", "AGENT_DATA_DIR": str(tmp_path)}.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        with pytest.raises(SystemExit) as stopped:
            cli.main(command)
    finally:
        get_settings.cache_clear()
    message = str(stopped.value.code)
    assert message.splitlines() == [f"agent-core: invalid configuration: {line} (docs/settings.md)"]
    assert "sk-do-not-print" not in message


def test_stopping_the_server_ends_a_running_stream_with_its_terminal_event() -> None:
    """Ctrl-C on `make run` while a turn waited once cut the stream (no terminal event, "ASGI callable
    returned without completing response"), and the run was stored as a client disconnect."""
    import signal

    import httpx

    from tests.support.sse import sse_events

    with local_server() as (base, process), httpx.Client(base_url=base, timeout=60) as client:
        events: list[dict[str, Any]] = []
        body = {"message": 'ask me to pick "tea" or "coffee"'}
        with client.stream("POST", "/api/ap/query", json=body) as response:
            for event in sse_events(response):
                events.append(event)
                if event["type"] == "tool.end":  # the run now waits for the browser
                    process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)  # it stops (uvicorn re-raises the SIGINT it caught)
    assert events[-1]["type"] == "run.cancel" and events[-1]["reason"] == "server_stopping"
    assert "without completing response" not in stderr, stderr[-2000:]


def test_port_0_serves_on_a_free_port_and_the_banner_names_it() -> None:
    """`--port 0` once announced http://127.0.0.1:0, an address nobody can call."""
    import os
    import re
    import sys
    import tempfile

    from tests.support.wait import accepts, poll_until

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_", "AWS_"))}
    with tempfile.TemporaryDirectory() as data:
        process = subprocess.Popen(
            [sys.executable, "-m", "agent_core.cli", "serve", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env | {"AGENT_DATA_DIR": data},
        )
        try:
            assert process.stdout is not None
            found = re.match(r"agent-core listening on (http://127\.0\.0\.1:(\d+)) ", process.stdout.readline())
            assert found is not None and int(found.group(2)) > 0
            poll_until(lambda: accepts(int(found.group(2))), "the announced port accepts connections")
            status, _ = _call(found.group(1), "GET", "/api/ap/agents")
            assert status == 200
        finally:
            process.terminate()
            process.communicate(timeout=10)


def test_serve_on_aws_storage_it_cannot_reach_says_so_in_one_line_and_no_banner() -> None:
    """`AGENT_STORAGE=aws agent-core serve` without credentials once printed the banner, then uvicorn's
    "Application startup failed" traceback."""
    import os
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_", "AWS_"))}
    env |= {
        "AGENT_STORAGE": "aws",
        "AGENT_LLM_PROVIDER": "offline",
        "AGENT_STORE_WRITE_ATTEMPTS": "1",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
        "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_MAX_ATTEMPTS": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "agent_core.cli", "serve", "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stdout == "", "no 'listening on' banner before the failure"
    assert "Traceback" not in done.stderr and "startup failed" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("agent-core serve: AGENT_STORAGE=aws: the table agent-core-local could not be read")
    assert "Unable to locate credentials" in line and "AGENT_TABLE_NAME" in line and "region" in line
