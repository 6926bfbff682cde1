"""A turn's budget reservation, carried by its first write (usage/meter.py `Admission`): reserving with the
chat a first message opens, and what a start that failed for good gives back (only a reservation known to be
written: an unknown one stays counted for the day)."""

from __future__ import annotations

import asyncio

from agent_core.container import RunDeps
from agent_core.domain.models import Chat, Run
from agent_core.errors import ServiceUnavailable
from agent_core.observability import logger
from agent_core.runtime.release import release_failed_run
from agent_core.store.base import ReservationRefused
from agent_core.usage.meter import Admission


async def create_reserving(deps: RunDeps, chat: Chat, request_id: str | None, admission: Admission) -> Chat:
    """The chat opened with the turn's prepared reservation in one write (429 when refused: no chat), or the chat
    a retried first message opened before (its reservation then still to write, by the begin). A failed write
    that may have committed is checked, so prepare_turn gives back a reservation written with it."""
    try:
        opened = await deps.chats.create_chat(chat, request_id=request_id, reservation=admission.reservation_write)
    except ReservationRefused:
        raise await admission.refused() from None
    except Exception:
        if admission.pending is not None and await asyncio.shield(_opened(deps, chat)):
            admission.committed()  # written with the chat: given back by prepare_turn
        raise
    if opened.chat_id == chat.chat_id:
        admission.committed()
    return opened


async def start_failed(deps: RunDeps, run: Run, question: str | None, admission: Admission, at_ms: int) -> None:
    """A begin that failed for good: an attempt may have committed before its answer was lost, so whatever it may
    have taken is freed (its lease; its budget reservation, given back by `prepare_turn`, once it is known to
    have been written with it)."""
    if admission.pending is not None and await _begun(deps, run):
        admission.committed()
    message = "the turn could not start"
    await release_failed_run(deps, run, ServiceUnavailable.code, message, at_ms, question)


async def _begun(deps: RunDeps, run: Run) -> bool:
    """Whether a begin whose answer was lost committed (its run is stored). Unknown counts as not: a reservation
    it may have written then stays counted for the day, never given back unwritten (which would let the day's
    spend pass its budget)."""
    try:
        return await deps.turns.get_run(run.chat_id, run.run_id) is not None
    except Exception:
        logger.exception("could not tell whether the turn began", extra={"runId": run.run_id})
        return False


async def _opened(deps: RunDeps, chat: Chat) -> bool:
    """Whether a chat whose creation failed was created (unknown counts as not, as for `_begun`)."""
    try:
        return await deps.chats.get_chat(chat.chat_id, chat.user_id) is not None
    except Exception:
        logger.exception("could not tell whether the chat was opened", extra={"chatId": chat.chat_id})
        return False
