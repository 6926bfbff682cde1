"""Chats, messages, tool calls, runs and summaries."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class Role(StrEnum):
    USER = "USER"
    ASSISTANT = "ASSISTANT"
    TOOL = "TOOL"
    SYSTEM = "SYSTEM"


class Kind(StrEnum):
    NORMAL = "NORMAL"
    DAILY_SUMMARY = "DAILY_SUMMARY"


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


# The errorCode of a run whose process died while it ran (its lease expired, or the local server restarted).
INTERRUPTED = "interrupted"


class ToolStatus(StrEnum):
    OK = "ok"
    ERROR = "error"
    DENIED = "denied"
    TIMEOUT = "timeout"


class Model(BaseModel):
    """Domain models: snake_case in Python, camelCase on the wire (`model_dump(by_alias=True)`)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", alias_generator=to_camel)


class Chat(Model):
    chat_id: str
    user_id: str
    title: str = ""
    agent_key: str = "main-agent"
    created_at: int
    last_activity_at: int
    message_count: int = 0
    active_run_id: str | None = None
    lease_expires_at: int | None = None
    version: int = 0
    session_id: str | None = None
    session_started_at: int | None = None


class ToolCall(Model):
    """A call the model asked for: id is the model's tool_call_id."""

    id: str
    name: str
    arguments: str = ""


class Message(Model):
    id: str
    chat_id: str
    role: Role
    kind: Kind = Kind.NORMAL
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    run_id: str | None = None
    request_id: str | None = None
    created_at: int


class Usage(Model):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Prompt tokens read from / written to the provider's prompt cache (Bedrock reports both).
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def add(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )


class ToolCallRecord(Model):
    """What a turn reports about one executed tool call."""

    id: str
    tool_name: str
    status: ToolStatus
    reason: str = ""
    duration_ms: int = 0


class TurnResult(Model):
    """The stored outcome of a turn: what a retry of the same requestId gets back."""

    request_id: str
    assistant_message: str = ""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    finish_reason: str = "stop"
    run_id: str | None = None
    chat_id: str | None = None


class Run(Model):
    run_id: str
    chat_id: str
    user_id: str
    request_id: str
    status: RunStatus = RunStatus.RUNNING
    agent_key: str = "main-agent"
    agent_version: str = ""
    model: str = ""
    usage: Usage = Field(default_factory=Usage)
    started_at: int
    ended_at: int | None = None
    first_token_ms: int | None = None
    error_code: str | None = None
    error_message: str | None = None
    result: TurnResult | None = None
    cancel_requested: bool = False
    snapshot: list[dict[str, Any]] | None = None  # the replay events, stored once the run ends
    # `provider:model` that produced the answer when a fallback chain is configured (AGENT_LLM_FALLBACK).
    answered_by: str | None = None
    # The client's own id for the run (AG-UI's runId): a client reconnecting to the run names it.
    client_run_id: str | None = None
    # What a UI wire's encoder of the run is made with, kept for a resume on any instance to make it again:
    # the UI message the run continues (a request answering the last assistant message's calls; None: the
    # run's own `msg_{runId}`) and the calls its request decided (their re-announced starts are not sent).
    ui_message_id: str | None = None
    decided_call_ids: list[str] = Field(default_factory=list)
    # The wall-clock ms its lease is taken at when the turn's "now" is overridden (X-Agent-Now): leases
    # and run pointers always run on the wall clock. Never stored.
    lease_at: int | None = Field(None, exclude=True)
    # The token under which a process that continued the run from its checkpoint holds its lease (None: the
    # run's first process). Never stored.
    lease_holder: str | None = Field(None, exclude=True)

    @property
    def lease_clock(self) -> int:
        """ "Now" for the run's lease and pointer: the wall clock at its start."""
        return self.started_at if self.lease_at is None else self.lease_at


class WaitStatus(StrEnum):
    WAITING = "waiting"
    SUBMITTED = "submitted"  # answered: a frontend call's params, or an approval's decision (`approved`)
    CANCELLED = "cancelled"  # its run was cancelled (or ended): a submit no longer matches
    EXPIRED = "expired"  # an approval's time ran out (the run recorded it): a late answer no longer matches


class WaitKind(StrEnum):
    FRONTEND = "frontend"  # a frontend tool: the browser submits the result's params
    APPROVAL = "approval"  # a call that needs a human's yes or no before it runs


class Wait(Model):
    """A run waiting on a person: a frontend tool call's params, or a tool call's approval (POST /api/ap/submit).

    The conditional update of `status` (waiting -> submitted, cancelled or expired) decides each wait once.
    """

    run_id: str
    tool_id: str
    user_id: str
    kind: WaitKind = WaitKind.FRONTEND
    status: WaitStatus = WaitStatus.WAITING
    params: Any = None
    expires_at: int
    # An approval: what is asked (the tool, its arguments, why), then the decision and who took it when.
    tool_name: str = ""
    args: Any = None
    reason: str = ""
    approved: bool | None = None
    decision_reason: str = ""
    decided_by: str = ""
    decided_at: int = 0  # epoch ms


class ApprovalDecision(Model):
    """A person's answer to an approval: approve or deny, who, when (epoch ms) and why."""

    approved: bool
    by: str
    at_ms: int
    reason: str = ""


class RunPointer(Model):
    """Finds a run (and its owner) from its id alone: cancel and submit carry only the runId."""

    run_id: str
    chat_id: str
    user_id: str


class Summary(Model):
    """The rolling summary of a chat: covers every message up to `covers_message_id`."""

    chat_id: str
    content: str
    covers_message_id: str
    covered_count: int = 0
    updated_at: int
    version: int = 1


class SessionSummary(Model):
    """One ended session of a chat: its summary and key topics (empty when it had too little content)."""

    chat_id: str
    session_id: str
    user_id: str
    summary: str = ""
    key_topics: list[str] = Field(default_factory=list)
    message_count: int = 0
    local_date: str
    started_at: int
    ended_at: int
    skipped: bool = False


class DailySummary(Model):
    """A user's local day: merged from its sessions."""

    user_id: str
    date: str
    summary: str
    key_topics: list[str] = Field(default_factory=list)
    session_count: int = 0
    message_count: int = 0
    updated_at: int


class ProfileFact(Model):
    aspect: str  # interests, budget, concerns, constraints, preferences, ...
    key: str  # what the fact is about; a newer fact with the same aspect and key replaces the older
    value: str
    source_date: str


class Profile(Model):
    user_id: str
    timezone: str | None = None
    facts: list[ProfileFact] = Field(default_factory=list)
    updated_at: int = 0
