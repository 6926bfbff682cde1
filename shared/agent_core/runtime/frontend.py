"""Frontend tools wait for the browser (and approvals for a person): the WAIT item is polled with strongly
consistent reads."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
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
        self.first_poll_s, self.poll_s = FIRST_POLL_S, POLL_S
        self.waiting: set[str] = set()  # the calls polling for their answer now
        # Called once a call starts waiting (runtime/checkpoint.py: the run's step may have become quiet)
        self.on_wait: Callable[[], Awaitable[None]] | None = None
        self._expires_s: dict[str, int] = {}  # reopened waits (a continued run): the WAIT item's own expiry
        self.gone: set[str] = set()  # reopened calls whose WAIT item expired: no answer can come

    async def open_wait(self, tool_call_id: str, timeout_ms: int) -> None:
        """Written before the call's tool.end is sent, so a client that submits on tool.end always matches."""
        await self._create(self.wait_for(tool_call_id, timeout_ms))

    def wait_for(self, tool_call_id: str, timeout_ms: int) -> Wait:
        """A new WAIT item of this run's user, expiring a second after `timeout_ms` from now."""
        expires_at = int(time.time() + timeout_ms / 1000) + 1
        return Wait(run_id=self._run_id, tool_id=tool_call_id, user_id=self._user_id, expires_at=expires_at)

    async def _create(self, wait: Wait) -> None:
        await self._store.create_wait(wait)
        self._open.append(wait.tool_id)

    def reopen(self, waits: list[Wait], gone: list[str]) -> None:
        """The WAIT items of a run continued in another process: polled as its own, until their own expiry;
        the calls in `gone` waited on an item past its expiry (reads skip it): their time ran out."""
        for wait in waits:
            self._open.append(wait.tool_id)
            self._expires_s[wait.tool_id] = wait.expires_at
        self.gone.update(gone)

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
        wait = await self.await_answer(tool_call_id, timeout_ms, until=(WaitStatus.SUBMITTED,))
        if wait is None:
            return None
        return wait.params if isinstance(wait.params, dict) else {"value": wait.params}

    async def await_answer(self, tool_call_id: str, timeout_ms: int, *, until: tuple[WaitStatus, ...]) -> Wait | None:
        """The WAIT item once its status is one of `until` (no longer open to a submit), or None at the deadline."""
        if tool_call_id in self.gone:
            return None
        deadline = time.monotonic() + timeout_ms / 1000
        delay = self.first_poll_s
        if tool_call_id in self._expires_s:  # a reopened wait keeps the time it had left; its answer is in
            deadline = min(deadline, time.monotonic() + self._expires_s[tool_call_id] - time.time())
            delay = 0.0
        self.waiting.add(tool_call_id)
        try:
            if self.on_wait is not None:
                await self.on_wait()
            while True:
                await asyncio.sleep(max(0.0, min(delay, deadline - time.monotonic())))
                try:
                    wait = await self._store.get_wait(self._run_id, tool_call_id)
                except Exception as exc:  # one failed read does not end the wait: poll again
                    extra = {"runId": self._run_id, "error": type(exc).__name__}
                    logger.warning("frontend wait read failed", extra=extra)
                    wait = None
                if wait is not None and wait.status in until:
                    self._open = [t for t in self._open if t != tool_call_id]
                    return wait
                if time.monotonic() >= deadline:
                    return None
                delay = self.poll_s
        finally:
            self.waiting.discard(tool_call_id)
