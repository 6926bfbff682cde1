"""Approval tests' pieces: a real tool that records every execution, an agent gating it, a turn driven in-process
with a hook answering its events (as a person would)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from pydantic import BaseModel

from agent_core.context import AppContext, build_context
from agent_core.domain.ids import new_chat_id, now_ms
from agent_core.domain.models import ApprovalDecision, Chat, Run, RunPointer
from agent_core.runtime.agents import AgentCatalog, AgentDefinition
from agent_core.runtime.loop import TurnRunner
from agent_core.runtime.turn import PreparedTurn, TurnRequest, prepare_turn
from agent_core.store import items as it
from agent_core.store.table import Table
from agent_core.tools.base import Tool, ToolContext
from tests.support.fake_llm import Reply, ScriptedLlm
from tests.support.fixtures import make_settings
from tests.support.wait import apoll_until


class WriteArgs(BaseModel):
    path: str
    content: str = ""


class RecordingTool(Tool):
    """`write_note`: executes by appending its call id to `executions` (what exactly-once counts)."""

    name = "write_note"
    description = "Write a note to a path."
    args_model = WriteArgs
    executions: ClassVar[list[str]]

    def __init__(self) -> None:
        self.executions = []

    async def run(self, args: Any, ctx: ToolContext) -> Any:
        self.executions.append(ctx.tool_call_id)
        return {"written": args.path, "bytes": len(args.content)}


BIG_NOTES: dict[str, Any] = {"when": {"arg": "content", "sizeOver": 100}, "reason": "notes over 100 bytes"}


def approval_context(
    llm: ScriptedLlm,
    table: Table,
    audit: list[dict[str, Any]] | None = None,
    *,
    approval: Any = "always",
    **settings: Any,
) -> tuple[AppContext, RecordingTool]:
    """A context whose only agent (`writer`) has the recording tool under `approval`."""
    context = build_context(
        make_settings(**settings), table=table, llm=llm, audit=(audit if audit is not None else []).append
    )
    tool = RecordingTool()
    context.deps.tools.registry.register(tool)
    agent = AgentDefinition(key="writer", name="Writer", tools=[{"name": "write_note", "approval": approval}])
    context.deps.agents = AgentCatalog([agent])
    return context, tool


OnEvent = Callable[[dict[str, Any]], Awaitable[None]]


async def run_writer(
    context: AppContext, message: str, on_event: OnEvent | None = None, user: str = "u"
) -> list[dict[str, Any]]:
    """One turn of `writer`; `on_event` sees each event as it is sent (the run waits while it runs)."""
    at = now_ms()
    chat = Chat(chat_id=new_chat_id(), user_id=user, agent_key="writer", created_at=at, last_activity_at=at)
    await context.deps.chats.create_chat(chat)
    prepared = await prepare_turn(context.deps, TurnRequest(user_id=user, chat_id=chat.chat_id, message=message))
    assert isinstance(prepared, PreparedTurn)
    events: list[dict[str, Any]] = []
    async for envelope in TurnRunner(prepared).events():
        event = envelope.wire()
        events.append(event)
        if on_event is not None:
            await on_event(event)
    return events


async def live_run(table: Table, run_id: str, chat_id: str, user: str) -> Run:
    """A running run's items, put directly: its RUN item, its pointer and its chat holding the run's lease (an
    hour ahead: what a live run's heartbeat keeps renewing), which an approval's answer needs to be accepted."""
    at = now_ms()
    run = Run(run_id=run_id, chat_id=chat_id, user_id=user, request_id=f"q-{run_id}", started_at=at)
    await table.put(it.run_to_item(run))
    await table.put(it.pointer_to_item(RunPointer(run_id=run_id, chat_id=chat_id, user_id=user), at // 1000 + 3600))
    chat = Chat(chat_id=chat_id, user_id=user, created_at=at, last_activity_at=at)
    # the lease is the turn's update of the META, not a part of the chat's own item
    leased = {**it.chat_to_item(chat), "activeRunId": run_id, "leaseExpiresAt": at + 3_600_000}
    await table.put({**leased, **it.lease_index_keys(chat_id, at)})
    return run


def decision(approved: bool, user: str = "u", reason: str = "") -> ApprovalDecision:
    return ApprovalDecision(approved=approved, by=user, at_ms=now_ms(), reason=reason)


class SerialClient:
    """A boto3 client whose calls run one at a time: DynamoDB applies each conditional write atomically, while
    moto's in-process backend has no lock (two threads' conditional UpdateItem on one item can both pass its
    condition). Callers stay concurrent: their threads race for the lock in any order."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def serial(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return serial


class Outage(ConnectionError):
    pass


class DyingTable:
    """A table that stops answering once `dead` is set: what a crashed process leaves (nothing more lands)."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self.dead = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._table, name)
        if not callable(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.dead:
                raise Outage("the process is gone")
            return await attr(*args, **kwargs)

        return call


def writes(*ids: str) -> ScriptedLlm:
    """A model that calls `write_note` once per id, then answers "done"."""
    calls = [(cid, "write_note", {"path": f"{cid}.txt", "content": "hi"}) for cid in ids]
    return ScriptedLlm(Reply(tool_calls=calls), Reply(text="done"))


async def crash_while_waiting(table: Table, ids: tuple[str, ...]) -> tuple[AppContext, Any, list[dict[str, Any]]]:
    """A run of the dying instance waits on approvals for `ids`, keeps its checkpoint, then its process dies;
    returns the living instance's context, the tool, and the events the client had."""
    dying = DyingTable(table)
    dead_context, _ = approval_context(writes(*ids), dying)  # type: ignore[arg-type]
    seen: list[dict[str, Any]] = []
    asked = asyncio.Event()

    async def person(event: dict[str, Any]) -> None:
        seen.append(event)
        if sum(e["type"] == "tool.approval" for e in seen) == len(ids):
            asked.set()

    run = asyncio.create_task(run_writer(dead_context, "write notes", person))
    await asyncio.wait_for(asked.wait(), 30)
    run_id = seen[-1]["runId"]
    await apoll_until(lambda: table.get(it.checkpoint_key(run_id)), "the run's checkpoint")
    dying.dead = True  # the process dies: nothing it does from here reaches the table
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await run
    living, tool = approval_context(ScriptedLlm(Reply(text="done")), table)  # the model's next step: the answer
    return living, tool, seen
