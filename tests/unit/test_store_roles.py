"""The store by role: each role's module implements its whole protocol and works alone over the shared table, and
`RunDeps` hands out roles, never the union (docs/design.md "Store")."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, get_type_hints

import pytest

from agent_core.container import RunDeps, store_roles
from agent_core.domain.models import Chat, Message, Role, Run, RunStatus, Summary, Wait, WaitStatus
from agent_core.store.base import ChatStore, MemoryStore, Store, TurnStore, WaitStore
from agent_core.store.chat_table import ChatTable
from agent_core.store.memory_hierarchy import HierarchyTable
from agent_core.store.memory_table import MemoryTable
from agent_core.store.table_store import TableStore
from agent_core.store.turn_table import TurnTable
from agent_core.store.wait_table import WaitTable

ROLES: list[tuple[type, Any]] = [
    (ChatTable, ChatStore),
    (TurnTable, TurnStore),
    (WaitTable, WaitStore),
    (HierarchyTable, MemoryStore),
]


def _stubs(protocol: Any) -> dict[str, Any]:
    """The methods a role protocol declares (its protocol bases' included), by name: their stub bodies."""
    return {
        name: value
        for base in reversed(protocol.__mro__)
        if getattr(base, "_is_protocol", False) and base.__module__ == "agent_core.store.base"
        for name, value in vars(base).items()
        if callable(value) and not name.startswith("_")
    }


def _unimplemented(cls: type, protocol: Any) -> list[str]:
    """Members that resolve to a protocol's stub: called, it would return None silently."""
    stubs = {id(value) for base in cls.__mro__ if getattr(base, "_is_protocol", False) for value in vars(base).values()}
    return [
        f"{cls.__name__}.{name}" for name in sorted(_stubs(protocol)) if id(inspect.getattr_static(cls, name)) in stubs
    ]


@pytest.mark.parametrize(("cls", "protocol"), ROLES, ids=[cls.__name__ for cls, _ in ROLES])
def test_each_role_module_implements_its_whole_protocol(cls: type, protocol: Any) -> None:
    assert _stubs(protocol)  # the check sees the protocol's methods
    assert _unimplemented(cls, protocol) == []


def test_the_check_finds_a_method_left_to_the_protocol() -> None:
    class Partial(WaitTable):
        get_wait = WaitStore.get_wait  # as if WaitTable had not written it

    assert _unimplemented(Partial, WaitStore) == ["Partial.get_wait"]


def test_the_table_store_is_every_role_at_once() -> None:
    assert _unimplemented(TableStore, Store) == []


def test_run_deps_hand_out_the_store_by_role() -> None:
    hints = get_type_hints(RunDeps)
    names = {f.name for f in dataclasses.fields(RunDeps)}
    assert {n: hints[n] for n in ("chats", "turns", "waits", "memory_store")} == {
        "chats": ChatStore,
        "turns": TurnStore,
        "waits": WaitStore,
        "memory_store": MemoryStore,
    }
    assert [n for n in names if hints[n] is Store] == []  # nobody receives the union
    assert set(store_roles(TableStore(MemoryTable()))) <= names


async def test_the_roles_work_apart_over_one_table() -> None:
    # Given each role built on its own over one table
    table = MemoryTable()
    chats, turns, waits, memory = ChatTable(table), TurnTable(table), WaitTable(table), HierarchyTable(table)
    chat = await chats.create_chat(Chat(chat_id="c1", user_id="alice", created_at=1, last_activity_at=1))
    run = Run(run_id="r1", chat_id="c1", user_id="alice", request_id="q1", started_at=2)
    asked = Message(id="m1", chat_id="c1", role=Role.USER, content="hi", request_id="q1", created_at=2)
    # When a turn begins, waits on the browser and is cancelled
    await turns.begin_turn(chat, run, asked, 60_000)
    await waits.create_wait(Wait(run_id="r1", tool_id="t1", user_id="alice", expires_at=2**40))
    assert await turns.request_cancel("c1", "r1")
    # Then each role reads what the others wrote
    wait = await waits.get_wait("r1", "t1")
    assert wait is not None and wait.status == WaitStatus.CANCELLED  # the cancel closed the wait
    assert [m.content for m in await memory.messages_between("c1", None, None)] == ["hi"]
    assert await turns.question_of(run) == "hi"
    assert await memory.replace_summary(Summary(chat_id="c1", content="s", covers_message_id="m1", updated_at=3), None)
    context = await turns.load_turn_context("c1", "alice")
    assert context is not None and context.summary is not None and context.summary.content == "s"
    await turns.abandon_turn(run.model_copy(update={"status": RunStatus.CANCELLED, "ended_at": 3}))
    after = await chats.get_chat("c1", "alice")
    assert after is not None and after.active_run_id is None and after.message_count == 1
    # And deleting the chat removes the run's partition (pointer, waits) too
    assert await chats.delete_chat("c1", "alice")
    assert await waits.get_wait("r1", "t1") is None and await turns.get_run_pointer("r1", 0) is None
