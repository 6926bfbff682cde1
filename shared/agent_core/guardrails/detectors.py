"""The offline built-in adapter: e-mail addresses, phone numbers, card numbers (Luhn), AWS access keys, and
an agent's own regular expressions. Pure Python regexes, no network: a scan of a few hundred characters takes
microseconds."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from agent_core.guardrails.findings import Finding, Source, non_overlapping
from agent_core.guardrails.policy import Detector, GuardPattern

EMAIL = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}(?![\w-])"
)
# A run of digit groups ("+1 415-555-0134", "4111 1111 1111 1111", "(020) 7946 0958"): one space, dot or hyphen
# between groups, not glued to a word before it. Cards and phones are chosen among its group-aligned spans.
RUN = re.compile(r"(?<![\w+(])[+(]?\d+\)?(?:[ .-][+(]?\d+\)?)*")
GROUP = re.compile(r"[+(]?\d+\)?")
MAX_GROUPS = 8
AWS_ACCESS_KEY = re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])")
CARD_DIGITS = range(13, 20)
PHONE_DIGITS = range(9, 16)


def luhn(digits: str) -> bool:
    """The Luhn checksum of a string of digits (card numbers pass it)."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _digits(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


def _spans(text: str) -> Iterable[tuple[int, int, str, str]]:
    """Every span of 1 to MAX_GROUPS consecutive digit groups of a run: (start, end, its text, its digits)."""
    for run in RUN.finditer(text):
        groups = [(m.start() + run.start(), m.end() + run.start()) for m in GROUP.finditer(run.group())]
        for i, (first, _) in enumerate(groups):
            for j in range(i, min(len(groups), i + MAX_GROUPS)):
                end = groups[j][1]
                span = text[first:end]
                yield first, end, span, _digits(span)


def _longest_first(candidates: Iterable[tuple[int, int]], label: str) -> list[Finding]:
    """Of overlapping candidates the longest wins (a card is never cut short by a shorter Luhn-valid prefix)."""
    chosen: list[tuple[int, int]] = []
    for start, end in sorted(candidates, key=lambda c: (c[0] - c[1], c[0])):
        if all(end <= s or start >= e for s, e in chosen):
            chosen.append((start, end))
    return [Finding(start, end, label) for start, end in sorted(chosen)]


def _cards(text: str) -> list[Finding]:
    candidates = (
        (start, end)
        for start, end, span, digits in _spans(text)
        if len(digits) in CARD_DIGITS and not any(c in span for c in "+().") and luhn(digits)
    )
    return _longest_first(candidates, "CARD")


def _phones(text: str) -> list[Finding]:
    candidates = (
        (start, end)
        for start, end, span, digits in _spans(text)
        if len(digits) in PHONE_DIGITS and (len(digits) >= 10 or not span.isdigit())
    )
    return _longest_first(candidates, "PHONE")


def _regex(pattern: re.Pattern[str], label: str, text: str) -> Iterable[Finding]:
    for m in pattern.finditer(text):
        if m.end() > m.start():
            yield Finding(m.start(), m.end(), label)


@dataclass
class BuiltinAdapter:
    """The offline detectors an agent chose, then its own patterns; earlier ones win an overlap."""

    detectors: tuple[Detector, ...]
    patterns: tuple[tuple[str, re.Pattern[str]], ...] = ()
    name: str = "builtin"
    batch_chars: int = 1  # a scan is cheap: every delta is scanned

    @classmethod
    def of(cls, detectors: Iterable[Detector], patterns: Iterable[GuardPattern]) -> BuiltinAdapter:
        return cls(tuple(detectors), tuple((p.name, re.compile(p.pattern)) for p in patterns))

    def find(self, text: str) -> list[Finding]:
        found: list[Finding] = []
        # Cards before phones (a card number also looks like a long phone number), keys before custom patterns.
        if "card" in self.detectors:
            found += _cards(text)
        if "aws_access_key" in self.detectors:
            found += _regex(AWS_ACCESS_KEY, "AWS_ACCESS_KEY", text)
        if "email" in self.detectors:
            found += _regex(EMAIL, "EMAIL", text)
        for label, pattern in self.patterns:
            found += _regex(pattern, label, text)
        if "phone" in self.detectors:
            found += _phones(text)
        return non_overlapping(found)

    async def scan(self, text: str, source: Source) -> list[Finding]:
        return self.find(text)
