"""The composition root: builds the store, LLM, tools, agents and queue from Settings, once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agent_core.config import Settings
from agent_core.domain.jobs import ResponseJob, WorkQueue
from agent_core.jobs.handlers import JobHandlers
from agent_core.jobs.inprocess import InProcessWorkQueue, JobJournal
from agent_core.llm.base import LlmClient
from agent_core.runtime.agents import catalog
from agent_core.runtime.deps import RunDeps
from agent_core.store.aws_client import boto_client
from agent_core.store.base import Store
from agent_core.store.blob import BlobStore
from agent_core.store.memory_blob import MemoryBlobStore
from agent_core.store.memory_table import MemoryTable
from agent_core.store.table import Table
from agent_core.store.table_store import TableStore
from agent_core.tools.builtin.http_get import HttpGetTool
from agent_core.tools.builtin.memory_tools import GetUserProfileTool, SearchChatHistoryTool
from agent_core.tools.builtin.save_file import SaveFileTool
from agent_core.tools.builtin.time import TimeTool
from agent_core.tools.frontend import AskUserTool
from agent_core.tools.mcp import McpCatalog
from agent_core.tools.registry import ToolRegistry
from agent_core.tools.service import AuditSink, ToolService


@dataclass
class AppContext:
    settings: Settings
    deps: RunDeps
    queue: InProcessWorkQueue
    table: Table
    blobs: BlobStore | None


def build_table(settings: Settings) -> Table:
    """The table for the configured storage: in-memory, embedded SQLite, or real AWS."""
    storage = settings.effective_storage
    if storage == "memory":
        return MemoryTable()
    if storage == "embedded":
        from agent_core.store.embedded import open_embedded

        return open_embedded(settings).table
    from agent_core.store.dynamodb import DynamoTable

    return DynamoTable(settings.table_name, lambda: boto_client(settings, "dynamodb"))


def build_registry(settings: Settings) -> ToolRegistry:
    tools = [TimeTool(), HttpGetTool(), SaveFileTool(), AskUserTool(), GetUserProfileTool(), SearchChatHistoryTool()]
    return ToolRegistry(tools, default_timezone=settings.default_timezone)


def build_blobs(settings: Settings) -> BlobStore:
    """S3 for aws storage, files beside the database for embedded, in-memory otherwise."""
    storage = settings.effective_storage
    if storage == "memory":
        return MemoryBlobStore()
    if storage == "embedded":
        from agent_core.store.embedded import open_embedded

        return open_embedded(settings).blobs
    from agent_core.store.s3 import S3BlobStore, make_s3_client

    return S3BlobStore(settings.data_bucket, lambda: make_s3_client(settings))


def build_llm(settings: Settings, registry: ToolRegistry) -> LlmClient:
    """The configured provider's adapter, wrapped in the fallback chain when AGENT_LLM_FALLBACK names one."""
    provider = settings.effective_llm_provider
    if provider == "offline":
        from agent_core.llm.offline import OfflineLlm

        return OfflineLlm(lambda message, names: registry.quick_calls(message, names, for_model=True))
    primary = provider_llm(settings, provider)
    if not settings.llm_fallback:
        return primary
    from agent_core.llm.fallback import ChainEntry, FallbackLlm

    fallbacks = [ChainEntry(p, model, provider_llm(settings, p)) for p, model in settings.fallback_chain()]
    return FallbackLlm(ChainEntry(provider, settings.model, primary), fallbacks)


def provider_llm(settings: Settings, provider: str) -> LlmClient:
    """One provider's adapter; each imports its SDK only when chosen (Bedrock never imports openai)."""
    if provider == "bedrock":
        from agent_core.llm.bedrock_client import BedrockLlmClient

        return BedrockLlmClient(settings)
    from agent_core.llm.openai_client import OpenAiLlmClient

    if provider != settings.effective_llm_provider:
        settings = settings.model_copy(update={"llm_provider": provider})
    return OpenAiLlmClient(settings)


def _response_jobs(deps: RunDeps, table: Table, blobs: BlobStore | None) -> Callable[[ResponseJob], Awaitable[None]]:
    """The worker's handler for background /v1/responses runs."""

    async def run(job: ResponseJob) -> None:
        from agent_core.runtime.responses_exec import run_queued
        from agent_core.store.responses import ResponseStore

        await run_queued(deps, ResponseStore(table, blobs), job.response_id)

    return run


def build_context(
    settings: Settings,
    *,
    table: Table | None = None,
    llm: LlmClient | None = None,
    audit: AuditSink | None = None,
    blobs: BlobStore | None = None,
) -> AppContext:
    """Wire everything; tests pass their own table, LLM, audit sink or blob store."""
    journal: JobJournal | None = None
    if table is None and settings.effective_storage == "embedded":
        from agent_core.store.embedded import open_embedded

        # Queued jobs are kept in the same database, so a restart does not lose them.
        journal = open_embedded(settings).jobs
    table = table if table is not None else build_table(settings)
    if blobs is None:
        blobs = MemoryBlobStore() if isinstance(table, MemoryTable) else build_blobs(settings)
    store: Store = TableStore(table, blobs)
    registry = build_registry(settings)
    llm = llm if llm is not None else build_llm(settings, registry)
    handlers: list[JobHandlers] = []
    queue = InProcessWorkQueue(lambda job: handlers[0].handle(job), journal)
    work_queue: WorkQueue = queue
    if settings.in_lambda and settings.work_queue_url:
        from agent_core.jobs.sqs import SqsWorkQueue

        # Nothing runs after a Lambda response: background work goes to the worker through SQS.
        work_queue = SqsWorkQueue(settings.work_queue_url, lambda: boto_client(settings, "sqs"))
    deps = RunDeps(
        settings=settings,
        store=store,
        llm=llm,
        tools=ToolService(registry, settings, audit),
        agents=catalog(registry.names(), settings.definitions_dir),
        queue=work_queue,
        blobs=blobs,
        mcp=McpCatalog(settings, env=settings.environment()),
    )
    handlers.append(JobHandlers(deps))
    deps.response_jobs = _response_jobs(deps, table, blobs)
    return AppContext(settings=settings, deps=deps, queue=queue, table=table, blobs=blobs)
