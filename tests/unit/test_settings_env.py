"""Settings read from a real process environment (`os.environ`), never from constructor arguments.

pydantic-settings decodes complex fields as JSON before validators run; a list setting must still accept
every form a person writes. Each field of `Settings` is set through the environment here.
"""

from __future__ import annotations

import typing
from typing import Any, get_args, get_origin

import pytest

from agent_core.config import Settings

LIST_FORMS: list[tuple[str, list[str]]] = [
    ("", []),
    ("time", ["time"]),
    ("time,http_get", ["time", "http_get"]),
    (" time , http_get ,", ["time", "http_get"]),
    ('["time", "http_get"]', ["time", "http_get"]),
    ("[]", []),
]


def _aliases() -> dict[str, str]:
    return {name: str(field.alias) for name, field in Settings.model_fields.items()}


def _is_list(annotation: Any) -> bool:
    while get_origin(annotation) is typing.Annotated:
        annotation = get_args(annotation)[0]
    return get_origin(annotation) is list


def _sample(name: str) -> tuple[str, Any]:
    """An environment string for the field and the value it must parse to."""
    field = Settings.model_fields[name]
    annotation = field.annotation
    if name in SAMPLES:
        return SAMPLES[name]
    if _is_list(annotation):
        return "a.example.com, b.example.com", ["a.example.com", "b.example.com"]
    if annotation is bool:
        return "false" if field.default else "true", not field.default
    if annotation is int:
        return "7", 7
    if annotation is float:
        return "2.5", 2.5
    if get_origin(annotation) is typing.Literal:
        choices = [c for c in get_args(annotation) if c != field.default]
        return str(choices[0]), choices[0]
    return f"value-of-{name}", f"value-of-{name}"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for alias in _aliases().values():
        monkeypatch.delenv(alias, raising=False)
    return monkeypatch


# Settings whose values have a form of their own.
SAMPLES: dict[str, tuple[str, Any]] = {
    "llm_fallback": (
        "openai:gpt-4.1-mini, bedrock:amazon.nova-pro-v1:0",
        ["openai:gpt-4.1-mini", "bedrock:amazon.nova-pro-v1:0"],
    ),
    "memory_embedding_dimensions": ("256", 256),  # 64-3072
    "memory_recall_min_similarity": ("0.35", 0.35),  # a cosine, 0-1
    "default_timezone": ("Europe/Paris", "Europe/Paris"),
    "usage_prices": ('{"m1": {"input": 1, "output": 2.5}}', {"m1": {"input": 1.0, "output": 2.5}}),
    "tool_approval": ('{"save_file": "always"}', {"save_file": "always"}),
    "tool_approval_timeout_ms": ("120000", 120000),  # >= 1000
}

# Settings that are valid only with another one (the clock override is a dev-stage feature).
# A fallback chain follows a provider's model, never the offline one.
COMPANIONS = {"allow_clock_override": {"AGENT_STAGE": "dev"}, "llm_fallback": {"AGENT_LLM_PROVIDER": "bedrock"}}


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_every_setting_parses_from_the_environment(clean_env: pytest.MonkeyPatch, name: str) -> None:
    raw, expected = _sample(name)
    clean_env.setenv(_aliases()[name], raw)
    for alias, value in COMPANIONS.get(name, {}).items():
        clean_env.setenv(alias, value)
    assert getattr(Settings(), name) == expected


LIST_FIELDS = sorted(name for name, field in Settings.model_fields.items() if _is_list(field.annotation))


def test_the_list_settings_are_the_documented_ones() -> None:
    assert set(LIST_FIELDS) == {
        "tools_allowed",
        "permissions_granted",
        "http_allowed_hosts",
        "cors_origins",
        "llm_fallback",
    }


@pytest.mark.parametrize("name", [name for name in LIST_FIELDS if name not in SAMPLES])
@pytest.mark.parametrize(("raw", "expected"), LIST_FORMS)
def test_list_settings_accept_every_written_form(
    clean_env: pytest.MonkeyPatch, name: str, raw: str, expected: list[str]
) -> None:
    clean_env.setenv(_aliases()[name], raw)
    assert getattr(Settings(), name) == expected


def test_an_empty_environment_gives_the_defaults(clean_env: pytest.MonkeyPatch) -> None:
    s = Settings()
    assert s.tools_allowed == ["*"]
    assert s.cors_origins == []
    assert s.storage == "embedded"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", []),
        ("bedrock:amazon.nova-pro-v1:0", [("bedrock", "amazon.nova-pro-v1:0")]),
        (
            "openai:gpt-4.1-mini, bedrock:us.anthropic.claude-sonnet-4-20250514-v1:0",
            [("openai", "gpt-4.1-mini"), ("bedrock", "us.anthropic.claude-sonnet-4-20250514-v1:0")],
        ),
        ('["azure:gpt-4o"]', [("azure", "gpt-4o")]),
    ],
)
def test_the_fallback_chain_splits_each_entry_on_its_first_colon(
    clean_env: pytest.MonkeyPatch, raw: str, expected: list[tuple[str, str]]
) -> None:
    clean_env.setenv("AGENT_LLM_PROVIDER", "bedrock")
    clean_env.setenv("AGENT_LLM_FALLBACK", raw)
    assert Settings().fallback_chain() == expected


@pytest.mark.parametrize("raw", ["gpt-4.1-mini", "anthropic:claude", "bedrock:"])
def test_a_fallback_entry_without_a_known_provider_and_a_model_is_refused(
    clean_env: pytest.MonkeyPatch, raw: str
) -> None:
    clean_env.setenv("AGENT_LLM_FALLBACK", raw)
    with pytest.raises(ValueError, match="AGENT_LLM_FALLBACK"):
        Settings()


@pytest.mark.parametrize("primary", [{"AGENT_LLM_PROVIDER": "offline"}, {}])
def test_a_fallback_chain_after_the_offline_model_is_refused_at_start_up(
    clean_env: pytest.MonkeyPatch, primary: dict[str, str]
) -> None:
    """Once accepted and never used: the offline model never fails, so no call reached the chain."""
    for name, value in {**primary, "AGENT_LLM_FALLBACK": "openai:gpt-4.1-mini"}.items():
        clean_env.setenv(name, value)
    with pytest.raises(ValueError, match="AGENT_LLM_FALLBACK needs a model provider to fall back from") as refused:
        Settings()
    assert "set AGENT_LLM_PROVIDER" in str(refused.value)
    if not primary:  # a key makes the primary OpenAI-compatible: the chain follows it
        clean_env.setenv("OPENAI_API_KEY", "sk-x")
        assert Settings().fallback_chain() == [("openai", "gpt-4.1-mini")]


@pytest.mark.parametrize("zone", ["Mars/Olympus", "Asia/Shangai", "America", ""])
def test_an_unknown_default_timezone_is_refused_at_start_up_naming_the_setting(
    clean_env: pytest.MonkeyPatch, zone: str
) -> None:
    """Once only a warning logged on each request, while the server started anyway."""
    from pydantic import ValidationError

    from agent_core.cli import invalid_configuration

    clean_env.setenv("AGENT_DEFAULT_TIMEZONE", zone)
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert invalid_configuration(refused.value) == (
        f"agent-core: invalid configuration: AGENT_DEFAULT_TIMEZONE: {zone!r} is not an IANA time zone name such "
        "as Asia/Shanghai, Europe/Paris or UTC (docs/settings.md)"
    )
