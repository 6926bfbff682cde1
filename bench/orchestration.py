"""Parallel tools and progressive answers: two tools of 300 ms and 600 ms, a model at 50 ms per call.

Measured in-process on the event stream (perf_counter when each event is yielded):
- tool phase: from the last tool.end (execution starts) to the last tool.result; target <= slowest + 20 ms;
- progressive: from the same start to the first answer-part content; target <= fastest + first token + 20 ms;
- routing calls in a quick-rule turn: model calls besides the one answer; target 0.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel

from agent_core.context import build_context
from agent_core.domain.ids import new_chat_id, now_ms
from agent_core.domain.models import Chat, Usage
from agent_core.llm.base import LlmDelta, LlmRequest, ToolCallFragment
from agent_core.runtime.agents import AgentCatalog, AgentDefinition
from agent_core.runtime.loop import TurnRunner
from agent_core.runtime.turn import PreparedTurn, TurnRequest, prepare_turn
from agent_core.store.memory_table import MemoryTable
from agent_core.tools.base import Tool, ToolContext
from bench.common import make_settings, quiet_observability

FIRST_TOKEN_S = 0.05
ROUNDS = 7


class SleepArgs(BaseModel):
    pass


def sleeper(name: str, seconds: float) -> Tool:
    class Sleeper(Tool):
        description = f"sleeps {seconds} s"
        args_model = SleepArgs

        async def run(self, args: Any, ctx: ToolContext) -> Any:
            await asyncio.sleep(seconds)
            return {"tool": name}

    Sleeper.name = name
    return Sleeper()


class SlowModel:
    """50 ms to the first delta; asks for both tools when offered tools and no results yet."""

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]:
        self.calls += 1
        await asyncio.sleep(FIRST_TOKEN_S)
        if request.tools and not any(m.get("role") == "tool" for m in request.messages):
            for index, name in enumerate(("t300", "t600")):
                yield LlmDelta(tool_calls=[ToolCallFragment(index=index, id=f"c_{name}", name=name, arguments="{}")])
            yield LlmDelta(finish_reason="tool_calls")
            return
        yield LlmDelta(content="answer part")
        yield LlmDelta(finish_reason="stop", usage=Usage(prompt_tokens=10, completion_tokens=2))


async def _turn(compose: str, message: str) -> tuple[dict[str, float], int]:
    model = SlowModel()
    context = build_context(make_settings(), table=MemoryTable(), llm=model, audit=lambda _: None)
    for tool in (sleeper("t300", 0.3), sleeper("t600", 0.6)):
        context.deps.tools.registry.register(tool)
    agent = AgentDefinition(key="b", name="B", tools=["t300", "t600", "time"], compose=compose)  # type: ignore[arg-type]
    context.deps.agents = AgentCatalog([agent])
    at = now_ms()
    chat = Chat(chat_id=new_chat_id(), user_id="u", agent_key="b", created_at=at, last_activity_at=at)
    await context.deps.chats.create_chat(chat)
    prepared = await prepare_turn(context.deps, TurnRequest(user_id="u", chat_id=chat.chat_id, message=message))
    assert isinstance(prepared, PreparedTurn)
    marks: dict[str, float] = {}
    ends = 0
    async for envelope in TurnRunner(prepared).events():
        now, kind = time.perf_counter(), envelope.type
        if kind == "tool.end":
            ends += 1
            if ends == 2:
                marks["phase_start"] = now
        elif kind == "tool.result":
            marks["last_result"] = now
        elif kind == "content.delta" and "phase_start" in marks and "first_part" not in marks:
            wire = envelope.wire()
            if wire["delta"] == "answer part":
                marks["first_part"] = now
    return marks, model.calls


def run(rounds: int = ROUNDS) -> dict[str, Any]:
    quiet_observability()
    phases, firsts = [], []
    for _ in range(rounds):
        marks, _ = asyncio.run(_turn("single", "compare both"))
        phases.append((marks["last_result"] - marks["phase_start"]) * 1000)
        marks, _ = asyncio.run(_turn("progressive", "compare both"))
        firsts.append((marks["first_part"] - marks["phase_start"]) * 1000)
    _, quick_calls = asyncio.run(_turn("single", "what time is it?"))
    result = {
        "tool_phase_ms_median": round(statistics.median(phases), 1),
        "tool_phase_target_ms": 600 + 20,
        "progressive_first_part_ms_median": round(statistics.median(firsts), 1),
        "progressive_target_ms": 300 + FIRST_TOKEN_S * 1000 + 20,
        "routing_calls_per_quick_rule_turn": quick_calls - 1,
        "rounds": rounds,
    }
    result["meets_target"] = (
        result["tool_phase_ms_median"] <= result["tool_phase_target_ms"]
        and result["progressive_first_part_ms_median"] <= result["progressive_target_ms"]
        and result["routing_calls_per_quick_rule_turn"] == 0
    )
    print(result)
    return result


if __name__ == "__main__":
    run()
