"""The offline guardrail adapter (e-mails, phones, Luhn-checked cards, AWS access keys, custom patterns) and the
agent definition's `guardrails` block."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agent_core.guardrails.detectors import BuiltinAdapter, luhn
from agent_core.guardrails.findings import Finding, masked, non_overlapping
from agent_core.guardrails.policy import DETECTORS, GuardPattern, GuardrailPolicy
from agent_core.runtime.agents import AgentDefinition

ALL = BuiltinAdapter.of(DETECTORS, [])


def _shown(text: str, adapter: BuiltinAdapter = ALL, style: str = "label") -> str:
    return masked(text, adapter.find(text), style)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("mail bob.smith+x@example.co.uk now", "mail {EMAIL} now"),
        ("card 4111 1111 1111 1111 ok", "card {CARD} ok"),
        ("card 4111-1111-1111-1111.", "card {CARD}."),
        ("amex 378282246310005", "amex {CARD}"),
        ("call +1 415-555-0134 or (020) 7946 0958", "call {PHONE} or {PHONE}"),
        ("key AKIAIOSFODNN7EXAMPLE, temp ASIAY34FZKBOKMUTVV7A", "key {AWS_ACCESS_KEY}, temp {AWS_ACCESS_KEY}"),
        # a key ending in a digit right before a card: the card is still found whole
        ("AKIAIOSFODNN7EXAMPL9 4470 7961 0893 6762 x", "{AWS_ACCESS_KEY} {CARD} x"),
    ],
)
def test_each_detector_finds_its_kind(text: str, shown: str) -> None:
    assert _shown(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "at 2026-01-08T10:00:00+09:00 on 2026-01-08",
        '{"timezone": "Asia/Tokyo", "time": "2026-01-08T10:00:00+09:00"}',
        "version 1.2.3, pi 3.14159, 12 345 people in 2026",
        "AKIA lowercase akiaiosfodnn7example is no key",
        "user@localhost has no domain",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert ALL.find(text) == []


def test_the_luhn_check_decides_what_is_a_card() -> None:
    assert luhn("4111111111111111") and not luhn("4111111111111112")
    assert not any(f.label == "CARD" for f in ALL.find("4111 1111 1111 1112"))


def test_custom_patterns_and_the_chosen_detectors() -> None:
    adapter = BuiltinAdapter.of(["email"], [GuardPattern(name="EMPLOYEE", pattern=r"EMP-\d{6}")])
    assert _shown("EMP-123456 at a@b.io, +1 415-555-0134", adapter) == "{EMPLOYEE} at {EMAIL}, +1 415-555-0134"
    assert _shown("a@b.io", adapter, "stars") == "***"


def test_overlapping_findings_are_merged_so_no_part_is_left() -> None:
    merged = non_overlapping([Finding(5, 10, "A"), Finding(0, 7, "B"), Finding(12, 14, "C")])
    assert merged == [Finding(0, 10, "A"), Finding(12, 14, "C")]  # A came first: its label


def test_the_policy_block_of_an_agent_definition() -> None:
    agent = AgentDefinition.model_validate(
        {
            "key": "g",
            "name": "G",
            "guardrails": {"output": "mask", "toolResults": {"action": "block"}, "maskStyle": "stars"},
        }
    )
    policy = agent.guardrails
    assert policy is not None and policy.adapter == "builtin" and policy.detectors == list(DETECTORS)
    assert policy.check("output") is not None and policy.check("output").action == "mask"  # type: ignore[union-attr]
    assert policy.check("input") is None and policy.tool_results is not None and policy.tool_results.action == "block"


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({}, "name no check"),
        ({"output": "redact"}, "block"),
        ({"output": "mask", "patterns": [{"name": "X", "pattern": "("}]}, "not a valid regular expression"),
        ({"output": "mask", "patterns": [{"name": "X", "pattern": "a*"}]}, "empty string"),
        ({"output": "mask", "detectors": ["ssn"]}, "email"),
    ],
)
def test_a_bad_policy_is_refused_saying_why(raw: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError) as refused:
        GuardrailPolicy.model_validate(raw)
    assert problem in str(refused.value)
