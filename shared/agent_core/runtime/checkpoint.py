"""Writing a run's checkpoint (domain/checkpoint.py) whenever its tool step goes quiet.

A step is quiet when every call of it has its result or waits on a person (an approval, a frontend tool's
params): nothing more happens in the run until an answer comes, so what it did so far is all there is to
keep. The run's durable log is written up to its last event first (the checkpoint's `seq`), so a run
continued elsewhere (runtime/continuation.py) sends its next events after exactly the ones its client could
have seen. Only runs that wait in place keep one (`approvals: wait`, the native wire; not a chain agent,
whose intent routing is not a step to go back to); a checkpoint that cannot be written is logged and the run
goes on (if its process then dies, it is settled `interrupted`, as without one).
"""

from __future__ import annotations

import time

from agent_core.domain.checkpoint import RunCheckpoint
from agent_core.domain.models import Message, Role, ToolCall
from agent_core.observability import logger
from agent_core.runtime.approvals import RunWaits
from agent_core.runtime.event_log import EventLogWriter
from agent_core.runtime.recorder import RunRecorder
from agent_core.runtime.turn import PreparedTurn


class StepCheckpoints:
    """The current tool step's calls and results; `settle` writes the checkpoint when the step is quiet."""

    def __init__(self, turn: PreparedTurn, recorder: RunRecorder, bridge: RunWaits) -> None:
        self.turn, self.recorder, self.bridge = turn, recorder, bridge
        self.log: EventLogWriter | None = None  # the run's durable log (set by the runner when it has one)
        self._calls: list[ToolCall] = []
        self._done: dict[str, Message] = {}  # results of the step's calls that ended, as the model reads them
        self._written: frozenset[str] | None = None  # the ended calls of the last checkpoint written
        self.enabled = (
            turn.deps.checkpoints is not None and turn.request.approvals == "wait" and turn.agent.mode != "chain"
        )
        bridge.on_wait = self.settle

    def begin(self, calls: list[ToolCall]) -> None:
        self._calls, self._done, self._written = list(calls), {}, None

    def done(self, call: ToolCall, content: str) -> None:
        self._done[call.id] = self.recorder.message(
            Role.TOOL, content=content, tool_call_id=call.id, tool_name=call.name
        )

    def end(self) -> None:
        self._calls, self._done = [], {}

    async def settle(self) -> None:
        """Write the checkpoint if the step is quiet and changed since the last one."""
        pending = [call for call in self._calls if call.id not in self._done]
        if not self.enabled or not pending or any(call.id not in self.bridge.waiting for call in pending):
            return
        ended = frozenset(self._done)
        if ended == self._written:
            return
        self._written = ended
        await self._write(pending)

    async def _write(self, pending: list[ToolCall]) -> None:
        turn, outcome = self.turn, self.recorder.outcome
        store = turn.deps.checkpoints
        if store is None or self.log is None or not await self.log.flush():
            return  # a client could not resume after the events the checkpoint would go on from
        done = [self._done[call.id] for call in self._calls if call.id in self._done]
        checkpoint = RunCheckpoint(
            run_id=turn.run.run_id,
            user_id=turn.run.user_id,
            seq=self.recorder.assembler.seq,
            messages=[*outcome.messages, *done],
            pending=pending,
            records=list(outcome.records),
            usage=outcome.usage,
            answered_by=outcome.answered_by,
            first_token_at=outcome.first_token_at,
            extra_system=list(turn.extra_system),
            timezone=turn.timezone,
            public_base_url=turn.request.public_base_url,
        )
        try:
            await store.put(checkpoint, int(time.time()))
        except Exception as exc:
            extra = {"runId": turn.run.run_id, "error": type(exc).__name__}
            logger.warning("the run's checkpoint could not be written", extra=extra)
