"""Seeded PII for the guardrail tests and benchmark: e-mails, phone numbers, Luhn-valid card numbers, AWS access
keys, mixed into filler prose and cut into deltas at random places."""

from __future__ import annotations

import random
import string

from agent_core.guardrails.detectors import luhn

WORDS = ("the", "answer", "is", "ready", "please", "note", "that", "our", "team", "will", "follow", "up", "soon")


def email(rng: random.Random) -> str:
    local = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9)))
    return (
        f"{local}.{rng.randint(1, 99)}@{rng.choice(('example', 'mail', 'corp-x'))}.{rng.choice(('com', 'org', 'io'))}"
    )


def phone(rng: random.Random) -> str:
    digits = [str(rng.randint(0, 9)) for _ in range(7)]
    return f"+1 {rng.randint(201, 989)}-{''.join(digits[:3])}-{''.join(digits[3:])}"


def card(rng: random.Random) -> str:
    body = "4" + "".join(str(rng.randint(0, 9)) for _ in range(14))
    check = next(d for d in "0123456789" if luhn(body + d))
    number = body + check
    return " ".join(number[i : i + 4] for i in range(0, 16, 4))


def aws_key(rng: random.Random) -> str:
    return rng.choice(("AKIA", "ASIA")) + "".join(rng.choices(string.ascii_uppercase + string.digits, k=16))


KINDS = {"EMAIL": email, "PHONE": phone, "CARD": card, "AWS_ACCESS_KEY": aws_key}


def answer(
    rng: random.Random, words: tuple[int, int] = (20, 90), secrets: tuple[int, int] = (1, 4)
) -> tuple[str, list[tuple[str, str]]]:
    """Prose with PII between words; the PII as (label, text)."""
    tokens = [rng.choice(WORDS) for _ in range(rng.randint(*words))]
    found: list[tuple[str, str]] = []
    for _ in range(rng.randint(*secrets)):
        label = rng.choice(list(KINDS))
        value = KINDS[label](rng)
        found.append((label, value))
        tokens.insert(rng.randint(0, len(tokens)), value)
    return " ".join(tokens) + ".", found


def cut(rng: random.Random, text: str, longest: int = 12) -> tuple[str, ...]:
    """`text` in deltas of 1 to `longest` characters, cut anywhere (inside a secret too)."""
    pieces: list[str] = []
    at = 0
    while at < len(text):
        size = rng.randint(1, longest)
        pieces.append(text[at : at + size])
        at += size
    return tuple(pieces)
