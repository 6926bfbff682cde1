"""The how-tos' examples, run as written through real turns: docs/howto-tool.md and docs/howto-strategy.md."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_core.context import AppContext, build_context
from agent_core.domain.events import ContentDelta
from agent_core.domain.models import Role, ToolCall, ToolStatus
from agent_core.runtime import router
from agent_core.runtime.agents import AgentCatalog, AgentDefinition
from agent_core.runtime.next_step import FinalAnswer
from agent_core.store.memory_table import MemoryTable
from agent_core.tools.base import ToolContext
from tests.support.fake_llm import Reply, ScriptedLlm
from tests.support.fake_run import FakeRun, collect
from tests.support.fixtures import make_settings
from tests.support.runs import run_turn, text

DOCS = Path(__file__).resolve().parents[2] / "docs"
_BLOCK = re.compile(r"```python\n(# example: [^\n]*)\n(.*?)```", re.DOTALL)


def example(doc: str, title: str) -> dict[str, Any]:
    """The names a code block of a how-to defines, executed as a module of its own."""
    path = DOCS / doc
    blocks = {heading.removeprefix("# example: "): code for heading, code in _BLOCK.findall(path.read_text("utf-8"))}
    namespace: dict[str, Any] = {"__name__": f"howto_{title.replace(' ', '_')}"}
    exec(compile(blocks[title], f"{path}: {title}", "exec"), namespace)
    return namespace


def _context(llm: ScriptedLlm, agent: AgentDefinition, audit: list[dict[str, Any]], **settings: Any) -> AppContext:
    context = build_context(make_settings(**settings), table=MemoryTable(), llm=llm, audit=audit.append)
    context.deps.agents = AgentCatalog([agent])
    return context


async def test_the_tool_of_the_howto_is_called_governed_and_audited() -> None:
    tool = example("howto-tool.md", "the word_count tool")["WordCountTool"]()
    llm = ScriptedLlm(
        Reply(tool_calls=[("c1", "word_count", {"text": "one two three"}), ("c2", "word_count", {"text": " "})]),
        Reply(text="Three words; the second text has none."),
    )
    audit: list[dict[str, Any]] = []
    context = _context(llm, AgentDefinition(key="writer", name="Writer", tools=["word_count"]), audit)
    context.deps.tools.registry.register(tool)  # what adding it to build_registry does

    events = await run_turn(context, "writer", "how many words are in 'one two three'?")

    offered = [t["function"] for t in llm.requests[0].tools]
    assert offered[0]["name"] == "word_count" and offered[0]["parameters"]["required"] == ["text"]
    results = {e["toolId"]: e for e in events if e["type"] == "tool.result"}
    assert results["c1"]["status"] == "ok" and results["c1"]["result"] == {"words": 3, "characters": 13}
    assert results["c2"]["status"] == "error" and results["c2"]["result"] == {"error": "there are no words to count"}
    lines = sorted((line["toolCallId"], line["toolName"], line["toolKind"], line["reason"]) for line in audit)
    assert lines == [("c1", "word_count", "backend", ""), ("c2", "word_count", "backend", "empty_text")]
    assert text(events) == "Three words; the second text has none."


async def test_governance_denies_the_tool_of_the_howto_when_not_allowed() -> None:
    tool = example("howto-tool.md", "the word_count tool")["WordCountTool"]()
    llm = ScriptedLlm(Reply(text="I cannot count here."))
    audit: list[dict[str, Any]] = []
    agent = AgentDefinition(key="writer", name="Writer", tools=["word_count"])
    context = _context(llm, agent, audit, AGENT_TOOLS_ALLOWED="time")
    context.deps.tools.registry.register(tool)

    await run_turn(context, "writer", "count the words of 'a b'")
    assert llm.requests[0].tools == [], "a tool governance would refuse is not offered to the model"

    settings = context.settings
    ctx = ToolContext("req", "chat", "u", settings, "UTC", datetime.now(UTC))
    execution = await context.deps.tools.execute(ToolCall(id="c1", name="word_count", arguments='{"text": "a"}'), ctx)
    assert (execution.status, execution.reason) == (ToolStatus.DENIED, "not_allowed")
    assert (audit[-1]["toolName"], audit[-1]["reason"]) == ("word_count", "not_allowed")


async def test_the_strategy_of_the_howto_runs_as_a_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    strategy = example("howto-strategy.md", "the outline strategy")["outline_strategy"]
    monkeypatch.setitem(router.STRATEGIES, "outline", strategy)  # what adding it to STRATEGIES does
    # ... and what adding "outline" to AgentDefinition.mode allows (construct skips that Literal's check)
    agent = AgentDefinition.model_construct(key="planner", name="Planner", mode="outline")
    llm = ScriptedLlm(Reply(text="1. Kyoto 2. April 3. Budget"), Reply(text="Go to Kyoto in April."))
    context = _context(llm, agent, [])

    events = await run_turn(context, "planner", "plan my trip")

    route = next(e for e in events if e["type"] == "run.route")
    assert (route["mode"], route["reason"]) == ("outline", "outline, then answer")
    assert text(events) == "Go to Kyoto in April.", "the outline is not streamed, the answer is"
    assert "three-point outline" in llm.requests[0].messages[0]["content"]
    assert llm.requests[1].messages[-1]["content"] == "Answer following this outline:\n1. Kyoto 2. April 3. Budget"
    assert events[-1]["type"] == "run.complete"
    stored = await context.deps.chats.messages_between(events[0]["chatId"], None, None)
    assert [(m.role, m.content) for m in stored][-1] == (Role.ASSISTANT, "Go to Kyoto in April.")


async def test_the_strategy_of_the_howto_ends_with_its_answer_as_a_step() -> None:
    """Alone, over the fake run of the how-to's step 4: the outline is not streamed, the answer is its final step."""
    strategy = example("howto-strategy.md", "the outline strategy")["outline_strategy"]
    agent = AgentDefinition(key="planner", name="Planner")
    r = FakeRun(agent, [Reply(text="1. Kyoto 2. April"), Reply(text="Go to Kyoto in April.")], message="plan my trip")

    events, step = await collect(strategy, r)

    assert step == FinalAnswer("Go to Kyoto in April.")
    assert [e.delta for e in events if isinstance(e, ContentDelta)] == ["Go to Kyoto in April."]
    assert [q.forward_content for q in r.requests] == [False, True]
