"""The Store port, by role: chats and messages, turns and runs, frontend waits, memory (read and kept).

`Store` is their union, which `TableStore` implements; each consumer takes the narrowest role it uses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from agent_core.domain.models import (
    ApprovalDecision,
    Chat,
    DailySummary,
    Message,
    Profile,
    Run,
    RunPointer,
    SessionSummary,
    Summary,
    Wait,
)
from agent_core.domain.session_plan import SessionPlan
from agent_core.store.memory_records import RecordStore
from agent_core.store.table import TransactionFailed, UpdateOp


@dataclass
class ChatPage:
    items: list[Chat]
    next_cursor: str | None


@dataclass
class MessagePage:
    items: list[Message]
    next_cursor: str | None


@dataclass
class TurnContext:
    """What a turn reads before calling the model: the chat and its rolling summary (one read)."""

    chat: Chat
    summary: Summary | None
    profile: Profile | None = None
    records_version: str = ""  # the user's memory records' version token ("": the user has none)


@dataclass
class RecentMessages:
    """The newest uncovered messages (oldest first); `truncated` when more exist than were read."""

    items: list[Message]
    truncated: bool


class SessionChanged(Exception):
    """The chat's session changed between the turn's read and its write (the idle job closed it)."""

    def __init__(self, chat: Chat) -> None:
        super().__init__(f"the session of chat {chat.chat_id} changed")
        self.chat = chat


class LeaseTaken(Exception):
    """Another process continued the run from its checkpoint (its lease had expired): this one stores nothing
    of the run's end (runtime/continuation.py)."""


class DuplicateRequest(Exception):
    """The requestId was seen before in this chat; `run` is the run that handled it."""

    def __init__(self, run: Run) -> None:
        super().__init__(f"request {run.request_id} already handled by run {run.run_id}")
        self.run = run


class ReservationRefused(Exception):
    """The conditional write a turn's first write carried with it (its usage budget's reservation: with the
    chat it opens, or with its begin) did not hold: the turn is refused, and nothing of it was written."""


def check_reservation(failed: TransactionFailed, reservation: UpdateOp | None, index: int) -> None:
    """ReservationRefused when the turn's reservation (op `index` of the cancelled transaction) failed."""
    if reservation is not None and len(failed.reasons) > index and failed.reasons[index] == "ConditionalCheckFailed":
        raise ReservationRefused("the turn's usage reservation was refused") from failed


class ChatStore(Protocol):
    """Chats and their messages. Reads of a user's chat take the caller's userId."""

    async def create_chat(self, chat: Chat, request_id: str | None = None, reservation: UpdateOp | None = None) -> Chat:
        """Create `chat`. With the `request_id` of the message opening it, at most one chat is ever created per
        (user, requestId): a later call with the same pair creates nothing and returns the first call's chat
        (NotFound if that chat was deleted since), and writes no `reservation` either. With `reservation` (the
        opening turn's budget reservation) written in the same transaction: ReservationRefused when its
        condition fails, and no chat is created."""
        ...

    async def get_chat(self, chat_id: str, user_id: str) -> Chat | None: ...

    async def list_chats(self, user_id: str, limit: int, cursor: str | None) -> ChatPage: ...

    async def delete_chat(self, chat_id: str, user_id: str) -> bool: ...

    async def list_messages(self, chat_id: str, user_id: str, limit: int, cursor: str | None) -> MessagePage | None: ...

    async def recent_messages(self, chat_id: str, after_id: str | None, limit: int) -> RecentMessages: ...

    async def messages_between(self, chat_id: str, after_id: str | None, upto_id: str | None) -> list[Message]: ...

    async def add_messages(self, chat_id: str, messages: list[Message]) -> None: ...


class TurnStore(Protocol):
    """Turns and their runs: the chat's lease, a turn's begin and end, run records, cancellation."""

    async def load_turn_context(self, chat_id: str, user_id: str) -> TurnContext | None: ...

    async def begin_turn(
        self,
        chat: Chat,
        run: Run,
        user_message: Message | None,
        lease_ms: int,
        plan: SessionPlan | None = None,
        reservation: UpdateOp | None = None,
    ) -> None:
        """Take the chat's lease with the turn's message, run and request marker, in one transaction; with it
        `reservation` (the turn's budget reservation), whose failing condition raises ReservationRefused."""
        ...

    async def restart_turn(
        self, chat: Chat, previous: Run, run: Run, lease_ms: int, reservation: UpdateOp | None = None
    ) -> None: ...

    async def finish_turn(self, run: Run, messages: list[Message], activity_at: int) -> None: ...

    async def abandon_turn(self, run: Run) -> None: ...

    async def release_lease(self, chat_id: str, run_id: str) -> bool: ...

    async def renew_lease(self, chat_id: str, run_id: str, expires_at: int, holder: str | None = None) -> bool: ...

    async def expire_lease(self, chat_id: str, run_id: str) -> bool:
        """Mark the run's lease expired now, whoever holds it for the run (the local server at start: every
        process that held one is dead); False when the run no longer holds it."""
        ...

    async def take_over_lease(self, chat_id: str, run_id: str, now_ms: int, expires_at: int, holder: str) -> bool:
        """The run's own lease, expired (its process died), taken by the process that continues it under the
        token `holder` (False: it is still held, or no longer the run's). The run's earlier process, should it
        still live, can then neither renew the lease nor store the run's end (`LeaseTaken`)."""
        ...

    async def get_run(self, chat_id: str, run_id: str) -> Run | None: ...

    async def run_for_request(self, chat_id: str, request_id: str) -> Run | None:
        """The run a request id of the chat began (its request marker's), or None."""
        ...

    async def list_runs(self, chat_id: str, limit: int, cursor: str | None) -> tuple[list[Run], str | None]: ...

    async def get_run_pointer(self, run_id: str, now_s: int) -> RunPointer | None: ...

    async def request_cancel(self, chat_id: str, run_id: str) -> bool: ...

    async def is_cancel_requested(self, chat_id: str, run_id: str) -> bool: ...

    def leased_chat_pages(self, index: int, page_size: int | None = 100) -> AsyncIterator[list[Chat]]: ...

    async def question_of(self, run: Run) -> str | None: ...

    async def fail_interrupted_run(
        self, run: Run, *, expired_before: int | None, release_lease: bool = True
    ) -> bool: ...


class WaitStore(Protocol):
    """Runs waiting on a person (POST /api/ap/submit): a frontend tool call's params, a tool call's approval."""

    async def create_wait(self, wait: Wait) -> None: ...

    async def get_wait(self, run_id: str, tool_id: str) -> Wait | None: ...

    async def submit_wait(self, run_id: str, tool_id: str, user_id: str, params: object, now_s: int) -> bool: ...

    async def decide_wait(self, run_id: str, tool_id: str, decision: ApprovalDecision) -> bool:
        """Record an approval's decision: True only for the one answer that decided it (the user's, in time)."""
        ...

    async def undecide_wait(self, run_id: str, tool_id: str, decision: ApprovalDecision) -> bool:
        """Take back a decision whose turn never opened: waiting again, only while `decision` is the one recorded
        (True when it was)."""
        ...

    async def claim_wait(self, run_id: str, tool_id: str, at_ms: int) -> bool:
        """Take an approved call to run it, once (False: another process took it)."""
        ...

    async def expire_wait(self, run_id: str, tool_id: str) -> bool:
        """A waiting call's time ran out: True when it was still waiting (no answer will now match)."""
        ...

    async def close_wait(self, run_id: str, tool_id: str) -> None:
        """A waiting call no longer accepts a submit (its run ended); a submitted one stays as it is."""
        ...


class MemoryReader(Protocol):
    """What is read of a user's memory to answer about it (the memory tools, time-query recall): the
    profile, daily and session summaries, and the messages of a span."""

    async def get_profile(self, user_id: str) -> Profile | None: ...

    async def daily_range(self, user_id: str, start: str, end: str) -> list[DailySummary]: ...

    async def chats_active_since(self, user_id: str, since_ms: int) -> list[Chat]: ...

    async def list_sessions(self, chat_id: str) -> list[SessionSummary]: ...

    async def messages_between(self, chat_id: str, after_id: str | None, upto_id: str | None) -> list[Message]: ...


class MemoryStore(MemoryReader, Protocol):
    """Memory as the jobs keep it: a chat's rolling summary, sessions and their idle index, day markers,
    daily summaries and profiles."""

    async def get_summary(self, chat_id: str) -> Summary | None: ...

    async def replace_summary(self, summary: Summary, expected_version: int | None) -> bool: ...

    async def put_profile(self, profile: Profile) -> None: ...

    async def set_profile_timezone(self, user_id: str, timezone: str, at_ms: int) -> Profile: ...

    async def delete_profile(self, user_id: str) -> bool: ...

    async def get_session(self, chat_id: str, session_id: str) -> SessionSummary | None: ...

    async def put_session(self, session: SessionSummary) -> bool: ...

    def idle_candidate_pages(
        self, shard: int, due_by_ms: int, page_size: int | None = None
    ) -> AsyncIterator[list[Chat]]: ...

    async def move_idle_due(self, chat_id: str, session_id: str, due_ms: int) -> bool: ...

    async def close_session(self, chat_id: str, session_id: str) -> bool: ...

    def day_mark_pages(
        self, bucket: str, shard: int, closed_by_ms: int, page_size: int | None = 1000
    ) -> AsyncIterator[list[tuple[str, str]]]: ...

    async def is_day_done(self, user_id: str, date: str) -> bool: ...

    async def mark_day_done(self, user_id: str, date: str, at_ms: int) -> None: ...

    async def put_daily(self, day: DailySummary) -> None: ...

    async def put_daily_message(self, message: Message) -> None: ...


class Store(ChatStore, TurnStore, WaitStore, MemoryStore, Protocol):
    """Every role at once, as the composition root builds it (TableStore); a consumer takes the narrowest role
    it uses."""

    records: RecordStore  # long-term memory records (deleted with their chat and with the profile)
