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
# 13 to 19 digits, single spaces or hyphens between groups; the Luhn check decides.
CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d])")
# +CC, an optional area code in brackets, groups of digits separated by one space, dot or hyphen; 9 to 15 digits.
PHONE = re.compile(r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]?\d{2,4}){2,4}(?![\w])")
AWS_ACCESS_KEY = re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])")
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


def _cards(text: str) -> Iterable[Finding]:
    for m in CARD.finditer(text):
        if luhn(_digits(m.group())):
            yield Finding(m.start(), m.end(), "CARD")


def _phones(text: str) -> Iterable[Finding]:
    for m in PHONE.finditer(text):
        if len(_digits(m.group())) in PHONE_DIGITS:
            yield Finding(m.start(), m.end(), "PHONE")


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
