"""The run loop: a scope, a recorder, and the strategy's events until its next step says the run is over.

`TurnRunner(turn).events()` yields the run's stamped envelopes. It opens the run's scope (`scope.py`:
deadline, cancellation, lease, MCP session), sends the preamble, routes (`router.py`) to the agent's
strategy, which drives a `live_run.LiveRun` (the `AgentRun` protocol) and ends with a next step
(`next_step.py`) that this loop concludes; the recorder (`recorder.py`) stamps every event, keeps the
replay snapshot and stores the run once at its end. With an agent's guardrails, every event passes through the
hold-back window (`holdback.py`) on its way to the recorder. Errors, cancellation and the deadline become the
terminal event here; a client that goes away leaves the run cancelled with what it had.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator

from agent_core.domain.events import (
    ChatStart,
    Event,
    RequestQuery,
    RunCancel,
    RunComplete,
    RunError,
    RunStart,
    RunWarning,
)
from agent_core.domain.models import RunStatus
from agent_core.errors import AgentError, DeadlineExceeded
from agent_core.observability import logger
from agent_core.runtime.cancel import RunCancelled
from agent_core.runtime.envelope import Envelope
from agent_core.runtime.event_log import EventLogWriter
from agent_core.runtime.holdback import Holdback
from agent_core.runtime.live_run import LiveRun
from agent_core.runtime.next_step import Steps
from agent_core.runtime.recorder import RunRecorder
from agent_core.runtime.router import route_and_run
from agent_core.runtime.scope import DeadlineReached, RunScope
from agent_core.runtime.settle import to_the_end
from agent_core.runtime.toolset import Toolset, build_toolset
from agent_core.runtime.turn import PreparedTurn
from agent_core.tracing import traced_run

DISCONNECTED = "client_disconnected"


class TurnRunner:
    """Drives one prepared turn and yields its stamped events; `turn.result` is set when it completes."""

    def __init__(self, turn: PreparedTurn, toolset: Toolset | None = None, *, logged: bool = True) -> None:
        self.turn = turn
        self.logged = logged  # its events go to the run's durable log (resume); not for a blocking answer
        self.scope = RunScope(turn)
        self.recorder = RunRecorder(turn)
        toolset = toolset or build_toolset(turn.agent, turn.deps.tools)
        self.run = LiveRun(turn, self.scope, self.recorder, toolset)
        guard = turn.deps.guard_for(turn.agent)
        self.holdback: Holdback | None = None
        if guard is not None:  # the answer's hold-back window; the tool checks run in the run's tool calls
            self.holdback = Holdback(guard, turn.deps.settings.guardrail_holdback_chars)
            self.recorder.redact = self.holdback.redact
            self.recorder.checked_arguments = self.holdback.arguments
            self.run.guard = guard

    def _preamble(self) -> list[Event]:
        turn = self.turn
        preamble: list[Event] = []
        if turn.checkpoint is not None:  # a run continued from its checkpoint: its client had the preamble
            return preamble
        if turn.request.stored_message is not None:  # a continuation by tool results has no user message
            preamble.append(RequestQuery(message=turn.request.stored_message, agent_key=turn.agent.key))
        if turn.created_chat:
            preamble.append(ChatStart(chat_name=turn.chat.title))
        preamble.append(RunStart(agent_key=turn.agent.key, model=turn.run.model))
        return preamble

    async def _strategy(self) -> AsyncGenerator[Event, None]:
        """The agent's MCP tools, then the routed strategy's events; its final step concluded into the answer."""
        run, agent = self.run, self.turn.agent
        warnings: list[RunWarning] = []
        mcp = await self.scope.mcp_tools(agent)
        if mcp is not None:
            tools, found = mcp
            run.toolset = build_toolset(agent, self.turn.deps.tools, extra=tools)
            warnings = [RunWarning(code=code, message=message) for code, message in found]
        for warning in warnings:
            yield warning
        steps = Steps(run, route_and_run)
        async for event in steps:
            yield event
        self.recorder.conclude(steps.ending())

    async def _checked(self) -> AsyncIterator[Event]:
        """The strategy's events through the hold-back window (when the agent has guardrails).

        A block raised here closes the strategy (and its model stream) before the run's terminal event."""
        holdback = self.holdback
        async with contextlib.aclosing(self._strategy()) as events:
            async for event in events:
                if holdback is None:
                    yield event
                    continue
                for checked in await holdback.feed(event):
                    yield checked
        if holdback is not None:
            for checked in await holdback.flush():
                yield checked

    def _as_seen(self) -> None:
        """A run stopped part way keeps its answer as far as the client saw it (what the hold-back released)."""
        if self.holdback is not None:
            outcome = self.recorder.outcome
            outcome.partial_text = self.holdback.shown_of(outcome.partial_text)

    @traced_run  # the run's `invoke_agent` span (agent_core/tracing.py)
    async def events(self) -> AsyncIterator[Envelope]:
        """The run's envelopes as sent, each also written to the run's durable log (when it has one)."""
        log = self._log()
        self.run.checkpoints.log = log
        try:
            # Closed with this generator: a consumer that leaves ends the run at once (not when collected)
            async with contextlib.aclosing(self._events()) as events:
                async for envelope in events:
                    if log is not None:
                        log.add(envelope)
                    yield envelope
        finally:
            if log is not None:
                await to_the_end(log.close())

    def _log(self) -> EventLogWriter | None:
        turn = self.turn
        if turn.deps.run_log is None or not self.logged:
            return None
        max_age_s = turn.deps.settings.run_log_flush_ms / 1000
        return EventLogWriter(turn.deps.run_log, turn.run.run_id, turn.run.user_id, max_age_s=max_age_s)

    async def _events(self) -> AsyncGenerator[Envelope, None]:
        recorder = self.recorder
        async with self.scope:
            try:
                for event in self._preamble():
                    for envelope in recorder.emit(event):
                        yield envelope
                terminal: Event
                try:
                    async for event in self._checked():
                        for envelope in recorder.emit(event):
                            yield envelope
                    outcome = recorder.outcome
                    terminal = RunComplete.of(recorder.finish_reason, outcome.usage, outcome.answered_by)
                    status = RunStatus.COMPLETED
                except DeadlineReached:
                    # An outage must not look like an answer: no partial text is stored as one.
                    recorder.finish_reason = "deadline"
                    message = "the turn ran out of time before the model finished"
                    terminal, status = RunError(code=DeadlineExceeded.code, message=message), RunStatus.FAILED
                except RunCancelled as cancelled:
                    terminal, status = RunCancel(reason=cancelled.reason), RunStatus.CANCELLED
                    self._as_seen()
                except AgentError as error:
                    terminal, status = RunError(code=error.code, message=error.message), RunStatus.FAILED
                except Exception as exc:
                    logger.exception("run failed", extra={"runId": self.turn.run.run_id})
                    message = f"the run failed unexpectedly ({type(exc).__name__})"
                    terminal, status = RunError(code="internal_error", message=message), RunStatus.FAILED
                envelopes = recorder.emit(terminal)
                # Shielded: a client that goes away while the end is being stored does not interrupt it.
                for envelope in await to_the_end(self._end(status, terminal, envelopes)):
                    yield envelope
            except (GeneratorExit, asyncio.CancelledError):
                # The client went away (visible locally): the run stops and keeps what it had.
                if not recorder.ended:
                    self._as_seen()
                    terminal = RunCancel(reason=DISCONNECTED)
                    await to_the_end(self._end(RunStatus.CANCELLED, terminal, recorder.emit(terminal)))
                raise

    async def _end(self, status: RunStatus, terminal: Event, envelopes: list[Envelope]) -> list[Envelope]:
        self.recorder.ended = True
        await self.scope.lease.stop()  # no renewal may race the release
        await self.run.bridge.close()  # before the end is stored: no submit is accepted once the run has ended
        return await self.recorder.end(status, terminal, envelopes)
