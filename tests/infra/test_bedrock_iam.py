"""The Bedrock provider in the stack: settings, environment, no API-key secret, and invoke rights on exactly
the configured models (foundation models, inference profiles and the models they route to)."""

from __future__ import annotations

from typing import Any

import pytest
from cdk_nag import AwsSolutionsChecks

from infra.settings import InfraSettings, SettingsError
from tests.infra.test_permissions import _resources, _role_statements, role_actions
from tests.infra.test_stack import Synth, _fn, _synth

PROFILE = "us.anthropic.claude-sonnet-4-20250514-v1:0"
BEDROCK = {"llmProvider": "bedrock", "model": PROFILE, "llmFallback": "bedrock:amazon.nova-pro-v1:0"}
MIXED = {"model": "gpt-4.1-mini", "llmFallback": ["bedrock:global.amazon.nova-2-lite-v1:0"]}
INVOKE = {"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"}
LLM_FUNCTIONS = ("chat", "stream", "worker")


@pytest.fixture(scope="module")
def bedrock() -> Synth:
    return _synth(BEDROCK)


@pytest.fixture(scope="module")
def mixed() -> Synth:
    return _synth(MIXED)


def _text(value: Any) -> str:
    """A template string value with pseudo parameters as `${...}` (Fn::Join of literals and Refs)."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return "${" + value["Ref"] + "}"
    separator, parts = value["Fn::Join"]
    return separator.join(_text(part) for part in parts)


def _bedrock_statements(synth: Synth, name: str) -> list[dict[str, Any]]:
    return [s for s in _role_statements(synth, name) if INVOKE & set(s["Action"])]


def test_settings_split_fallback_entries_and_refuse_unknown_providers() -> None:
    settings = InfraSettings.from_mapping(BEDROCK)
    assert settings.llm_chain() == [("bedrock", PROFILE), ("bedrock", "amazon.nova-pro-v1:0")]
    assert settings.bedrock_models == [PROFILE, "amazon.nova-pro-v1:0"] and not settings.needs_llm_key
    with pytest.raises(SettingsError, match="llmFallback"):
        InfraSettings.from_mapping({"llmFallback": "anthropic:claude"})


def test_bedrock_only_has_no_api_key_secret(bedrock: Synth) -> None:
    secrets = bedrock.resources("AWS::SecretsManager::Secret")
    assert len(secrets) == 1, "only the data-link key"
    assert "LlmApiKeySecretName" not in bedrock.json.get("Outputs", {})
    for name in LLM_FUNCTIONS:
        env = _fn(bedrock, name)[1]["Properties"]["Environment"]["Variables"]
        assert "AGENT_LLM_API_KEY_SECRET" not in env and "OPENAI_BASE_URL" not in env
        assert env["AGENT_LLM_PROVIDER"] == "bedrock" and env["AGENT_MODEL"] == PROFILE
        assert env["AGENT_LLM_FALLBACK"] == "bedrock:amazon.nova-pro-v1:0"


def test_the_llm_functions_may_invoke_exactly_the_configured_models(bedrock: Synth) -> None:
    for name in LLM_FUNCTIONS:
        statements = _bedrock_statements(bedrock, name)
        assert len(statements) == 2, name
        direct, routed = statements
        assert "Condition" not in direct
        assert sorted(_text(r) for r in _resources(direct)) == [
            "arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:inference-profile/" + PROFILE,
            "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/amazon.nova-pro-v1:0",
        ]
        # The profile's model in any Region it routes to, and only through the profile
        assert [_text(r) for r in _resources(routed)] == [
            "arn:${AWS::Partition}:bedrock:*::foundation-model/anthropic.claude-sonnet-4-20250514-v1:0"
        ]
        [(operator, condition)] = routed["Condition"].items()
        assert operator == "StringEquals"
        assert _text(condition["bedrock:InferenceProfileArn"]) == (
            "arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:inference-profile/" + PROFILE
        )
        assert set(routed["Action"]) == set(direct["Action"]) == INVOKE
        assert "secretsmanager:GetSecretValue" in role_actions(bedrock, name), "the data-link key only"
    for name in ("submit", "data", "idle_sessions", "daily_summary"):
        assert not _bedrock_statements(bedrock, name), name


def test_a_mixed_chain_keeps_the_key_secret_and_grants_a_global_profile(mixed: Synth) -> None:
    assert len(mixed.resources("AWS::SecretsManager::Secret")) == 2
    env = _fn(mixed, "chat")[1]["Properties"]["Environment"]["Variables"]
    assert env["AGENT_LLM_PROVIDER"] == "openai" and "AGENT_LLM_API_KEY_SECRET" in env
    _, routed = _bedrock_statements(mixed, "chat")
    assert [_text(r) for r in _resources(routed)] == [
        "arn:${AWS::Partition}:bedrock:*::foundation-model/amazon.nova-2-lite-v1:0",
        "arn:${AWS::Partition}:bedrock:::foundation-model/amazon.nova-2-lite-v1:0",
    ]


def test_the_openai_default_grants_no_bedrock(request: pytest.FixtureRequest) -> None:
    dev = _synth()
    for name in LLM_FUNCTIONS:
        assert not _bedrock_statements(dev, name)


@pytest.mark.parametrize("variant", ["bedrock", "mixed"])
def test_cdk_nag_accepts_the_bedrock_grants(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    report = AwsSolutionsChecks().validate_scope(synth.stack)
    assert not [v.rule_name for v in report.violations] and report.success
