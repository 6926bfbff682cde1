"""One turn: validate, take the chat's run lease with the USER message, then run the agent loop."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agent_core.domain.events import Event
from agent_core.domain.ids import new_chat_id, new_run_id, now_ms, sortable_id
from agent_core.domain.jobs import CompactJob
from agent_core.domain.models import Chat, Kind, Message, Role, Run, RunStatus, Summary, TurnResult
from agent_core.errors import InvalidRequest, NotFound, PayloadTooLarge, RunInProgress
from agent_core.memory.compaction import CompactionPolicy, needs_compaction
from agent_core.runtime.agents import AgentDefinition
from agent_core.runtime.deps import RunDeps
from agent_core.store.base import DuplicateRequest, RecentMessages

CHAT_NAME_CHARS = 30
FastPath = Callable[[Any], AsyncIterator[Event]]


@dataclass
class TurnRequest:
    user_id: str
    message: str
    chat_id: str | None = None
    request_id: str | None = None
    model: str | None = None
    agent_key: str | None = None
    deadline_ms: int | None = None
    now: datetime | None = None


@dataclass
class PreparedTurn:
    """A turn that holds the lease, with the history the window is built from."""

    deps: RunDeps
    request: TurnRequest
    chat: Chat
    agent: AgentDefinition
    run: Run
    summary: Summary | None
    history: RecentMessages
    created_chat: bool = False
    result: TurnResult | None = field(default=None)
    extra_system: list[str] = field(default_factory=list)  # e.g. the user profile block
    timezone: str = "UTC"
    fast_path: FastPath | None = None  # answers without routing (time queries over summaries)

    @property
    def now(self) -> datetime:
        return self.request.now or datetime.now(UTC)


def validate_message(message: str, max_bytes: int) -> str:
    if not message or not message.strip():
        raise InvalidRequest("message must not be blank", param="message", code="blank_message")
    if len(message.encode("utf-8")) > max_bytes:
        raise PayloadTooLarge(f"message exceeds {max_bytes} bytes (UTF-8)", param="message")
    return message


def chat_name(message: str) -> str:
    """The first 30 code points of the trimmed message."""
    return message.strip()[:CHAT_NAME_CHARS]


async def _open_chat(deps: RunDeps, req: TurnRequest) -> tuple[Chat, Summary | None, bool]:
    if req.chat_id is None:
        at = now_ms()
        chat = Chat(
            chat_id=new_chat_id(),
            user_id=req.user_id,
            title=chat_name(req.message),
            agent_key=deps.agents.get(req.agent_key).key,
            created_at=at,
            last_activity_at=at,
        )
        return await deps.store.create_chat(chat), None, True
    context = await deps.store.load_turn_context(req.chat_id, req.user_id)
    if context is None:
        raise NotFound("conversation not found", param="conversationId", code="conversation_not_found")
    return context.chat, context.summary, False


def history_limit(deps: RunDeps) -> int:
    """Read at most this many uncovered messages: enough for the window, bounded when compaction lags."""
    s = deps.settings
    return max(2 * s.memory_compact_after + s.memory_window, 100)


async def prepare_turn(deps: RunDeps, req: TurnRequest) -> PreparedTurn | TurnResult:
    """Everything that can fail with an HTTP status happens here, before any event is produced.

    Returns the stored result when the requestId was already answered.
    """
    s = deps.settings
    validate_message(req.message, s.max_message_bytes)
    chat, summary, created = await _open_chat(deps, req)
    agent = deps.agents.get(req.agent_key or chat.agent_key)
    run_id = new_run_id()
    run = Run(
        run_id=run_id,
        chat_id=chat.chat_id,
        user_id=req.user_id,
        request_id=req.request_id or run_id,
        agent_key=agent.key,
        agent_version=agent.version,
        model=req.model or agent.model or s.model,
        started_at=now_ms(),
    )
    user_message = Message(
        id=sortable_id(),
        chat_id=chat.chat_id,
        role=Role.USER,
        content=req.message,
        run_id=run.run_id,
        request_id=run.request_id,
        created_at=run.started_at,
    )
    try:
        await deps.store.begin_turn(chat, run, user_message, s.run_lease_ms)
    except DuplicateRequest as duplicate:
        previous = duplicate.run
        if previous.status == RunStatus.COMPLETED and previous.result is not None:
            return previous.result
        lease_held = chat.active_run_id == previous.run_id and (chat.lease_expires_at or 0) > run.started_at
        if previous.status == RunStatus.RUNNING and lease_held:
            raise RunInProgress("this request is still running") from duplicate
        # A failed, cancelled or dead run: run again for the message already stored.
        await deps.store.restart_turn(chat, previous, run, s.run_lease_ms)
    after = summary.covers_message_id if summary else None
    history = await deps.store.recent_messages(chat.chat_id, after, history_limit(deps))
    prepared = PreparedTurn(
        deps, req, chat, agent, run, summary, history, created_chat=created, timezone=s.default_timezone
    )
    await _maybe_compact(prepared)
    return prepared


async def _maybe_compact(turn: PreparedTurn) -> None:
    """Start compaction now, so it overlaps the model call instead of delaying the answer."""
    s = turn.deps.settings
    policy = CompactionPolicy(window=s.memory_window, compact_after=s.memory_compact_after)
    uncovered = sum(1 for m in turn.history.items if m.kind == Kind.NORMAL)
    if turn.history.truncated or needs_compaction(uncovered, policy):
        await turn.deps.queue.enqueue(CompactJob(chat_id=turn.chat.chat_id, model=turn.run.model))
