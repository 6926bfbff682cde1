"""An LlmClient that adds up what the calls through it spent, per model: how a background job's model use is
counted under the user it serves."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agent_core.domain.models import Usage
from agent_core.llm.base import LlmClient, LlmDelta, LlmRequest


class CountingLlm:
    def __init__(self, inner: LlmClient) -> None:
        self.inner = inner
        self.by_model: dict[str, Usage] = {}

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]:
        last: Usage | None = None  # a stream reports its usage once, at its end (as the run's step reads it)
        try:
            async for delta in self.inner.stream(request):
                if delta.usage:
                    last = delta.usage
                yield delta
        finally:
            if last is not None:
                self.by_model[request.model] = self.by_model.get(request.model, Usage()).add(last)
