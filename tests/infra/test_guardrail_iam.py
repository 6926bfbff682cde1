"""A configured Bedrock guardrail in the stack: its settings in the functions that run turns, and ApplyGuardrail
on exactly that guardrail, only there and only when configured."""

from __future__ import annotations

from typing import Any

import pytest
from cdk_nag import AwsSolutionsChecks

from infra.settings import InfraSettings, SettingsError
from tests.infra.test_bedrock_iam import LLM_FUNCTIONS, _text
from tests.infra.test_permissions import _resources, _role_statements, role_actions
from tests.infra.test_stack import Synth, _fn, _synth

APPLY = "bedrock:ApplyGuardrail"
ARN = "arn:aws:bedrock:eu-west-1:123456789012:guardrail/abc123xyz"
OTHER_FUNCTIONS = ("submit", "data", "idle_sessions", "daily_summary")


@pytest.fixture(scope="module")
def guarded() -> Synth:
    return _synth({"guardrailId": "gr7abc", "guardrailVersion": "4", "guardrailHoldbackChars": "120"})


def _apply_statements(synth: Synth, name: str) -> list[dict[str, Any]]:
    return [
        s
        for s in _role_statements(synth, name)
        if APPLY in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    ]


def test_the_turn_functions_get_the_settings_and_apply_on_exactly_that_guardrail(guarded: Synth) -> None:
    for name in LLM_FUNCTIONS:
        env = _fn(guarded, name)[1]["Properties"]["Environment"]["Variables"]
        assert (env["AGENT_GUARDRAIL_ID"], env["AGENT_GUARDRAIL_VERSION"]) == ("gr7abc", "4")
        assert env["AGENT_GUARDRAIL_HOLDBACK_CHARS"] == "120"
        [statement] = _apply_statements(guarded, name)
        assert [_text(r) for r in _resources(statement)] == [
            "arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:guardrail/gr7abc"
        ]
        assert "Condition" not in statement
    for name in OTHER_FUNCTIONS:  # functions that never run a turn get neither
        env = _fn(guarded, name)[1]["Properties"]["Environment"]["Variables"]
        assert not any(key.startswith("AGENT_GUARDRAIL") for key in env), name
        assert APPLY not in role_actions(guarded, name), name


def test_an_arn_is_granted_as_given() -> None:
    synth = _synth({"guardrailId": ARN})
    [statement] = _apply_statements(synth, "chat")
    assert _resources(statement) == [ARN]
    env = _fn(synth, "chat")[1]["Properties"]["Environment"]["Variables"]
    assert env["AGENT_GUARDRAIL_VERSION"] == "DRAFT" and "AGENT_GUARDRAIL_HOLDBACK_CHARS" not in env


def test_without_a_guardrail_nothing_is_granted_or_set() -> None:
    dev = _synth()
    for name in LLM_FUNCTIONS:
        assert APPLY not in role_actions(dev, name)
        env = _fn(dev, name)[1]["Properties"]["Environment"]["Variables"]
        assert not any(key.startswith("AGENT_GUARDRAIL") for key in env)


@pytest.mark.parametrize(
    ("context", "problem"),
    [
        ({"guardrailId": "Bad Id!"}, "guardrailId"),
        ({"guardrailId": "abc", "guardrailVersion": "latest"}, "guardrailVersion"),
        ({"guardrailHoldbackChars": -1}, "guardrailHoldbackChars"),
    ],
)
def test_bad_guardrail_settings_are_refused(context: dict[str, Any], problem: str) -> None:
    with pytest.raises(SettingsError, match=problem):
        InfraSettings.from_mapping(context)


def test_cdk_nag_accepts_the_guardrail_grant(guarded: Synth) -> None:
    report = AwsSolutionsChecks().validate_scope(guarded.stack)
    assert not [v.rule_name for v in report.violations] and report.success
