"""The fallback chain: further models tried in order when a call fails before producing any output."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from agent_core.errors import LlmUnavailable
from agent_core.llm.base import LlmClient, LlmDelta, LlmRequest


@dataclass
class ChainEntry:
    """One model of the chain: `provider:model` and the client that calls it."""

    provider: str
    model: str
    client: LlmClient

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"


def count_fallback(failed: str, next_label: str, error: LlmUnavailable) -> None:
    """The `LlmFallbacks` metric and a warning line naming both models (never the provider's credentials)."""
    from aws_lambda_powertools.metrics import MetricUnit

    from agent_core.observability import logger, metrics

    metrics.add_metric(name="LlmFallbacks", unit=MetricUnit.Count, value=1)
    logger.warning("LLM fallback", extra={"failed": failed, "next": next_label, "errorCode": error.code})


class FallbackLlm:
    """The primary model, then each fallback, until one starts answering.

    A failure after output started is raised as is: the caller already forwarded part of an answer. Errors
    that another model would repeat (a malformed request, tools refused) are raised without falling back.
    Every delta stream says which model answered: its first delta carries `provider:model`.
    """

    def __init__(
        self,
        primary: ChainEntry,
        fallbacks: list[ChainEntry],
        on_fallback: Callable[[str, str, LlmUnavailable], None] = count_fallback,
    ) -> None:
        self.entries = [primary, *fallbacks]
        self._on_fallback = on_fallback

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]:
        for position, entry in enumerate(self.entries):
            # The primary keeps the request's model (an agent may choose its own); fallbacks use theirs.
            model = (request.model or entry.model) if position == 0 else entry.model
            label = f"{entry.provider}:{model}"
            started = False
            try:
                async for delta in entry.client.stream(request.model_copy(update={"model": model})):
                    if not started:
                        delta = delta.model_copy(update={"model": label})
                        started = True
                    yield delta
                return
            except LlmUnavailable as error:
                last = position == len(self.entries) - 1
                if started or not error.fallback_ok or last:
                    raise
                self._on_fallback(label, self.entries[position + 1].label, error)

    async def aclose(self) -> None:
        for entry in self.entries:
            close = getattr(entry.client, "aclose", None)
            if close is not None:
                await close()
