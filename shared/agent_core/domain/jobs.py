"""Background jobs and the WorkQueue port (SQS in Lambda, asyncio tasks locally)."""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel


class CompactJob(BaseModel):
    """Fold a chat's older messages into its rolling summary."""

    kind: Literal["compact"] = "compact"
    chat_id: str
    model: str


Job = CompactJob


class WorkQueue(Protocol):
    async def enqueue(self, job: Job) -> None: ...
