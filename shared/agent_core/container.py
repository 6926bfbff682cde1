"""What a run needs, passed in explicitly: no globals, no thread-locals."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from agent_core.config import Settings
from agent_core.domain.jobs import ResponseJob, WorkQueue
from agent_core.llm.base import LlmClient
from agent_core.runtime.agents import AgentCatalog
from agent_core.runtime.cancel import CancelRegistry
from agent_core.store.base import Store
from agent_core.store.blob import BlobStore
from agent_core.tools.mcp import McpCatalog
from agent_core.tools.service import ToolService


@dataclass
class RunDeps:
    settings: Settings
    store: Store
    llm: LlmClient
    tools: ToolService
    agents: AgentCatalog
    queue: WorkQueue
    blobs: BlobStore | None = None
    cancels: CancelRegistry = field(default_factory=CancelRegistry)
    mcp: McpCatalog | None = None
    response_jobs: Callable[[ResponseJob], Awaitable[None]] | None = None  # background /v1/responses runs
