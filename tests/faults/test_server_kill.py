"""`kill -9` of the local server mid-turn, then a restart on the same AGENT_DATA_DIR (real processes).

The turn hangs on a frontend tool (the offline model asks the browser to pick, and waits), holding its
chat's lease, when the server is killed. The restarted server owns the directory alone: the chat must take
a new turn at once (no 409 for the lease's length), and the interrupted run must replay as its question
and a `run.error` `interrupted`, its record no longer `running`. Waits are bounded, never timed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from agent_core.domain.models import Run, RunStatus
from agent_core.store import items as it
from agent_core.store.embedded import DATABASE_FILE
from agent_core.store.sqlite_db import SqliteDatabase
from agent_core.store.sqlite_table import SqliteTable
from tests.support.local_server import local_server
from tests.support.server import free_port
from tests.support.sse import sse_events

ASK = 'ask me to pick "red" or "blue"'
HEADERS = {"X-User-Id": "kim"}
ENV = {"POWERTOOLS_LOG_LEVEL": "WARNING"}


def _hang_then_kill(base: str, process: subprocess.Popen[str]) -> tuple[str, str]:
    """Start a turn that waits for the browser, and kill -9 the server while it waits: (chatId, runId)."""
    with httpx.Client(base_url=base, headers=HEADERS, timeout=30) as client:
        chat_id = client.post("/api/v1/conversations", json={"title": "killed"}).json()["conversationId"]
        with client.stream("POST", "/api/ap/query", json={"message": ASK, "chatId": chat_id}) as response:
            assert response.status_code == 200
            try:
                for event in sse_events(response):
                    if event["type"] == "tool.end":  # the run now waits for the browser, lease held
                        os.kill(process.pid, signal.SIGKILL)
                        process.wait(timeout=30)
                        return chat_id, str(event["runId"])
            except httpx.HTTPError:
                pass
    raise AssertionError("the turn never reached its frontend tool")


def _stored_run(data_dir: Path, chat_id: str, run_id: str) -> Run:
    db = SqliteDatabase(data_dir / DATABASE_FILE)
    try:
        item = asyncio.run(SqliteTable(db).get(it.run_key(chat_id, run_id)))
    finally:
        db.close()
    assert item is not None
    return it.run_from_item(item)


def test_a_killed_servers_chat_takes_a_turn_after_a_restart_and_replays_the_interrupted_run(tmp_path: Path) -> None:
    env = {**ENV, "AGENT_DATA_DIR": str(tmp_path)}
    # Given a server killed (SIGKILL) while a turn held its chat's lease
    with local_server(**env) as (base, process):
        chat_id, run_id = _hang_then_kill(base, process)

    # When the server starts again on the same data directory
    with local_server(**env) as (base, _process), httpx.Client(base_url=base, headers=HEADERS, timeout=30) as client:
        # Then a new turn on that chat gets through at once: the server settled the lease before it listened
        answer = client.post(f"/api/v1/conversations/{chat_id}/chat", json={"message": "still there?"})
        assert answer.status_code == 200, answer.text

        # And the replay shows the interrupted run's question and its error, then the new turn
        replay = client.get("/api/ap/chat", params={"chatId": chat_id}).json()["events"]
        dead = [e for e in replay if e["runId"] == run_id]
        assert [e["type"] for e in dead] == ["request.query", "run.error"], dead
        assert dead[0]["message"] == ASK
        assert dead[1]["code"] == "interrupted" and dead[1]["chatId"] == chat_id
        assert [e["type"] for e in replay if e["runId"] != run_id][-1] == "run.complete"
    # And the run's record is no longer running
    stored = _stored_run(tmp_path, chat_id, run_id)
    assert (stored.status, stored.error_code) == (RunStatus.FAILED, "interrupted")


def test_a_second_server_on_the_same_data_directory_refuses_to_start(tmp_path: Path) -> None:
    env = {**ENV, "AGENT_DATA_DIR": str(tmp_path)}
    with local_server(**env) as (base, _process):
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_", "AWS_"))}
        second = subprocess.Popen(
            [sys.executable, "-m", "agent_core.cli", "serve", "--port", str(free_port())],
            env={**clean, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert second.stdout is not None
            banner = second.stdout.readline()  # a server that starts prints its banner; a refused one exits
            assert banner == "", f"a second server started: {banner}"
            _, stderr = second.communicate(timeout=120)
        finally:
            if second.poll() is None:
                second.kill()
                second.wait(timeout=30)
        assert second.returncode == 1, second.returncode
        assert "in use by another agent-core server" in stderr, stderr
        # And the first server is unaffected
        assert httpx.get(f"{base}/api/ap/chats", headers=HEADERS, timeout=30).status_code == 200
