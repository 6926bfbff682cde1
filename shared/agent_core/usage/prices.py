"""Estimated cost from the price table in settings (USD per million tokens), kept in integer micro-USD."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from agent_core.domain.models import Usage

MICROS_PER_USD = 1_000_000


@dataclass(frozen=True)
class Price:
    input: float = 0.0
    output: float = 0.0
    cached: float = 0.0  # prompt tokens read from the provider's cache

    @staticmethod
    def of(entry: Mapping[str, float]) -> Price:
        input_price = float(entry.get("input", 0.0))
        return Price(input_price, float(entry.get("output", 0.0)), float(entry.get("cached", input_price)))


@dataclass(frozen=True)
class PriceTable:
    prices: Mapping[str, Price]

    @staticmethod
    def of(table: Mapping[str, Mapping[str, float]]) -> PriceTable:
        return PriceTable({model: Price.of(entry) for model, entry in table.items()})

    def price(self, model: str) -> Price:
        # `provider:model` (a fallback chain's answer) is priced as its model.
        return self.prices.get(model) or self.prices.get(model.partition(":")[2]) or Price()

    def cost_micros(self, model: str, usage: Usage) -> int:
        """The estimated cost of `usage` on `model` in micro-USD (rounded up: an estimate never undercounts)."""
        price = self.price(model)
        cached = min(usage.cache_read_tokens, usage.prompt_tokens)
        # tokens x USD per million tokens = micro-USD
        micros = (usage.prompt_tokens - cached) * price.input + cached * price.cached
        return math.ceil(round(micros + usage.completion_tokens * price.output, 6))


def usd(micros: int) -> float:
    return round(micros / MICROS_PER_USD, 6)
