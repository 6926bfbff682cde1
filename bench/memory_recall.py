"""History query on a busy day: the usual two-call path vs ours.

Old path (an agent without the fast path): an LLM call decides it is a history question, the day's raw
messages are searched, and a second LLM call answers with them. Ours: the rule-based detector, the
precomputed daily summary, one LLM call. The model is an in-process stub with a fixed latency per call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_core.context import build_context
from agent_core.domain.ids import new_chat_id, sortable_id
from agent_core.domain.models import Chat, DailySummary, Message, Role, Usage
from agent_core.llm.base import LlmDelta, LlmRequest
from agent_core.llm.tokens import estimate_messages
from agent_core.memory.summarize import transcript
from agent_core.runtime.loop import TurnRunner
from agent_core.runtime.turn import PreparedTurn, TurnRequest, prepare_turn
from agent_core.store.memory_table import MemoryTable
from bench.common import make_settings, quiet_observability

LATENCY_S = 0.2
MESSAGES = 200
NOW = datetime(2026, 1, 8, 3, 0, tzinfo=UTC)
DAY = datetime(2026, 1, 7, 2, 0, tzinfo=UTC)
QUESTION = "昨天我们聊了什么？"


class StubModel:
    def __init__(self) -> None:
        self.prompt_tokens: list[int] = []

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]:
        self.prompt_tokens.append(estimate_messages(request.messages))
        await asyncio.sleep(LATENCY_S)
        yield LlmDelta(content="昨天主要聊了京都四月的行程和预算。")
        yield LlmDelta(finish_reason="stop", usage=Usage(prompt_tokens=self.prompt_tokens[-1], completion_tokens=20))


def _busy_day(chat_id: str) -> list[Message]:
    lines = [
        "我想四月去京都看樱花，大概五天。",
        "预算八千人民币左右，住在四条附近比较方便。",
        "可以安排清水寺、伏见稻荷和岚山，每天两到三个景点。",
        "交通用ICOCA卡，市内巴士一日券也可以。",
    ]
    out = []
    for i in range(MESSAGES):
        at = int((DAY + timedelta(minutes=i)).timestamp() * 1000)
        role = Role.USER if i % 2 == 0 else Role.ASSISTANT
        out.append(Message(id=sortable_id(at), chat_id=chat_id, role=role, content=lines[i % 4] * 3, created_at=at))
    return out


async def _ours() -> dict[str, Any]:
    model = StubModel()
    # Compaction is background work that would have run long before; keep it out of the measured turn.
    settings = make_settings(AGENT_MEMORY_COMPACT_AFTER=100_000)
    context = build_context(settings, table=MemoryTable(), llm=model, audit=lambda _: None)
    at = int(NOW.timestamp() * 1000)
    chat = Chat(chat_id=new_chat_id(), user_id="u", created_at=at, last_activity_at=at)
    await context.deps.chats.create_chat(chat)
    await context.deps.chats.add_messages(chat.chat_id, _busy_day(chat.chat_id))
    summary = "用户计划四月去京都五天看樱花，预算约八千元，住四条附近；行程包括清水寺、伏见稻荷、岚山，交通用ICOCA卡。"
    await context.deps.memory_store.put_daily(
        DailySummary(
            user_id="u", date="2026-01-07", summary=summary, key_topics=["京都", "樱花", "预算"], updated_at=at
        )
    )
    started = time.perf_counter()
    request = TurnRequest(user_id="u", chat_id=chat.chat_id, message=QUESTION, now=NOW)
    prepared = await prepare_turn(context.deps, request)
    assert isinstance(prepared, PreparedTurn)
    async for _ in TurnRunner(prepared).events():
        pass
    return {
        "llm_calls": len(model.prompt_tokens),
        "prompt_tokens": sum(model.prompt_tokens),
        "wall_ms": (time.perf_counter() - started) * 1000,
    }


async def _old() -> dict[str, Any]:
    """The two-call path, reproduced: detect with the LLM, then answer from the raw day."""
    model = StubModel()
    started = time.perf_counter()
    detect = [
        {"role": "system", "content": "Is this a question about past conversations? Which dates?"},
        {"role": "user", "content": QUESTION},
    ]
    async for _ in model.stream(LlmRequest(model="m", messages=detect)):
        pass
    raw = transcript(_busy_day("c"))
    answer = [
        {"role": "system", "content": f"Answer from these messages:\n{raw}"},
        {"role": "user", "content": QUESTION},
    ]
    async for _ in model.stream(LlmRequest(model="m", messages=answer)):
        pass
    return {
        "llm_calls": len(model.prompt_tokens),
        "prompt_tokens": sum(model.prompt_tokens),
        "wall_ms": (time.perf_counter() - started) * 1000,
    }


def run() -> dict[str, Any]:
    quiet_observability()
    ours, old = asyncio.run(_ours()), asyncio.run(_old())
    result = {
        "messages_that_day": MESSAGES,
        "old": {k: round(v, 1) for k, v in old.items()},
        "ours": {k: round(v, 1) for k, v in ours.items()},
        "prompt_token_reduction_pct": round(100 * (1 - ours["prompt_tokens"] / old["prompt_tokens"]), 1),
        "target_reduction_pct": 80,
    }
    result["meets_target"] = ours["llm_calls"] == 1 and result["prompt_token_reduction_pct"] >= 80
    print(result)
    return result


if __name__ == "__main__":
    run()
