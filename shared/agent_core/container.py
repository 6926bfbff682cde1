"""What the app is wired from: the services every run, route and job receives, passed in explicitly (no globals,
no thread-locals). The composition root (`context.build_context`) builds one from Settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_core.config import Settings
from agent_core.domain.jobs import WorkQueue
from agent_core.llm.base import LlmClient
from agent_core.memory.long_term import LongTermMemory
from agent_core.runtime.agents import AgentCatalog
from agent_core.runtime.cancel import CancelRegistry
from agent_core.store.base import Store
from agent_core.store.blob import BlobStore
from agent_core.store.run_log import RunLogStore
from agent_core.tools.data_links import DataLinks
from agent_core.tools.mcp import McpCatalog
from agent_core.tools.service import ToolService
from agent_core.usage.meter import UsageMeter


@dataclass
class RunDeps:
    settings: Settings
    store: Store
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
    run_log: RunLogStore | None = None  # runs' durable event logs (resume); None: not kept (ephemeral runs)

    def __post_init__(self) -> None:
        if self.links is None:
            self.links = DataLinks(self.settings)

    @property
    def data_links(self) -> DataLinks:
        """The data-file links: signed when written and again whenever stored parts are read back."""
        assert self.links is not None  # set by __post_init__
        return self.links
