"""The function registry: every Lambda of the product is one `FunctionSpec` entry in `FUNCTIONS`.

Adding a function = adding its directory `functions/<name>/` (a `handler.py`, or `run.sh` for a
streaming function) and one entry below. The stack turns each entry into the Lambda function, its log
group, its IAM grants (from `needs`), its REST API routes and Function URL (from `routes`), its
EventBridge Scheduler schedule (`schedule`) or its SQS event source (`consumes_queue`), and its alarms.
`tests/infra` fails while a `functions/<name>/` directory has no entry here, or an entry has no code.

Permissions come only from `needs`: each `Need` is one kind of access to one resource (read, update,
write, delete, send), and `infra.components.functions.need_actions` maps it to the exact IAM actions.
Give an entry the needs its code paths use, no more; docs/infrastructure.md lists each function's
needs, actions and the code that uses them, and `tests/infra` asserts each function's action set.
There are no all-in-one `TABLE`/`BUCKET`/`QUEUE` needs any more: they granted deletes, `DescribeTable`,
`DescribeSecret`, `GetQueueUrl` and `GetQueueAttributes` to functions that never call them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_DIR = REPO_ROOT / "functions"
STREAM_SCRIPT = "run.sh"


class Need(StrEnum):
    """One kind of access to one resource: the resource's environment variable and exactly its actions.

    The narrow needs (`TABLE_QUERY`, `TABLE_GET`, `TABLE_UPDATE`) are subsets of the wide ones (`TABLE_READ`,
    `TABLE_WRITE`) for functions whose code does only that. `TABLE_TRANSACT` and `QUEUE_SEND_BATCH` name
    the batch APIs a function calls: AWS authorises them through the item / message actions of the other
    needs (which the function must also have), but emulators such as moto check them by their own names.
    """

    TABLE_QUERY = "table_query"  # Query the table and its indexes (AGENT_TABLE_NAME)
    TABLE_GET = "table_get"  # GetItem: read items by key
    TABLE_READ = "table_read"  # GetItem, BatchGetItem, Query
    TABLE_UPDATE = "table_update"  # UpdateItem: change items that exist (conditional updates)
    TABLE_WRITE = "table_write"  # PutItem, UpdateItem: create and change items
    TABLE_DELETE = "table_delete"  # DeleteItem, BatchWriteItem (batches of deletes)
    TABLE_TRANSACT = "table_transact"  # writes through TransactWriteItems (with TABLE_UPDATE or TABLE_WRITE)
    BUCKET_READ = "bucket_read"  # GetObject (GET, HEAD, presigned GET), ListBucket (AGENT_DATA_BUCKET)
    BUCKET_WRITE = "bucket_write"  # PutObject
    BUCKET_DELETE = "bucket_delete"  # DeleteObject(s) under a prefix, listed with ListBucket
    QUEUE_SEND = "queue_send"  # SendMessage to the work queue (AGENT_WORK_QUEUE_URL)
    QUEUE_SEND_BATCH = "queue_send_batch"  # sends batches through SendMessageBatch (with QUEUE_SEND)
    LLM_SECRET = "llm_secret"  # GetSecretValue on the LLM API key secret (AGENT_LLM_API_KEY_SECRET)
    # Calls the model (AGENT_LLM_PROVIDER, AGENT_LLM_FALLBACK): with Bedrock in the chain, InvokeModel and
    # InvokeModelWithResponseStream on exactly the configured models (infra.components.bedrock)
    LLM_INVOKE = "llm_invoke"
    DATA_TOKEN_SECRET = "data_token_secret"  # GetSecretValue on the data-link key (AGENT_DATA_TOKEN_SECRET_NAME)


TABLE_NEEDS = frozenset(
    {
        Need.TABLE_QUERY,
        Need.TABLE_GET,
        Need.TABLE_READ,
        Need.TABLE_UPDATE,
        Need.TABLE_WRITE,
        Need.TABLE_DELETE,
        Need.TABLE_TRANSACT,
    }
)
BUCKET_NEEDS = frozenset({Need.BUCKET_READ, Need.BUCKET_WRITE, Need.BUCKET_DELETE})
QUEUE_NEEDS = frozenset({Need.QUEUE_SEND, Need.QUEUE_SEND_BATCH})
# A need that only makes sense together with one of these (the actions AWS authorises it by).
_REQUIRES = {
    Need.TABLE_TRANSACT: frozenset({Need.TABLE_UPDATE, Need.TABLE_WRITE}),
    Need.QUEUE_SEND_BATCH: frozenset({Need.QUEUE_SEND}),
}


@dataclass(frozen=True)
class Route:
    """A REST API resource path and the methods on it, all proxied to the function."""

    path: str
    methods: tuple[str, ...]


@dataclass(frozen=True)
class Schedule:
    """An EventBridge Scheduler cron (fields as in `ScheduleExpression.cron`) in an IANA time zone.

    The target input is `{"scheduledTime": "<aws.scheduler.scheduled-time>"}`, used by the job as "now".
    """

    minute: str = "0"
    hour: str = "*"
    time_zone: str = "Etc/UTC"


@dataclass(frozen=True)
class FunctionSpec:
    name: str  # the directory functions/<name>/; also the construct id and the alarm prefix
    description: str
    memory_mb: int = 1024
    timeout_s: int = 29
    needs: frozenset[Need] = frozenset()
    routes: tuple[Route, ...] = ()  # REST API routes; a function with routes also gets a Function URL
    streaming: bool = False  # FastAPI under uvicorn behind the Lambda Web Adapter, response streaming
    schedule: Schedule | None = None
    consumes_queue: bool = False  # the work queue's consumer (SQS event source, partial batch failures)
    environment: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"function name {self.name!r} must be a Python identifier (a package under functions/)")
        if self.streaming and not self.routes:
            raise ValueError(f"streaming function {self.name!r} needs routes")
        if self.timeout_s > 29 and self.routes and not self.streaming:
            raise ValueError(f"{self.name!r}: buffered API Gateway integrations stop at 29 s")
        for need, partners in _REQUIRES.items():
            if need in self.needs and not self.needs & partners:
                wanted = " or ".join(sorted(p.name for p in partners))
                raise ValueError(f"{self.name!r}: {need.name} is authorised through {wanted}; add it")

    @property
    def uses_table(self) -> bool:
        return bool(self.needs & TABLE_NEEDS)

    @property
    def uses_bucket(self) -> bool:
        return bool(self.needs & BUCKET_NEEDS)

    @property
    def sends_jobs(self) -> bool:
        return bool(self.needs & QUEUE_NEEDS)

    @property
    def handler(self) -> str:
        """The Lambda handler: the module path, or for streaming the script the web adapter runs."""
        if self.streaming:
            return f"functions/{self.name}/{STREAM_SCRIPT}"
        return f"functions.{self.name}.handler.handler"

    @property
    def entry_file(self) -> Path:
        return FUNCTIONS_DIR / self.name / (STREAM_SCRIPT if self.streaming else "handler.py")

    @property
    def is_http(self) -> bool:
        return bool(self.routes)

    @property
    def construct_id(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))


# What a conversation function does: turns (transactions, leases, messages, waits, snapshots spilled to
# S3, files from save_file), listings, deleting conversations and profiles (items and their S3 prefix),
# jobs for the worker, the LLM key, and data links signed for saved files.
_CONVERSATIONS = frozenset(
    {
        Need.TABLE_READ,
        Need.TABLE_WRITE,
        Need.TABLE_DELETE,
        Need.TABLE_TRANSACT,
        Need.BUCKET_READ,
        Need.BUCKET_WRITE,
        Need.BUCKET_DELETE,
        Need.QUEUE_SEND,
        Need.LLM_SECRET,
        Need.LLM_INVOKE,
        Need.DATA_TOKEN_SECRET,
    }
)

CHAT = FunctionSpec(
    name="chat",
    description="Conversation routes (buffered): /api/v1/conversations..., /api/ap/chat(s), agents, profile, memory, usage",  # noqa: E501
    memory_mb=1024,
    timeout_s=29,
    needs=_CONVERSATIONS,
    routes=(
        Route("/api/v1/conversations", ("GET", "POST")),
        Route("/api/v1/conversations/{proxy+}", ("GET", "POST", "DELETE")),
        Route("/api/ap/chats", ("GET",)),
        Route("/api/ap/chat", ("GET",)),
        Route("/api/ap/chat/{chatId}/end", ("POST",)),
        Route("/api/ap/agents", ("GET",)),
        Route("/api/ap/profile", ("GET", "PATCH", "DELETE")),
        Route("/api/ap/memory/search", ("POST",)),
        Route("/api/ap/chats/import", ("POST",)),
        Route("/api/ap/usage", ("GET",)),
    ),
)

STREAM = FunctionSpec(
    name="stream",
    description="Streaming routes (SSE): /api/ap/query, /api/ap/cancel, /api/chat/stream, the OpenAI-compatible /v1",
    memory_mb=1024,
    timeout_s=900,  # a streamed turn may run long: REST API STREAM allows 15 minutes per response
    needs=_CONVERSATIONS,  # the same stores as chat, plus /v1/responses (items, spilled bodies, deletes)
    streaming=True,
    routes=(
        Route("/api/ap/query", ("POST",)),
        Route("/api/ap/cancel", ("POST",)),
        Route("/api/ap/runs/{proxy+}", ("GET",)),
        Route("/api/chat/stream", ("POST",)),
        Route("/v1/responses", ("POST",)),
        Route("/v1/responses/{proxy+}", ("GET", "POST", "DELETE")),
        Route("/v1/conversations", ("POST",)),
        Route("/v1/conversations/{proxy+}", ("GET", "POST", "DELETE")),
        Route("/v1/models", ("GET",)),
        Route("/v1/chat/completions", ("POST",)),
        Route("/api/ui-stream", ("POST",)),
        Route("/api/ui-stream/{proxy+}", ("GET",)),  # useChat's resume: /api/ui-stream/{chatId}/stream
        Route("/api/ag-ui", ("POST",)),
        Route("/api/ag-ui/{proxy+}", ("POST",)),
    ),
)

SUBMIT = FunctionSpec(
    name="submit",
    description="A person's answer to a waiting run: POST /api/ap/submit (imports no LLM code)",
    memory_mb=512,
    timeout_s=10,
    # one conditional UpdateItem on the waiting call (submit_wait); a refused submit reads the run pointer
    # and the run (GetItem) to say why (ended, cancelling, unmatched); an answer for a run whose process
    # stopped while it waited reads its checkpoint (GetItem) and queues its continuation (SendMessage)
    needs=frozenset({Need.TABLE_UPDATE, Need.TABLE_GET, Need.QUEUE_SEND}),
    routes=(Route("/api/ap/submit", ("POST",)),),
)

DATA = FunctionSpec(
    name="data",
    description="Data files behind signed links: GET /api/ap/data (imports no LLM code)",
    memory_mb=512,
    timeout_s=15,
    # Only reads: the chat's owner (GetItem), the object (HEAD, GET, presigned GET), the link key.
    needs=frozenset({Need.TABLE_READ, Need.BUCKET_READ, Need.DATA_TOKEN_SECRET}),
    routes=(Route("/api/ap/data", ("GET",)),),
)

WORKER = FunctionSpec(
    name="worker",
    description="The work queue's consumer: background jobs (compaction, summaries, profile, responses)",
    memory_mb=1024,
    timeout_s=300,  # the queue's visibility timeout is six times this (infra.components.queue)
    # Jobs read and write items (summaries, profiles, background responses run whole turns: transactions,
    # spilled bodies and snapshots, save_file) but delete nothing; QUEUE_SEND re-sends deferred jobs and
    # queues follow-ups; DATA_TOKEN_SECRET: background responses may sign data links.
    needs=frozenset(
        {
            Need.TABLE_READ,
            Need.TABLE_WRITE,
            Need.TABLE_TRANSACT,
            Need.BUCKET_READ,
            Need.BUCKET_WRITE,
            Need.QUEUE_SEND,
            Need.LLM_SECRET,
            Need.LLM_INVOKE,
            Need.DATA_TOKEN_SECRET,
        }
    ),
    consumes_queue=True,
)

IDLE_SESSIONS = FunctionSpec(
    name="idle_sessions",
    description="Every 5 minutes: close idle sessions (enqueue their summaries) and settle runs whose lease expired",
    memory_mb=512,
    timeout_s=120,
    # Pages through the idle and lease indexes (Query), moves or closes sessions (UpdateItem), settles dead
    # runs as interrupted (reads the run, GetItem, and its question, Query; a transaction of two updates),
    # and enqueues the session summaries in batches.
    needs=frozenset(
        {
            Need.TABLE_QUERY,
            Need.TABLE_GET,
            Need.TABLE_UPDATE,
            Need.TABLE_TRANSACT,
            Need.QUEUE_SEND,
            Need.QUEUE_SEND_BATCH,
        }
    ),
    schedule=Schedule(minute="0/5", hour="*", time_zone="Etc/UTC"),  # cron(0/5 * * * ? *)
)

DAILY_SUMMARY = FunctionSpec(
    name="daily_summary",
    description="Hourly at :30: enqueue a daily-summary job per user whose local day just closed",
    memory_mb=512,
    timeout_s=120,
    # Pages through the day-close index (Query) and enqueues the summary jobs in batches; writes nothing.
    needs=frozenset({Need.TABLE_QUERY, Need.QUEUE_SEND, Need.QUEUE_SEND_BATCH}),
    schedule=Schedule(minute="30", hour="*", time_zone="Etc/UTC"),  # cron(30 * * * ? *)
)

# One entry per directory under functions/.
FUNCTIONS: tuple[FunctionSpec, ...] = (CHAT, STREAM, SUBMIT, DATA, WORKER, IDLE_SESSIONS, DAILY_SUMMARY)


def function_directories() -> list[str]:
    """Names of the functions that exist as code: functions/<name>/ holding handler.py or run.sh."""
    return sorted(
        path.name
        for path in FUNCTIONS_DIR.iterdir()
        if path.is_dir() and ((path / "handler.py").is_file() or (path / STREAM_SCRIPT).is_file())
    )
