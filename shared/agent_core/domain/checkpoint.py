"""A run's checkpoint: what it had done when it stopped to wait on people, so another process can go on.

A run whose tool step is quiet (every call of the step has its result or waits on a person: an approval, a
frontend tool's params) writes one (runtime/checkpoint.py). When the process holding the run dies while it
waits, the answer (or the wait's timeout) continues the run from here on any instance
(runtime/continuation.py): the same run id, its events after the last one its log holds.
"""

from __future__ import annotations

from pydantic import Field

from agent_core.domain.models import Message, Model, ToolCall, ToolCallRecord, Usage


class RunCheckpoint(Model):
    run_id: str
    user_id: str
    seq: int  # the last event the run had sent (its durable log holds every event up to it)
    messages: list[Message] = Field(default_factory=list)  # what the run added (the step's call and results)
    pending: list[ToolCall] = Field(default_factory=list)  # the step's calls waiting on a person
    records: list[ToolCallRecord] = Field(default_factory=list)  # the calls that ended (TOOL_AUDIT, the result)
    usage: Usage = Field(default_factory=Usage)
    answered_by: str | None = None
    first_token_at: float | None = None
    extra_system: list[str] = Field(default_factory=list)  # the turn's profile and recalled memory blocks
    timezone: str = "UTC"
    public_base_url: str = ""
