"""One turn: validate, take the chat's run lease with the USER message (none when the turn continues from
tool results), then run the agent loop."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from agent_core.container import RunDeps
from agent_core.domain.checkpoint import RunCheckpoint
from agent_core.domain.ids import new_chat_id, new_run_id, now_ms, sortable_id
from agent_core.domain.jobs import CompactJob
from agent_core.domain.models import Chat, Kind, Message, Profile, Role, Run, RunStatus, Summary, TurnResult
from agent_core.domain.session_plan import SessionPlan
from agent_core.domain.text import chat_name, validate_message
from agent_core.errors import (
    AgentError,
    NotFound,
    RunInProgress,
    ServiceUnavailable,
)
from agent_core.memory.calendar import to_ms, zone
from agent_core.memory.compaction import CompactionPolicy, needs_compaction
from agent_core.memory.profile import profile_block
from agent_core.memory.recall import recall_block
from agent_core.memory.session_rules import plan_session
from agent_core.runtime.agents import AgentDefinition
from agent_core.runtime.approvals import ApprovalMode, DecidedCall
from agent_core.runtime.interrupted import settle_interrupted_run
from agent_core.runtime.release import release_failed_run
from agent_core.runtime.reservation import create_reserving, start_failed
from agent_core.store.base import DuplicateRequest, RecentMessages, ReservationRefused, SessionChanged
from agent_core.store.retry import retry_write, write_backoff
from agent_core.usage.budget import Reservation
from agent_core.usage.meter import Admission


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
    client_tools: frozenset[str] = frozenset()  # tools the caller runs (a model step calling one ends the run)
    public_base_url: str = ""  # where clients reach the API (data links are built on it); '': root-relative
    timezone: str | None = None  # the zone the client names for this request (validated); else the profile's
    chat_param: str = "chatId"  # how the caller's API names the chat id (in a not-found error)
    # The turn continues from the client's tool results, already stored as the history of the chat `chat_id`
    # names: no USER message is written, the model is called with the results last, `message` is unused ('').
    continuation: bool = False
    input_checked: bool = False  # the wire already ran the agent's input guardrail over the message
    # How a call that needs approval waits: "wait" pauses the run on its WAIT item (native: POST /api/ap/submit);
    # "hand_over" ends the run with the request, like a client tool, and a later request brings the decision.
    approvals: ApprovalMode = "wait"
    # Calls handed over for approval and decided since (the continuation runs them first, as decided).
    decided: tuple[DecidedCall, ...] = ()
    client_run_id: str | None = None  # the client's own id for the run (Run.client_run_id)
    ui_message_id: str | None = None  # the UI message the run continues (Run.ui_message_id)

    @property
    def stored_message(self) -> str | None:
        """The USER message this turn stores (None for a continuation, which stores none)."""
        return None if self.continuation else self.message


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
    reservation: Reservation | None = None  # what the turn reserved of its user's budget (settled when it ends)
    timezone: str = "UTC"
    at_ms: int = 0  # "now" of this turn (X-Agent-Now may set it); the run's clock advances from it
    checkpoint: RunCheckpoint | None = None  # the run goes on from here (its process died): continuation.py

    @property
    def now(self) -> datetime:
        return self.request.now or datetime.now(UTC)

    @property
    def question(self) -> str:
        """The user's question: the turn's message, or for a continuation the last USER message in history."""
        if not self.request.continuation:
            return self.request.message
        users = [m.content for m in self.history.items if m.role == Role.USER and m.kind == Kind.NORMAL]
        return users[-1] if users else ""

    def clock_ms(self) -> int:
        """The turn's clock: its start ("now", possibly overridden) plus the real time elapsed since."""
        if self.request.now is None:
            return now_ms()
        return self.at_ms + (time.monotonic_ns() - self._started_ns) // 1_000_000

    _started_ns: int = field(default_factory=time.monotonic_ns)


async def _open_chat(
    deps: RunDeps, req: TurnRequest, at_ms: int, admission: Admission
) -> tuple[Chat, Summary | None, Profile | None, bool, str | None]:
    """The turn's chat (opened for a first message), summary, profile, whether it was created, and the user's
    memory records' version (None for a new chat: read when recalled). The turn's reservation is prepared here
    (`Admission.prepare`) and written with its first write: the new chat, else its begin."""
    chat_id = req.chat_id
    if chat_id is None:
        profile = await deps.memory_store.get_profile(req.user_id)
        agent = deps.agents.get(req.agent_key)
        await admission.prepare(turn_model(deps, req, agent), turn_zone(deps, req, profile))
        req.message = await deps.screen_input(agent, req.message, req.input_checked)  # before the chat opens
        chat = Chat(
            chat_id=new_chat_id(),
            user_id=req.user_id,
            title=chat_name(req.message),
            agent_key=deps.agents.get(req.agent_key).key,
            created_at=at_ms,
            last_activity_at=at_ms,
        )
        # A retried first message (same requestId) finds the chat its first attempt opened, and goes on as a
        # retry in that chat: begin_turn's request marker then answers it (result, 409, or a rerun), and its
        # begin carries the reservation. A new chat is opened with it.
        opened = await create_reserving(deps, chat, req.request_id, admission)
        if opened.chat_id == chat.chat_id:
            return chat, None, profile, True, None
        chat_id = opened.chat_id
    context = await deps.turns.load_turn_context(chat_id, req.user_id)
    if context is None:
        raise NotFound("conversation not found", param=req.chat_param, code="conversation_not_found")
    agent = deps.agents.get(req.agent_key or context.chat.agent_key)
    await admission.prepare(turn_model(deps, req, agent), turn_zone(deps, req, context.profile))
    req.message = await deps.screen_input(agent, req.message, req.input_checked)
    return context.chat, context.summary, context.profile, False, context.records_version


def turn_model(deps: RunDeps, req: TurnRequest, agent: AgentDefinition) -> str:
    return req.model or agent.model or deps.settings.model


def turn_zone(deps: RunDeps, req: TurnRequest, profile: Profile | None) -> ZoneInfo:
    """The turn's zone: the request's, else the profile's, else the default."""
    return zone(req.timezone or (profile.timezone if profile else None), deps.settings.default_timezone)


def history_limit(deps: RunDeps) -> int:
    """Read at most this many uncovered messages: enough for the window, bounded when compaction lags."""
    s = deps.settings
    return max(2 * s.memory_compact_after + s.memory_window, 100)


async def prepare_turn(
    deps: RunDeps, req: TurnRequest, admission: Admission | None = None
) -> PreparedTurn | TurnResult:
    """Everything that can fail with an HTTP status happens here, before any event is produced.

    Returns the stored result when the requestId was already answered. The user's budget and rate limit are
    checked before the turn writes anything (429): its first write carries the reservation (the new chat it
    opens, else its begin), or a write of its own comes first when a wire writes the client's input before
    (wires/turn.py `admit`); a turn that does not go on to the model gives its reservation back.
    """
    at_ms = to_ms(req.now) if req.now else now_ms()
    admission = admission or Admission(deps.usage, req.user_id, at_ms)
    try:
        if not req.continuation:
            validate_message(req.message, deps.settings.max_message_bytes)
        prepared = await _prepare(deps, req, at_ms, admission)
    except BaseException:
        await asyncio.shield(admission.release())
        raise
    if isinstance(prepared, TurnResult):  # a replayed requestId: the model is not called
        await admission.release()
    else:
        prepared.reservation = admission.reservation
    return prepared


async def _prepare(deps: RunDeps, req: TurnRequest, at_ms: int, admission: Admission) -> PreparedTurn | TurnResult:
    s = deps.settings
    chat, summary, profile, created, records_version = await _open_chat(deps, req, at_ms, admission)
    agent = deps.agents.get(req.agent_key or chat.agent_key)
    tz = turn_zone(deps, req, profile)
    run_id = new_run_id()
    run = Run(
        run_id=run_id,
        chat_id=chat.chat_id,
        user_id=req.user_id,
        request_id=req.request_id or run_id,
        agent_key=agent.key,
        agent_version=agent.version,
        model=turn_model(deps, req, agent),
        started_at=at_ms,
        lease_at=now_ms() if req.now else None,  # the lease is on the wall clock whatever "now" says
        client_run_id=req.client_run_id,
        ui_message_id=req.ui_message_id,
        decided_call_ids=[decided.call.id for decided in req.decided],
    )
    user_message = None
    if not req.continuation:
        user_message = Message(
            id=sortable_id(at_ms),
            chat_id=chat.chat_id,
            role=Role.USER,
            content=req.message,
            run_id=run.run_id,
            request_id=run.request_id,
            created_at=run.started_at,
        )
    idle_ms = s.idle_timeout_minutes * 60_000
    plan = plan_session(chat, at_ms, tz, idle_ms, new_chat=created)
    backoff = write_backoff(s)
    restarted = False

    async def begin() -> None:
        await deps.turns.begin_turn(chat, run, user_message, s.run_lease_ms, plan, admission.reservation_write)

    try:
        try:
            try:
                # Retried on throttling/timeouts: begin_turn recognises its own earlier commit.
                await retry_write(begin, backoff, "begin_turn")
            except SessionChanged as changed:
                # The idle job closed the session between our read and write: plan again from the new META.
                chat = changed.chat
                plan = plan_session(chat, at_ms, tz, idle_ms)
                await retry_write(begin, backoff, "begin_turn")
        except ReservationRefused:
            raise await admission.refused() from None  # over a limit: the turn wrote nothing
        admission.committed()
    except ServiceUnavailable:
        await asyncio.shield(start_failed(deps, run, req.stored_message, admission, at_ms))
        raise
    except DuplicateRequest as duplicate:
        previous = duplicate.run
        if previous.status == RunStatus.COMPLETED and previous.result is not None:
            return previous.result
        lease_held = chat.active_run_id == previous.run_id and (chat.lease_expires_at or 0) > now_ms()
        if previous.status == RunStatus.RUNNING and lease_held:
            raise RunInProgress("this request is still running") from duplicate
        # A failed, cancelled or dead run: run again for the message already stored.
        try:
            await deps.turns.restart_turn(chat, previous, run, s.run_lease_ms, admission.reservation_write)
            admission.committed()
        except ReservationRefused:
            raise await admission.refused() from None
        except ServiceUnavailable:
            await asyncio.shield(start_failed(deps, run, req.stored_message, admission, at_ms))
            raise
        restarted = True
    # The lease is ours from here: every way out but a returned turn releases it.
    try:
        if not restarted:
            await _after_begin(deps, chat, plan, at_ms)
        after = summary.covers_message_id if summary else None
        history = await deps.chats.recent_messages(chat.chat_id, after, history_limit(deps))
        prepared = PreparedTurn(
            deps, req, chat, agent, run, summary, history, created_chat=created, timezone=tz.key, at_ms=at_ms
        )
        budget, floor = s.memory_recall_tokens, s.memory_recall_min_similarity
        remembered = await recall_block(deps.memory, req.user_id, req.message, tz, budget, floor, records_version)
        prepared.extra_system = [b for b in (profile_block(profile), remembered) if b]
        await _maybe_compact(prepared)
    except BaseException as exc:
        code = exc.code if isinstance(exc, AgentError) else "internal_error"
        await asyncio.shield(release_failed_run(deps, run, code, "the turn could not start", at_ms, req.stored_message))
        raise
    return prepared


async def _after_begin(deps: RunDeps, chat: Chat, plan: SessionPlan, at_ms: int) -> None:
    """The session this turn ended is summarised in the background; a dead run's lease it took is failed."""
    if plan.close is not None:
        await deps.work_queue.enqueue(plan.close)
    if chat.active_run_id and (chat.lease_expires_at or 0) < now_ms():  # leases run on the wall clock
        # This turn took the expired lease over; the dead run's record still says running.
        await settle_interrupted_run(deps.turns, chat.chat_id, chat.active_run_id, at_ms, release_lease=False)


async def _maybe_compact(turn: PreparedTurn) -> None:
    """Start compaction now, so it overlaps the model call instead of delaying the answer."""
    s = turn.deps.settings
    policy = CompactionPolicy(window=s.memory_window, compact_after=s.memory_compact_after)
    uncovered = sum(1 for m in turn.history.items if m.kind == Kind.NORMAL)
    if turn.history.truncated or needs_compaction(uncovered, policy):
        await turn.deps.work_queue.enqueue(
            CompactJob(chat_id=turn.chat.chat_id, model=turn.run.model, user_id=turn.chat.user_id)
        )
