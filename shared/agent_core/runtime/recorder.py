"""A run's recorder: stamps its events, keeps the replay snapshot and what the run produced, and stores its end.

Everything the run sends passes through `emit` (stamped once, fed to the snapshot, so replay equals live);
messages the run adds are `save`d; the strategy's final step is `conclude`d into the answer; `end` persists
the run once (or, when that fails, replaces the terminal event with an error and abandons the run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from agent_core.domain.events import Event, FinishReason, RunError
from agent_core.domain.ids import sortable_id
from agent_core.domain.models import INTERRUPTED, Message, Role, RunStatus, ToolCall
from agent_core.errors import AgentError
from agent_core.observability import logger
from agent_core.runtime.composer import separator
from agent_core.runtime.envelope import Envelope, EventAssembler
from agent_core.runtime.finish import RunOutcome, abandon_run, persist_run
from agent_core.runtime.next_step import Ending, FinalAnswer
from agent_core.runtime.replay import SnapshotBuilder
from agent_core.runtime.turn import PreparedTurn
from agent_core.store.base import LeaseTaken


class RunRecorder:
    """The run's events (stamped, in the snapshot), its messages and outcome, and its stored end."""

    def __init__(self, turn: PreparedTurn) -> None:
        run = turn.run
        self._turn = turn
        self.assembler = EventAssembler(run.run_id, run.chat_id, run.request_id)
        self.snapshot = SnapshotBuilder()
        self.outcome = RunOutcome()
        self.finish_reason: FinishReason = "stop"
        self.ended = False
        # The answer as the client saw it (the output guardrail's hold-back masks; identity without one).
        self.redact: Callable[[str], str] = lambda text: text
        self.checked_arguments: dict[str, str] = {}  # tool id -> arguments as the tool-argument check passed them

    def emit(self, event: Event) -> list[Envelope]:
        envelopes = self.assembler.process(event)
        for envelope in envelopes:
            self.snapshot.feed(envelope)
        return envelopes

    def save(self, role: Role, **fields: Any) -> Message:
        """Add a message of this run; an ASSISTANT message's content is kept as the client saw it."""
        if role == Role.ASSISTANT and isinstance(fields.get("content"), str):
            fields["content"] = self.redact(fields["content"])
        if fields.get("tool_calls") and self.checked_arguments:
            fields["tool_calls"] = [self.checked(call) for call in fields["tool_calls"]]
        message = self.message(role, **fields)
        self.outcome.messages.append(message)
        return message

    def message(self, role: Role, **fields: Any) -> Message:
        """A message of this run, stamped now (not saved)."""
        at = self._turn.clock_ms()
        run = self._turn.run
        return Message(
            id=sortable_id(at),
            chat_id=run.chat_id,
            role=role,
            run_id=run.run_id,
            request_id=run.request_id,
            created_at=at,
            **fields,
        )

    def checked(self, call: ToolCall) -> ToolCall:
        """The call with its arguments as the tool-argument guardrail let them through."""
        arguments = self.checked_arguments.get(call.id)
        return call if arguments is None else call.model_copy(update={"arguments": arguments})

    def conclude(self, step: Ending) -> None:
        """The run's final answer: saved as the ASSISTANT message and returned to blocking callers.

        A preface (answer parts already streamed and saved) comes first, a paragraph break between unless
        the text brings its own (a step's lead streams one). Calls handed to the caller are saved with it.
        """
        text, preface = self.redact(step.text), step.preface
        if preface is not None:
            preface = self.redact(preface)
        if preface is None:
            self.outcome.final_text = text
        else:
            joint = "" if text[:1].isspace() else separator(preface)
            self.outcome.final_text = f"{preface}{joint}{text}".rstrip()
        if isinstance(step, FinalAnswer):
            self.save(Role.ASSISTANT, content=text)
            self.finish_reason = step.finish_reason
            return
        stored = text if step.stored is None else self.redact(step.stored)
        self.save(Role.ASSISTANT, content=stored, tool_calls=list(step.calls))
        self.finish_reason = "tool_calls"

    async def end(self, status: RunStatus, terminal: Event, envelopes: list[Envelope]) -> list[Envelope]:
        """Store the run's end; the envelopes to send last (the terminal one replaced if that failed)."""
        self.ended = True
        turn = self._turn
        entries = self.snapshot.entries()
        try:
            await persist_run(turn, self.outcome, status, terminal, self.finish_reason, entries)
            return envelopes
        except LeaseTaken:
            # Another process continued this run (this one had lost its lease): the run's end is its to store.
            logger.warning("the run goes on in another process", extra={"runId": turn.run.run_id})
            message = "the run goes on in another process: resume its stream to follow it"
            return [
                *envelopes[:-1],
                dataclasses.replace(envelopes[-1], event=RunError(code=INTERRUPTED, message=message)),
            ]
        except Exception as exc:
            logger.exception("the end of the run could not be stored", extra={"runId": turn.run.run_id})
            code = exc.code if isinstance(exc, AgentError) else "internal_error"
            error = RunError(code=code, message="the answer could not be stored; please ask again")
        # The terminal event was not sent yet: the client gets the error in its place, with its seq.
        final = dataclasses.replace(envelopes[-1], event=error)
        kept = [e for e in entries if e["type"] in ("request.query", "chat.start", "run.start")]
        await abandon_run(turn, error, [*kept, final.wire()])
        return [*envelopes[:-1], final]
