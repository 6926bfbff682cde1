"""UI actions: action.start/args/end/result; the run does not wait; the model gets `{}`."""

from __future__ import annotations

from agent_core.context import build_context
from agent_core.domain.ids import new_chat_id, now_ms
from agent_core.domain.models import Chat
from agent_core.runtime.agents import AgentCatalog, AgentDefinition
from agent_core.runtime.loop import TurnRunner
from agent_core.runtime.turn import PreparedTurn, TurnRequest, prepare_turn
from agent_core.store.memory_table import MemoryTable
from agent_core.tools.frontend import declared_tool
from tests.support.fake_llm import Reply, ScriptedLlm
from tests.support.fixtures import make_settings


async def test_action_events_and_the_run_goes_on_without_waiting() -> None:
    llm = ScriptedLlm(
        Reply(tool_calls=[("act_1", "highlight", {"selector": "#total"}), ("call_2", "time", {})]),
        Reply(text="highlighted"),
    )
    context = build_context(make_settings(), table=MemoryTable(), llm=llm, audit=lambda line: None)
    registry = context.deps.tools.registry
    registry.register(
        declared_tool(
            "action",
            "highlight",
            "Highlight an element on the page.",
            {"type": "object", "properties": {"selector": {"type": "string"}}, "required": ["selector"]},
        )
    )
    context.deps.agents = AgentCatalog([AgentDefinition(key="ui", name="UI", tools=["highlight", "time"])])
    at = now_ms()
    chat = Chat(chat_id=new_chat_id(), user_id="u", agent_key="ui", created_at=at, last_activity_at=at)
    await context.deps.chats.create_chat(chat)
    prepared = await prepare_turn(context.deps, TurnRequest(user_id="u", chat_id=chat.chat_id, message="show me"))
    assert isinstance(prepared, PreparedTurn)
    events = [e.wire() async for e in TurnRunner(prepared).events()]
    action = [e for e in events if e["type"].startswith("action.")]
    assert [e["type"] for e in action] == ["action.start", "action.args", "action.args", "action.end", "action.result"]
    assert action[0]["actionName"] == "highlight" and action[-1]["result"] == {}
    assert [e["chunkIndex"] for e in action if e["type"] == "action.args"] == [0, 1]
    assert "".join(e["delta"] for e in action if e["type"] == "action.args") == '{"selector": "#total"}'
    assert not any(e.get("toolId") == "act_1" for e in events), "actions are not tool events"
    assert events[-1]["type"] == "run.complete"
    tool_messages = [m for m in llm.requests[1].messages if m["role"] == "tool"]
    assert tool_messages[0] == {"role": "tool", "tool_call_id": "act_1", "content": "{}"}
