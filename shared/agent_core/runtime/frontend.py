"""Frontend tools wait for the browser: the WAIT item is polled with strongly consistent reads."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agent_core.domain.models import Wait, WaitStatus
from agent_core.observability import logger
from agent_core.store.base import WaitStore

FIRST_POLL_S = 0.05
POLL_S = 0.15


class StoreFrontendBridge:
    """Implements the FrontendBridge port for one run; when the run ends, `close` refuses later submits."""

    def __init__(self, store: WaitStore, run_id: str, user_id: str) -> None:
        self._store = store
        self._run_id = run_id
        self._user_id = user_id
        self._open: list[str] = []  # the calls whose WAIT item may still accept a submit

    async def open_wait(self, tool_call_id: str, timeout_ms: int) -> None:
        """Written before the call's tool.end is sent, so a client that submits on tool.end always matches."""
        expires_at = int(time.time() + timeout_ms / 1000) + 1
        wait = Wait(run_id=self._run_id, tool_id=tool_call_id, user_id=self._user_id, expires_at=expires_at)
        await self._store.create_wait(wait)
        self._open.append(tool_call_id)

    async def close(self) -> None:
        """Close the calls still waiting (the run is ending, however it ends: a client that went away, a
        failure, the deadline): a submit after the end is then refused with the run's status. Best effort:
        a WAIT item left open expires with its timeout."""
        for tool_call_id in self._open:
            try:
                await self._store.close_wait(self._run_id, tool_call_id)
            except Exception as exc:
                logger.warning("frontend wait close failed", extra={"runId": self._run_id, "error": type(exc).__name__})
        self._open.clear()

    async def await_submit(self, tool_call_id: str, timeout_ms: int) -> dict[str, Any] | None:
        """The submitted params, or None when the time runs out."""
        deadline = time.monotonic() + timeout_ms / 1000
        delay = FIRST_POLL_S
        while True:
            await asyncio.sleep(max(0.0, min(delay, deadline - time.monotonic())))
            try:
                wait = await self._store.get_wait(self._run_id, tool_call_id)
            except Exception as exc:  # one failed read does not end the wait: poll again
                logger.warning("frontend wait read failed", extra={"runId": self._run_id, "error": type(exc).__name__})
                wait = None
            if wait is not None and wait.status == WaitStatus.SUBMITTED:
                self._open = [t for t in self._open if t != tool_call_id]
                return wait.params if isinstance(wait.params, dict) else {"value": wait.params}
            if time.monotonic() >= deadline:
                return None
            delay = POLL_S
