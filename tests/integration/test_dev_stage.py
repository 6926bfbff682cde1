"""Dev-only features (the dev job routes, X-Agent-Now) exist only with AGENT_STAGE=dev, never in Lambda,
honour auth, and never reach data-token expiry or run leases."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.config import Settings, local_server_settings
from agent_core.context import AppContext, build_context
from agent_core.domain.models import Chat
from agent_core.runtime.turn import PreparedTurn, TurnRequest, prepare_turn
from agent_core.store.memory_table import MemoryTable
from agent_core.tools.data_token import sign_data_token
from tests.support.fixtures import make_settings

SECRET = "dev-stage-secret-link-key-32-bytes"


def _context(**settings: Any) -> AppContext:
    merged = {"AGENT_DATA_TOKEN_SECRET": SECRET, **settings}
    return build_context(make_settings(**merged), table=MemoryTable(), audit=lambda line: None)


def _dev_context(**settings: Any) -> AppContext:
    return _context(AGENT_STAGE="dev", AGENT_ALLOW_CLOCK_OVERRIDE="true", **settings)


def _client(ctx: AppContext, user: str = "alice") -> httpx.AsyncClient:
    app = build_app(*routes.local, context=ctx)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers={"X-User-Id": user}, timeout=30
    )


# ----- configuration -----


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("AGENT_STAGE", "AGENT_ALLOW_CLOCK_OVERRIDE", "AWS_LAMBDA_FUNCTION_NAME"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_plain_default_stage_is_prod_and_the_local_server_defaults_to_dev(clean_env: pytest.MonkeyPatch) -> None:
    assert Settings().stage == "prod" and not Settings().dev_features
    assert local_server_settings().stage == "dev" and local_server_settings().dev_features
    clean_env.setenv("AGENT_STAGE", "staging")
    assert local_server_settings().stage == "staging"  # an explicit stage wins


def test_the_clock_override_refuses_to_start_outside_dev(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("AGENT_ALLOW_CLOCK_OVERRIDE", "true")
    with pytest.raises(ValidationError, match="AGENT_ALLOW_CLOCK_OVERRIDE is a dev-only feature"):
        Settings()
    clean_env.setenv("AGENT_STAGE", "dev")
    assert Settings().allow_clock_override
    # In Lambda, whatever the stage says
    clean_env.setenv("AWS_LAMBDA_FUNCTION_NAME", "agent-core-stream")
    with pytest.raises(ValidationError, match="in a Lambda function"):
        Settings()
    clean_env.delenv("AGENT_ALLOW_CLOCK_OVERRIDE")
    assert Settings().stage == "dev" and not Settings().dev_features


def test_agent_core_serve_refuses_to_start_with_the_clock_override_outside_dev() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_", "AWS_"))}
    env |= {"AGENT_STAGE": "prod", "AGENT_ALLOW_CLOCK_OVERRIDE": "true"}
    done = subprocess.run(
        [sys.executable, "-m", "agent_core.cli", "serve", "--port", "9"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "invalid configuration" in done.stderr and "AGENT_ALLOW_CLOCK_OVERRIDE" in done.stderr
    assert "listening" not in done.stdout


# ----- the dev job routes -----


@pytest.mark.parametrize("settings", [{}, {"AGENT_STAGE": "staging"}], ids=["default", "staging"])
async def test_dev_routes_do_not_exist_outside_the_dev_stage(settings: dict[str, str]) -> None:
    async with _client(_context(**settings)) as client:
        for path in ("/api/dev/jobs/idle-sessions", "/api/dev/jobs/daily-summary"):
            answer = await client.post(path)
            assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"


async def test_dev_routes_need_an_authenticated_caller() -> None:
    ctx = _dev_context(AGENT_AUTH_MODE="jwt", AGENT_JWT_JWKS_URL="http://127.0.0.1:9/jwks.json")
    async with _client(ctx) as client:
        answer = await client.post("/api/dev/jobs/idle-sessions", headers={"X-User-Id": "alice"})
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"


async def test_dev_routes_act_only_on_the_callers_data() -> None:
    # Given alice and bob, each with a session opened yesterday
    ctx = _dev_context()
    yesterday = "2026-01-07T10:00:00+00:00"
    async with _client(ctx, "alice") as alice, _client(ctx, "bob") as bob:
        for client in (alice, bob):
            answer = await client.post("/api/ap/query", json={"message": "hello"}, headers={"X-Agent-Now": yesterday})
            assert answer.status_code == 200
        # When alice runs the idle-sessions job an hour later
        later = {"X-Agent-Now": "2026-01-07T11:00:00+00:00"}
        report = (await alice.post("/api/dev/jobs/idle-sessions", headers=later)).json()["report"]
        # Then only her session is closed; bob's is closed when he runs it
        assert (report["scanned"], report["enqueued"]) == (1, 1)
        assert await _open_sessions(ctx) == {"bob"}
        assert (await bob.post("/api/dev/jobs/idle-sessions", headers=later)).json()["report"]["enqueued"] == 1
        assert await _open_sessions(ctx) == set()


async def _open_sessions(ctx: AppContext) -> set[str]:
    users: set[str] = set()
    for user in ("alice", "bob"):
        page = await ctx.deps.chats.list_chats(user, 10, None)
        users |= {c.user_id for c in page.items if c.session_id is not None}
    return users


# ----- X-Agent-Now never reaches data tokens or leases -----


async def test_x_agent_now_never_revives_an_expired_data_token() -> None:
    ctx = _dev_context()
    await ctx.deps.chats.create_chat(Chat(chat_id="c_a1", user_id="alice", created_at=1, last_activity_at=1))
    assert ctx.deps.blobs is not None
    await ctx.deps.blobs.put("data/c_a1/report.csv", b"a,b\n", "text/csv")
    issued = time.time() - 3600
    token = sign_data_token(SECRET, "c_a1", "c_a1/report.csv", 60, issued)  # expired 59 minutes ago
    back_then = datetime.fromtimestamp(issued + 10, UTC).isoformat()
    async with _client(ctx, "mallory") as client:
        answer = await client.get(
            "/api/ap/data", params={"file": "c_a1/report.csv", "t": token}, headers={"X-Agent-Now": back_then}
        )
    assert answer.status_code == 403 and answer.json()["data"]["errorCode"] == "TOKEN_EXPIRED"


async def _holding(ctx: AppContext, now: datetime | None = None) -> PreparedTurn:
    """A turn that took its chat's lease and is still running (prepared, not run)."""
    prepared = await prepare_turn(ctx.deps, TurnRequest(user_id="alice", message="first", now=now))
    assert isinstance(prepared, PreparedTurn)
    return prepared


@pytest.mark.parametrize(
    ("first_at", "second_at"),
    [(None, timedelta(days=1)), (-timedelta(days=1), None)],
    ids=["second-turn-in-the-future", "first-turn-in-the-past"],
)
async def test_x_agent_now_never_takes_over_a_live_lease(
    first_at: timedelta | None, second_at: timedelta | None
) -> None:
    ctx = _dev_context()
    now = datetime.now(UTC)
    holding = await _holding(ctx, now + first_at if first_at is not None else None)
    headers = {"X-Agent-Now": (now + second_at).isoformat()} if second_at is not None else {}
    async with _client(ctx) as client:
        body = {"message": "second", "chatId": holding.chat.chat_id}
        answer = await client.post("/api/ap/query", json=body, headers=headers)
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "run_in_progress"
    chat = await ctx.deps.chats.get_chat(holding.chat.chat_id, "alice")
    assert chat is not None and chat.active_run_id == holding.run.run_id


async def test_a_run_started_in_the_past_can_still_be_cancelled() -> None:
    # Its run pointer lives on the wall clock too (it used to expire at once with a past "now")
    ctx = _dev_context()
    holding = await _holding(ctx, datetime.now(UTC) - timedelta(days=30))  # older than a pointer's 7 days
    async with _client(ctx) as client:
        answer = await client.post("/api/ap/cancel", json={"runId": holding.run.run_id})
    assert answer.json() == {"accepted": True, "runId": holding.run.run_id, "status": "cancelling"}


# ----- one rule for a time given as text -----


async def test_x_agent_now_and_jobs_now_refuse_a_time_without_an_offset_alike(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`agent-core jobs --now 2026-01-07T11:00:00` was once taken as UTC silently while X-Agent-Now refused it."""
    from agent_core.cli import main

    naive = "2026-01-07T11:00:00"
    async with _client(_dev_context()) as client:
        answer = await client.post("/api/dev/jobs/idle-sessions", headers={"X-Agent-Now": naive})
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "invalid_request" and error["param"] == "X-Agent-Now"
    with pytest.raises(SystemExit) as refused:  # argparse refuses before any settings or storage are read
        main(["jobs", "idle-sessions", "--now", naive])
    assert refused.value.code == 2
    said = capsys.readouterr().err.strip().splitlines()[-1]
    expected = f"'{naive}' has no UTC offset; expected ISO 8601 with a UTC offset, e.g. 2026-01-07T11:00:00+08:00"
    assert expected in error["message"] and expected in said
    assert said.startswith("agent-core jobs idle-sessions: error: argument --now:")
