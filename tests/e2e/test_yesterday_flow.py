"""On the local server (the command `make run` starts): chat "yesterday" with the clock override, run the jobs,
then "昨天我们聊了什么？" is answered from the summary in a single LLM call."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.support.local_server import local_server
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.sse import sse_events

SUMMARY = "用户计划四月去京都看樱花，预算约八千元。"


def _query(client: httpx.Client, message: str, now: str, chat_id: str | None = None) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"message": message}
    if chat_id:
        body["chatId"] = chat_id
    with client.stream("POST", "/api/ap/query", json=body, headers={"X-Agent-Now": now}) as response:
        assert response.status_code == 200, response.read()
        return list(sse_events(response))


def test_yesterdays_conversation_is_summarised_and_recalled_in_one_llm_call() -> None:
    with OpenAiStub() as stub:
        stub.enqueue(
            StubScript.text("好的，四月的京都很美。"),
            StubScript.text("八千元够五天。"),
            StubScript.text(
                json.dumps({"summary": SUMMARY, "keyTopics": ["京都", "樱花", "预算"]}, ensure_ascii=False)
            ),
            StubScript.text('{"facts": [{"aspect": "budget", "key": "trip", "value": "about 8000 CNY"}]}'),
            StubScript.text("昨天我们聊了四月去京都看樱花和预算。"),
        )
        env = {
            "OPENAI_BASE_URL": stub.base_url,
            "OPENAI_API_KEY": "sk-local",
            "AGENT_ALLOW_CLOCK_OVERRIDE": "true",  # allowed: `agent-core serve` runs in the dev stage by default
            "AGENT_DEFAULT_TIMEZONE": "Asia/Shanghai",
        }
        with local_server(**env) as (base, _process), httpx.Client(base_url=base, timeout=60) as client:
            client.headers["X-User-Id"] = "traveller"
            # Yesterday (Jan 7, Shanghai): a short conversation about a trip
            chat_id = _query(client, "我想四月去京都看樱花", "2026-01-07T10:00:00+08:00")[0]["chatId"]
            _query(client, "预算大概八千元", "2026-01-07T10:02:00+08:00", chat_id)
            # The jobs, at the times the schedules would run them
            idle = client.post("/api/dev/jobs/idle-sessions", headers={"X-Agent-Now": "2026-01-07T11:00:00+08:00"})
            assert idle.status_code == 200 and idle.json()["report"]["enqueued"] == 1
            daily = client.post("/api/dev/jobs/daily-summary", headers={"X-Agent-Now": "2026-01-08T00:30:00+08:00"})
            assert daily.status_code == 200 and daily.json()["report"]["enqueued"] == 1
            before = len(stub.requests)
            # Today
            events = _query(client, "昨天我们聊了什么？", "2026-01-08T09:00:00+08:00")
            profile = client.get("/api/ap/profile").json()
    answer = "".join(e["delta"] for e in events if e["type"] == "content.delta")
    assert answer == "昨天我们聊了四月去京都看樱花和预算。"
    assert next(e for e in events if e["type"] == "run.route")["mode"] == "time_query"
    assert len(stub.requests) == before + 1, "exactly one LLM call for the question"
    prompt = "\n".join(m["content"] for m in stub.requests[-1]["messages"] if m["role"] == "system")
    assert SUMMARY in prompt and "2026-01-07" in prompt
    assert profile["facts"][0]["value"] == "about 8000 CNY"


def test_with_the_offline_model_the_recall_answer_quotes_yesterdays_summary() -> None:
    """No API key: the walkthrough of the README ("Memory, on a laptop") shows what was remembered."""
    env = {"AGENT_ALLOW_CLOCK_OVERRIDE": "true", "AGENT_DEFAULT_TIMEZONE": "Asia/Shanghai"}
    with local_server(**env) as (base, _process), httpx.Client(base_url=base, timeout=60) as client:
        chat_id = _query(client, "我想四月去京都看樱花。", "2026-01-07T10:00:00+08:00")[0]["chatId"]
        _query(client, "预算大概八千元。", "2026-01-07T10:02:00+08:00", chat_id)
        idle = client.post("/api/dev/jobs/idle-sessions", headers={"X-Agent-Now": "2026-01-07T11:00:00+08:00"})
        daily = client.post("/api/dev/jobs/daily-summary", headers={"X-Agent-Now": "2026-01-08T00:30:00+08:00"})
        # Each answers once its work is done, and says what it did: one summary written each (not `summarised: 0`)
        assert idle.json()["report"]["enqueued"] == 1 and idle.json()["report"]["summarised"] == 1
        assert daily.json()["report"]["enqueued"] == 1 and daily.json()["report"]["summarised"] == 1
        events = _query(client, "昨天我们聊了什么？", "2026-01-08T09:00:00+08:00")
    answer = "".join(e["delta"] for e in events if e["type"] == "content.delta")
    route = next(e for e in events if e["type"] == "run.route")
    assert route["mode"] == "time_query" and "2026-01-07" in route["reason"]
    assert answer.startswith("[offline model]")
    # The daily summary (extractive without a model) holds what the user said yesterday; the answer quotes it.
    assert "Records for 昨天 (2026-01-07)" in answer
    assert "京都看樱花" in answer and "八千元" in answer
    topics = next(line for line in answer.splitlines() if line.startswith("2026-01-07 (topics:"))
    assert "offline" not in topics and "model" not in topics, "the offline replies' marker is not a topic"


def test_a_short_chinese_chat_yesterday_is_recalled_with_what_was_said() -> None:
    """One exchange under 80 characters (too short for a session summary): the day still tells it."""
    env = {"AGENT_ALLOW_CLOCK_OVERRIDE": "true", "AGENT_DEFAULT_TIMEZONE": "Asia/Shanghai"}
    with local_server(**env) as (base, _process), httpx.Client(base_url=base, timeout=60) as client:
        _query(client, "我牙疼，医生开了甲硝唑。", "2026-01-07T21:00:00+08:00")
        idle = client.post("/api/dev/jobs/idle-sessions", headers={"X-Agent-Now": "2026-01-07T22:00:00+08:00"})
        assert idle.json()["report"]["enqueued"] == 1
        daily = client.post("/api/dev/jobs/daily-summary", headers={"X-Agent-Now": "2026-01-08T00:30:00+08:00"})
        assert daily.json()["report"]["enqueued"] == 1
        events = _query(client, "昨天我们聊了什么？", "2026-01-08T09:00:00+08:00")
    answer = "".join(e["delta"] for e in events if e["type"] == "content.delta")
    assert next(e for e in events if e["type"] == "run.route")["mode"] == "time_query"
    assert "Records for 昨天 (2026-01-07)" in answer
    assert "甲硝唑" in answer and "牙疼" in answer, answer
