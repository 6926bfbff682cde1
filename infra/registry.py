"""The function registry: every Lambda of the product is one `FunctionSpec` entry in `FUNCTIONS`.

Adding a function = adding its directory `functions/<name>/` (a `handler.py`, or `run.sh` for a
streaming function) and one entry below. The stack turns each entry into the Lambda function, its log
group, its IAM grants (from `needs`), its REST API routes and Function URL (from `routes`), its
EventBridge Scheduler schedule (`schedule`) or its SQS event source (`consumes_queue`), and its alarms.
`tests/infra` fails while a `functions/<name>/` directory has no entry here, or an entry has no code.
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
    """A resource a function uses: it gets the environment variable and the narrowest IAM grant."""

    TABLE = "table"  # read/write items of the table and its indexes (AGENT_TABLE_NAME)
    BUCKET = "bucket"  # read/write objects of the data bucket (AGENT_DATA_BUCKET)
    QUEUE = "queue"  # send jobs to the work queue (AGENT_WORK_QUEUE_URL)
    LLM_SECRET = "llm_secret"  # read the LLM API key secret (AGENT_LLM_API_KEY_SECRET)
    DATA_TOKEN_SECRET = "data_token_secret"  # read the data-link signing key (AGENT_DATA_TOKEN_SECRET_NAME)


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


CHAT = FunctionSpec(
    name="chat",
    description="Conversation routes (buffered): /api/v1/conversations..., /api/ap/chat(s), agents, profile",
    memory_mb=1024,
    timeout_s=29,
    needs=frozenset({Need.TABLE, Need.BUCKET, Need.QUEUE, Need.LLM_SECRET, Need.DATA_TOKEN_SECRET}),
    routes=(
        Route("/api/v1/conversations", ("GET", "POST")),
        Route("/api/v1/conversations/{proxy+}", ("GET", "POST", "DELETE")),
        Route("/api/ap/chats", ("GET",)),
        Route("/api/ap/chat", ("GET",)),
        Route("/api/ap/chat/{chatId}/end", ("POST",)),
        Route("/api/ap/agents", ("GET",)),
        Route("/api/ap/profile", ("GET", "PATCH", "DELETE")),
    ),
)

STREAM = FunctionSpec(
    name="stream",
    description="Streaming routes (SSE): /api/ap/query, /api/ap/cancel, /api/chat/stream, the OpenAI-compatible /v1",
    memory_mb=1024,
    timeout_s=900,  # a streamed turn may run long: REST API STREAM allows 15 minutes per response
    needs=frozenset({Need.TABLE, Need.BUCKET, Need.QUEUE, Need.LLM_SECRET, Need.DATA_TOKEN_SECRET}),
    streaming=True,
    routes=(
        Route("/api/ap/query", ("POST",)),
        Route("/api/ap/cancel", ("POST",)),
        Route("/api/chat/stream", ("POST",)),
        Route("/v1/responses", ("POST",)),
        Route("/v1/responses/{proxy+}", ("GET", "POST", "DELETE")),
        Route("/v1/conversations", ("POST",)),
        Route("/v1/conversations/{proxy+}", ("GET", "POST", "DELETE")),
        Route("/v1/models", ("GET",)),
    ),
)

SUBMIT = FunctionSpec(
    name="submit",
    description="A frontend tool's answer: POST /api/ap/submit (imports no LLM code)",
    memory_mb=512,
    timeout_s=10,
    needs=frozenset({Need.TABLE}),
    routes=(Route("/api/ap/submit", ("POST",)),),
)

DATA = FunctionSpec(
    name="data",
    description="Data files behind signed links: GET /api/ap/data (imports no LLM code)",
    memory_mb=512,
    timeout_s=15,
    needs=frozenset({Need.TABLE, Need.BUCKET, Need.DATA_TOKEN_SECRET}),
    routes=(Route("/api/ap/data", ("GET",)),),
)

WORKER = FunctionSpec(
    name="worker",
    description="The work queue's consumer: background jobs (compaction, summaries, profile, responses)",
    memory_mb=1024,
    timeout_s=300,  # the queue's visibility timeout is six times this (infra.components.queue)
    # QUEUE: re-sends deferred jobs; DATA_TOKEN_SECRET: background responses may sign data links
    needs=frozenset({Need.TABLE, Need.BUCKET, Need.QUEUE, Need.LLM_SECRET, Need.DATA_TOKEN_SECRET}),
    consumes_queue=True,
)

IDLE_SESSIONS = FunctionSpec(
    name="idle_sessions",
    description="Every 5 minutes: close idle sessions (enqueue their summaries) and fail runs whose lease expired",
    memory_mb=512,
    timeout_s=120,
    needs=frozenset({Need.TABLE, Need.QUEUE}),
    schedule=Schedule(minute="0/5", hour="*", time_zone="Etc/UTC"),  # cron(0/5 * * * ? *)
)

DAILY_SUMMARY = FunctionSpec(
    name="daily_summary",
    description="Hourly at :30: enqueue a daily-summary job per user whose local day just closed",
    memory_mb=512,
    timeout_s=120,
    needs=frozenset({Need.TABLE, Need.QUEUE}),
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
