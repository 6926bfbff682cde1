"""Ephemeral runs (stateless endpoints, store:false): the same pipeline over a request-scoped in-memory store."""

from __future__ import annotations

import dataclasses

from agent_core.container import RunDeps, store_roles
from agent_core.domain.ids import new_chat_id, now_ms, sortable_id
from agent_core.domain.jobs import Job
from agent_core.domain.models import Chat, Message, Role
from agent_core.runtime.agents import AgentCatalog, AgentDefinition
from agent_core.store.base import ChatStore
from agent_core.store.memory_blob import MemoryBlobStore
from agent_core.store.memory_table import MemoryTable
from agent_core.store.table_store import TableStore


class DiscardQueue:
    """Background work for an ephemeral run has nowhere to go: it is dropped."""

    async def enqueue(self, job: Job, delay_s: int = 0) -> None:
        return None

    async def enqueue_many(self, jobs: list[Job]) -> None:
        return None


def ephemeral_deps(deps: RunDeps, agent: AgentDefinition | None = None) -> RunDeps:
    """The same settings, LLM and tools; a fresh in-memory store and blob store; nothing durable. The usage
    meter stays the app's (the run is counted and held to its user's budget), reserving apart from the turn."""
    agents = AgentCatalog([agent]) if agent is not None else deps.agents
    return dataclasses.replace(
        deps,
        **store_roles(TableStore(MemoryTable())),
        work_queue=DiscardQueue(),
        blobs=MemoryBlobStore(),
        agents=agents,
        run_log=None,  # nothing durable: an ephemeral run cannot be resumed
        usage=deps.usage.apart() if deps.usage is not None else None,
    )


async def seed_chat(chats: ChatStore, user_id: str, agent_key: str, history: list[tuple[Role, str]]) -> Chat:
    """An ephemeral chat holding the prior messages a stateless request carries."""
    at = now_ms()
    chat = Chat(chat_id=new_chat_id(), user_id=user_id, agent_key=agent_key, created_at=at, last_activity_at=at)
    await chats.create_chat(chat)
    messages = [
        Message(id=sortable_id(), chat_id=chat.chat_id, role=role, content=text, created_at=at)
        for role, text in history
    ]
    await chats.add_messages(chat.chat_id, messages)
    return chat
