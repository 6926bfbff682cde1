"""A repeated requestId met by a budget refusal: the answer its run stored, which costs nothing, is given
instead of the refusal.

The turn's budget is checked before `begin_turn` finds a duplicate request (nothing of a refused turn is
written), so a retry of an answered request from a user now over budget or rate limited would be refused.
On a refusal only, the request's marker is read (in its chat; for a first message, the chat the user's
first-request marker names): a run that completed answers with its stored result; any other refusal stands.
An admitted turn never makes this read.
"""

from __future__ import annotations

from typing import Protocol
from zoneinfo import ZoneInfo

from agent_core.container import RunDeps
from agent_core.domain.models import RunStatus, TurnResult
from agent_core.errors import TooManyRequests
from agent_core.usage.meter import Admission


class Requested(Protocol):
    """What a turn's request says of itself (`TurnRequest`)."""

    user_id: str
    request_id: str | None
    chat_id: str | None  # None: a first message (its chat is the one its request opened)


class Answered(Exception):
    """The request was answered already: its stored result is the answer (raised in place of a refusal)."""

    def __init__(self, result: TurnResult) -> None:
        super().__init__("the request was answered already")
        self.result = result


async def admit_or_answered(deps: RunDeps, admission: Admission, model: str, tz: ZoneInfo, req: Requested) -> None:
    """The turn's budget check; a refusal of a request whose run completed raises `Answered` instead."""
    try:
        await admission.admit(model, tz)
    except TooManyRequests:
        result = await stored_result(deps, req.user_id, req.request_id, req.chat_id)
        if result is None:
            raise
        raise Answered(result) from None


async def stored_result(deps: RunDeps, user_id: str, request_id: str | None, chat_id: str | None) -> TurnResult | None:
    """The stored result of the user's completed run for `request_id` in the chat (None: the chat the request
    opened as its first message), or None."""
    if request_id is None:
        return None
    chat_id = chat_id or await deps.chats.first_request_chat(user_id, request_id)
    run = await deps.turns.run_for_request(chat_id, request_id) if chat_id else None
    if run is None or run.user_id != user_id or run.status != RunStatus.COMPLETED:
        return None
    return run.result
