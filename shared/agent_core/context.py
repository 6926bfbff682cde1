"""The composition root: builds the store, LLM, tools, agents and queue from Settings, once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_core.config import Settings
from agent_core.jobs.handlers import JobHandlers
from agent_core.jobs.inprocess import InProcessWorkQueue
from agent_core.llm.base import LlmClient
from agent_core.runtime.agents import AgentCatalog, builtin_agents
from agent_core.runtime.deps import RunDeps
from agent_core.store.base import Store
from agent_core.store.memory import MemoryTable
from agent_core.store.table import Table
from agent_core.store.table_store import TableStore
from agent_core.tools.builtin.http_get import HttpGetTool
from agent_core.tools.builtin.time import TimeTool
from agent_core.tools.registry import ToolRegistry
from agent_core.tools.service import AuditSink, ToolService


@dataclass
class AppContext:
    settings: Settings
    deps: RunDeps
    queue: InProcessWorkQueue
    table: Table


def _boto_client(settings: Settings, service: str) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(retries={"max_attempts": 4, "mode": "adaptive"}, connect_timeout=3, read_timeout=10)
    return boto3.session.Session().client(service, region_name=settings.aws_region, config=config)  # type: ignore[call-overload]


def build_table(settings: Settings) -> Table:
    """The table for the configured storage: in-memory, embedded moto, or real AWS."""
    storage = settings.effective_storage
    if storage == "memory":
        return MemoryTable()
    from agent_core.store.dynamodb import DynamoTable

    if storage == "embedded":
        from agent_core.store.embedded import ensure_resources, start_embedded_aws

        start_embedded_aws()
        ensure_resources(settings, _boto_client(settings, "dynamodb"), _boto_client(settings, "s3"))
    return DynamoTable(settings.table_name, lambda: _boto_client(settings, "dynamodb"))


def build_registry(settings: Settings) -> ToolRegistry:
    return ToolRegistry([TimeTool(), HttpGetTool()], default_timezone=settings.default_timezone)


def build_llm(settings: Settings, registry: ToolRegistry) -> LlmClient:
    if settings.effective_llm_provider == "offline":
        from agent_core.llm.offline import OfflineLlm

        return OfflineLlm(registry.quick_calls)
    from agent_core.llm.openai_client import OpenAiLlmClient

    return OpenAiLlmClient(settings)


def build_context(
    settings: Settings,
    *,
    table: Table | None = None,
    llm: LlmClient | None = None,
    audit: AuditSink | None = None,
) -> AppContext:
    """Wire everything; tests pass their own table, LLM or audit sink."""
    table = table if table is not None else build_table(settings)
    store: Store = TableStore(table)
    registry = build_registry(settings)
    llm = llm if llm is not None else build_llm(settings, registry)
    queue = InProcessWorkQueue(JobHandlers(settings, store, llm).handle)
    deps = RunDeps(
        settings=settings,
        store=store,
        llm=llm,
        tools=ToolService(registry, settings, audit),
        agents=AgentCatalog(builtin_agents(registry.names())),
        queue=queue,
    )
    return AppContext(settings=settings, deps=deps, queue=queue, table=table)
