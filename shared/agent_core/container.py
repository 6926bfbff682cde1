"""What the app is wired from: the services every run, route and job receives, passed in explicitly (no globals,
no thread-locals). The composition root (`context.build_context`) builds one from Settings.

The store is handed out by role (`store/base.py`): each consumer reaches the role it uses, never the whole store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from agent_core.config import Settings
from agent_core.domain.jobs import WorkQueue
from agent_core.guardrails.guard import Guard, Guardrails
from agent_core.llm.base import LlmClient
from agent_core.memory.long_term import LongTermMemory
from agent_core.runtime.agents import AgentCatalog, AgentDefinition
from agent_core.runtime.cancel import CancelRegistry
from agent_core.store.base import ChatStore, MemoryStore, Store, TurnStore, WaitStore
from agent_core.store.blob import BlobStore
from agent_core.store.run_checkpoint import RunCheckpointStore
from agent_core.store.run_log import RunLogStore
from agent_core.tools.data_links import DataLinks
from agent_core.tools.mcp import McpCatalog
from agent_core.tools.service import ToolService
from agent_core.usage.meter import UsageMeter


class StoreRoles(TypedDict):
    """RunDeps' store fields: each role of one store (`RunDeps(**store_roles(store), ...)`)."""

    chats: ChatStore
    turns: TurnStore
    waits: WaitStore
    memory_store: MemoryStore


def store_roles(store: Store) -> StoreRoles:
    """The roles of one store that implements them all (TableStore), as RunDeps takes them."""
    return StoreRoles(chats=store, turns=store, waits=store, memory_store=store)


@dataclass
class RunDeps:
    settings: Settings
    chats: ChatStore  # chats and their messages
    turns: TurnStore  # turns and runs: the lease, a turn's begin and end, run records, cancellation
    waits: WaitStore  # frontend tool calls waiting for the browser's params
    memory_store: MemoryStore  # hierarchical memory: summaries, sessions, day markers, daily summaries, profiles
    llm: LlmClient
    tools: ToolService
    agents: AgentCatalog
    work_queue: WorkQueue  # where background jobs go: SQS for the worker in Lambda, else the in-process queue
    blobs: BlobStore | None = None
    cancels: CancelRegistry = field(default_factory=CancelRegistry)
    mcp: McpCatalog | None = None
    memory: LongTermMemory | None = None  # long-term memory records (search, and the jobs that write them)
    links: DataLinks | None = None  # data-file links; built from `settings` unless given (a test's clock)
    usage: UsageMeter | None = None  # the usage ledger and budgets (None: nothing is counted or limited)
    # This process's own queue (the work_queue too, unless SQS takes that): work that must not wait for a
    # worker yet must not delay the answer, run after it and awaited before a Lambda response ends.
    in_process: WorkQueue | None = None
    guardrails: Guardrails | None = None  # the agents' guardrail checks; built from `settings` unless given
    run_log: RunLogStore | None = None  # runs' durable event logs (resume); None: not kept (ephemeral runs)
    # Runs' checkpoints where they wait on people (a run whose process died goes on from it); None: not kept
    checkpoints: RunCheckpointStore | None = None

    def __post_init__(self) -> None:
        if self.links is None:
            self.links = DataLinks(self.settings)
        if self.guardrails is None:
            self.guardrails = Guardrails(self.settings)
        self.guardrails.validate([a.guardrails for a in self.agents.all() if a.guardrails is not None])

    def guard_for(self, agent: AgentDefinition) -> Guard | None:
        """The agent's guardrail checks (None: it has none)."""
        assert self.guardrails is not None  # set by __post_init__
        return self.guardrails.for_policy(agent.guardrails)

    async def screen_input(self, agent: AgentDefinition, message: str, checked: bool = False) -> str:
        """A user's message through the agent's input guardrail, before anything is stored or the model called:
        unchanged, masked, or refused (GuardrailIntervened); `checked`: it already was."""
        guard = self.guard_for(agent)
        if checked or guard is None or not message or not guard.checks("input"):
            return message
        return await guard.screen("input", message)

    @property
    def data_links(self) -> DataLinks:
        """The data-file links: signed when written and again whenever stored parts are read back."""
        assert self.links is not None  # set by __post_init__
        return self.links
