"""`kill -9` of the local server while a run waits on people, then a restart: the run goes on from its checkpoint.

Real processes on one AGENT_DATA_DIR. The run waits on two approvals (the offline model calls `time` for Tokyo
and London; the deployment's rule asks for every `time` call), or on a frontend tool's params, when the server
is killed. After the restart the answers are accepted (`POST /api/ap/submit`), the run continues on the new
process with the same run id, and a client resuming its stream from the last event it had gets the rest:
every seq once, in order, ending with `run.complete`. The approved call runs once, the denied one never.
Waits are bounded polls of the stored items, never timed assertions.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from agent_core.domain.models import Run, RunStatus
from agent_core.store import items as it
from agent_core.store.embedded import DATABASE_FILE
from agent_core.store.sqlite_db import SqliteDatabase
from agent_core.store.sqlite_table import SqliteTable
from agent_core.store.table import Item, Key
from tests.support.local_server import local_server
from tests.support.sse import sse_events
from tests.support.wait import poll_until

TIMES = "what time is it in Tokyo and in London?"
PICK = 'ask me to pick "red" or "blue"'
HEADERS = {"X-User-Id": "kim"}
ENV = {"POWERTOOLS_LOG_LEVEL": "WARNING", "AGENT_TOOL_APPROVAL": '{"time": "always"}'}


def _item(data_dir: Path, key: Key) -> Item | None:
    db = SqliteDatabase(data_dir / DATABASE_FILE)
    try:
        return asyncio.run(SqliteTable(db).get(key))
    finally:
        db.close()


def _wait_then_kill(
    base: str, process: subprocess.Popen[str], data_dir: Path, message: str, waits: int
) -> tuple[str, str, list[dict[str, Any]]]:
    """Start a turn, read until it waits on `waits` people and its checkpoint is stored, then kill -9 the
    server: (chatId, runId, the events the client got)."""
    seen: list[dict[str, Any]] = []
    with httpx.Client(base_url=base, headers=HEADERS, timeout=30) as client:
        chat_id = client.post("/api/v1/conversations", json={"title": "killed"}).json()["conversationId"]
        with client.stream("POST", "/api/ap/query", json={"message": message, "chatId": chat_id}) as response:
            assert response.status_code == 200
            for event in sse_events(response):
                seen.append(event)
                asked = [e for e in seen if e["type"] == "tool.approval"] if waits > 1 else []
                frontend = event["type"] == "tool.end" and waits == 1
                if len(asked) == waits or frontend:
                    run_id = str(event["runId"])
                    key = it.checkpoint_key(run_id)
                    poll_until(lambda key=key: _item(data_dir, key), "the run's checkpoint", interval_s=0.05)
                    os.kill(process.pid, signal.SIGKILL)
                    process.wait(timeout=30)
                    return chat_id, run_id, seen
    raise AssertionError(f"the turn never waited: {[e['type'] for e in seen]}")


def _resumed(client: httpx.Client, run_id: str, after: int) -> list[dict[str, Any]]:
    headers = {"Last-Event-ID": str(after)}
    with client.stream("GET", f"/api/ap/runs/{run_id}/events", headers=headers) as response:
        assert response.status_code == 200, response.read()
        return list(sse_events(response))


def _run(data_dir: Path, chat_id: str, run_id: str) -> Run:
    item = _item(data_dir, it.run_key(chat_id, run_id))
    assert item is not None
    return it.run_from_item(item)


def test_a_run_killed_while_it_waits_for_approvals_goes_on_after_a_restart_when_they_are_answered(
    tmp_path: Path,
) -> None:
    env = {**ENV, "AGENT_DATA_DIR": str(tmp_path)}
    # Given a server killed while a run waited on two approvals (its checkpoint stored)
    with local_server(**env) as (base, process):
        chat_id, run_id, seen = _wait_then_kill(base, process, tmp_path, TIMES, waits=2)
    asked = {e["args"]["timezone"]: e["toolId"] for e in seen if e["type"] == "tool.approval"}
    last = seen[-1]["seq"]

    with local_server(**env) as (base, _process), httpx.Client(base_url=base, headers=HEADERS, timeout=30) as client:
        # When both approvals are answered on the restarted server
        yes = {"runId": run_id, "toolId": asked["Asia/Tokyo"], "approve": True}
        no = {"runId": run_id, "toolId": asked["Europe/London"], "approve": False, "reason": "not London"}
        assert client.post("/api/ap/submit", json=yes).json() == {"accepted": True, "status": "accepted"}
        assert client.post("/api/ap/submit", json=no).json() == {"accepted": True, "status": "accepted"}
        # A second answer to a decided call is still refused
        assert client.post("/api/ap/submit", json=yes).json()["status"] == "already_decided"

        # Then the client resuming from the last event it had gets the rest of the same run, to its end
        rest = _resumed(client, run_id, last)
        assert [e["seq"] for e in rest] == list(range(last + 1, last + 1 + len(rest)))
        assert {e["runId"] for e in rest} == {run_id}
        assert rest[-1]["type"] == "run.complete", [e["type"] for e in rest]
        results = {e["toolId"]: e for e in rest if e["type"] == "tool.result"}
        assert results[asked["Asia/Tokyo"]]["status"] == "ok"
        assert (results[asked["Europe/London"]]["status"], results[asked["Europe/London"]]["reason"]) == (
            "denied",
            "approval_denied",
        )

        # And the chat's replay is the whole run once: what the first process sent, then the rest
        replay = [e for e in client.get("/api/ap/chat", params={"chatId": chat_id}).json()["events"]]
        mine = [e for e in replay if e["runId"] == run_id]
        assert mine[0]["type"] == "request.query" and mine[-1]["type"] == "run.complete"
        assert [e["seq"] for e in mine] == sorted({e["seq"] for e in mine})
        assert sorted(e["toolId"] for e in mine if e["type"] == "tool.result") == sorted(asked.values())
        assert [e["type"] for e in mine].count("run.complete") == 1

        # And the chat takes its next turn
        after = client.post(f"/api/v1/conversations/{chat_id}/chat", json={"message": "thanks"})
        assert after.status_code == 200, after.text
    assert _run(tmp_path, chat_id, run_id).status == RunStatus.COMPLETED


def test_a_run_killed_while_it_waits_for_a_frontend_tool_goes_on_when_the_params_come(tmp_path: Path) -> None:
    env = {**ENV, "AGENT_DATA_DIR": str(tmp_path)}
    with local_server(**env) as (base, process):
        chat_id, run_id, seen = _wait_then_kill(base, process, tmp_path, PICK, waits=1)
    tool_id = next(e["toolId"] for e in seen if e["type"] == "tool.end")

    with local_server(**env) as (base, _process), httpx.Client(base_url=base, headers=HEADERS, timeout=30) as client:
        answer = {"runId": run_id, "toolId": tool_id, "params": {"choice": "blue"}}
        assert client.post("/api/ap/submit", json=answer).json() == {"accepted": True, "status": "accepted"}
        rest = _resumed(client, run_id, seen[-1]["seq"])
        assert rest[0]["seq"] == seen[-1]["seq"] + 1
        assert [e["type"] for e in rest][-1] == "run.complete", [e["type"] for e in rest]
        assert any(e["type"] == "request.submit" and e["params"] == {"choice": "blue"} for e in rest)
    assert _run(tmp_path, chat_id, run_id).status == RunStatus.COMPLETED


def test_a_killed_runs_approval_that_timed_out_meanwhile_goes_on_as_a_timeout_at_the_restart(tmp_path: Path) -> None:
    env = {**ENV, "AGENT_DATA_DIR": str(tmp_path), "AGENT_TOOL_APPROVAL_TIMEOUT_MS": "8000"}
    with local_server(**env) as (base, process):
        chat_id, run_id, seen = _wait_then_kill(base, process, tmp_path, TIMES, waits=2)
    # Nobody answers while the server is down, until both waits are out of time
    waits = [
        it.wait_from_item(_item(tmp_path, it.wait_key(run_id, e["toolId"])) or {})
        for e in seen
        if e["type"] == "tool.approval"
    ]
    poll_until(lambda: time.time() > max(w.expires_at for w in waits), "the approvals' expiry", interval_s=0.1)

    # The restarted server continues the run by itself: both calls timed out, told to the model
    with local_server(**env) as (base, _process), httpx.Client(base_url=base, headers=HEADERS, timeout=30) as client:
        rest = _resumed(client, run_id, seen[-1]["seq"])
        assert rest[-1]["type"] == "run.complete", [e["type"] for e in rest]
        statuses = [(e["status"], e["reason"]) for e in rest if e["type"] == "tool.result"]
        assert statuses == [("timeout", "approval_timeout")] * 2, [
            (e["type"], e.get("toolId"), e.get("status"), e.get("reason"), e.get("toolName")) for e in rest
        ]
        late = {"runId": run_id, "toolId": waits[0].tool_id, "approve": True}
        assert client.post("/api/ap/submit", json=late).json()["accepted"] is False
    assert _run(tmp_path, chat_id, run_id).status == RunStatus.COMPLETED
