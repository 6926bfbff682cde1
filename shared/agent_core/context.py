"""The composition root: builds what the app is wired from (`container.RunDeps`: the store by role, LLM, tools,
agents, work queue) and the jobs it runs from Settings, once."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from agent_core.config import Settings
from agent_core.container import RunDeps, store_roles
from agent_core.domain.jobs import ResponseJob, WorkQueue
from agent_core.jobs.handlers import (
    JOB_HANDLERS,
    SCHEDULED_PASSES,
    HandlerMap,
    JobRunner,
    ScheduledJob,
    ScheduledPass,
)
from agent_core.jobs.inprocess import InProcessWorkQueue, JobJournal, counting
from agent_core.jobs.report import JobReport
from agent_core.jobs.responses import background_responses
from agent_core.llm.base import LlmClient
from agent_core.memory.embedding import Embedder, HashingEmbedder
from agent_core.memory.long_term import LongTermMemory
from agent_core.runtime.agents import catalog
from agent_core.store.aws_client import boto_client
from agent_core.store.blob import BlobStore
from agent_core.store.memory_blob import MemoryBlobStore
from agent_core.store.memory_table import MemoryTable
from agent_core.store.responses import ResponseStore
from agent_core.store.run_checkpoint import RunCheckpointStore
from agent_core.store.run_log import RunLogStore
from agent_core.store.table import Table
from agent_core.store.table_store import TableStore
from agent_core.tools.builtin.http_get import HttpGetTool
from agent_core.tools.builtin.memory_tools import GetUserProfileTool, SearchChatHistoryTool, SearchMemoryTool
from agent_core.tools.builtin.save_file import SaveFileTool
from agent_core.tools.builtin.time import TimeTool
from agent_core.tools.frontend import AskUserTool
from agent_core.tools.mcp import McpCatalog
from agent_core.tools.registry import ToolRegistry
from agent_core.tools.service import AuditSink, ToolService
from agent_core.tracing import configure_tracing, exporting, flush_traces, traced_llm
from agent_core.usage.meter import UsageMeter


@dataclass
class AppContext:
    settings: Settings
    deps: RunDeps
    background: InProcessWorkQueue  # jobs as tasks of this process: `deps.work_queue` unless SQS takes them
    jobs: JobRunner  # the one {job type: handler} map, bound to `deps`: run by `background` and the SQS worker
    schedules: Mapping[ScheduledJob, ScheduledPass]
    responses: ResponseStore  # stored /v1/responses and OpenAI conversation metadata

    async def before_response(self) -> None:
        """Where a route's response is about to end: in Lambda, where nothing runs after a response, wait for the
        background work the request started; elsewhere that work runs on by itself. Behind the Web Adapter (the
        stream function: no handler returns there, so nothing else flushes) the run's spans are exported now too,
        before the process may be frozen."""
        if self.settings.in_lambda:
            await self.background.join()
            if self.settings.behind_web_adapter and exporting():
                await asyncio.to_thread(flush_traces)

    async def run_scheduled(self, name: ScheduledJob, now: datetime, user_id: str | None = None) -> JobReport:
        """One scheduled pass at `now` (over `user_id`'s data only, if given), then the in-process work it
        enqueued has finished (none when SQS takes it). The report then says what that work did: `summarised`
        counts the summaries its jobs wrote, `failed` also the jobs that failed."""
        with counting() as done:
            report = await self.schedules[name](self.deps, now, user_id)
        await self.background.join()
        report.summarised += done.changed
        report.failed += done.failed
        return report


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
    tools = [
        TimeTool(),
        HttpGetTool(),
        SaveFileTool(),
        AskUserTool(),
        GetUserProfileTool(),
        SearchChatHistoryTool(),
        SearchMemoryTool(),
    ]
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


def build_embedder(settings: Settings) -> Embedder:
    """The configured Embedder: offline feature hashing (default), the OpenAI-compatible endpoint, or Titan."""
    if settings.memory_embedder == "openai":
        from agent_core.memory.embedders import OpenAiEmbedder

        return OpenAiEmbedder(settings)
    if settings.memory_embedder == "bedrock":
        from agent_core.memory.embedders import TitanEmbedder

        return TitanEmbedder(settings)
    return HashingEmbedder(settings.memory_embedding_dimensions)


def build_context(
    settings: Settings,
    *,
    table: Table | None = None,
    llm: LlmClient | None = None,
    audit: AuditSink | None = None,
    blobs: BlobStore | None = None,
    embedder: Embedder | None = None,
    job_handlers: HandlerMap | None = None,
    schedules: Mapping[ScheduledJob, ScheduledPass] | None = None,
) -> AppContext:
    """Wire everything; tests pass their own table, LLM, audit sink, blob store, embedder, job handlers or scheduled
    passes."""
    journal: JobJournal | None = None
    if table is None and settings.effective_storage == "embedded":
        from agent_core.store.embedded import open_embedded

        # Queued jobs are kept in the same database, so a restart does not lose them.
        journal = open_embedded(settings).jobs
    table = table if table is not None else build_table(settings)
    if blobs is None:
        blobs = MemoryBlobStore() if isinstance(table, MemoryTable) else build_blobs(settings)
    store = TableStore(table, blobs)  # every role on the one table, handed out by role (`store_roles`)
    registry = build_registry(settings)
    llm = llm if llm is not None else build_llm(settings, registry)
    if configure_tracing(settings):  # model calls get their spans only when traces are on (no wrapper otherwise)
        llm = traced_llm(llm, settings.effective_llm_provider)
    responses = ResponseStore(table, blobs)
    if job_handlers is None:
        job_handlers = {**JOB_HANDLERS, ResponseJob: background_responses(responses)}
    background = InProcessWorkQueue(journal)
    work_queue: WorkQueue = background
    if settings.in_lambda and settings.work_queue_url:
        from agent_core.jobs.sqs import SqsWorkQueue

        # Nothing runs after a Lambda response: background work goes to the worker through SQS.
        work_queue = SqsWorkQueue(settings.work_queue_url, lambda: boto_client(settings, "sqs"))
    deps = RunDeps(
        settings=settings,
        **store_roles(store),
        llm=llm,
        tools=ToolService(registry, settings, audit),
        agents=catalog(registry.names(), settings.definitions_dir),
        work_queue=work_queue,
        blobs=blobs,
        mcp=McpCatalog(settings, env=settings.environment()),
        memory=LongTermMemory(store.records, embedder or build_embedder(settings)),
        usage=UsageMeter(table, settings),
        in_process=background,
        run_log=RunLogStore(table, settings.run_log_ttl_s),
        checkpoints=RunCheckpointStore(table, settings.run_log_ttl_s),
    )
    jobs = JobRunner(job_handlers, deps)
    background.serve(jobs)  # the SQS worker runs the same `jobs` (lambda_entry)
    return AppContext(
        settings=settings,
        deps=deps,
        background=background,
        jobs=jobs,
        schedules=SCHEDULED_PASSES if schedules is None else schedules,
        responses=responses,
    )
