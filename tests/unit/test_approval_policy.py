"""The approval rule language: what each operator decides, and that a bad rule is a clear error at load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_core.config import Settings
from agent_core.domain.approval import parse_policy
from agent_core.runtime.agents import AgentDefinitionError, load_definition


def _asks(rule: dict[str, Any], args: Any) -> bool:
    return parse_policy({"when": rule}).reason("t", args) is not None


@pytest.mark.parametrize(
    ("rule", "args", "asks"),
    [
        ({"arg": "url", "hostNotIn": ["example.com"]}, {"url": "https://example.com/a"}, False),
        ({"arg": "url", "hostNotIn": ["example.com"]}, {"url": "https://EXAMPLE.com./a"}, False),
        ({"arg": "url", "hostNotIn": ["example.com"]}, {"url": "https://example.com.evil.net/"}, True),
        ({"arg": "url", "hostNotIn": ["example.com"]}, {"url": "https://user@evil.net/?h=example.com"}, True),
        ({"arg": "url", "hostNotIn": ["*.example.com"]}, {"url": "http://a.b.example.com"}, False),
        ({"arg": "url", "hostNotIn": ["*.example.com"]}, {"url": "http://example.com"}, True),
        ({"arg": "url", "hostNotIn": ["*.example.com"]}, {"url": "http://badexample.com"}, True),
        ({"arg": "url", "hostNotIn": ["example.com"]}, {}, True),  # a missing URL is on no list
        ({"arg": "url", "hostNotIn": ["example.com"]}, {"url": "not a url"}, True),
        ({"arg": "url", "hostNotIn": ["example.com"]}, {"url": "http://[::1"}, True),
        ({"arg": "url", "hostIn": ["example.com"]}, {"url": "https://example.com"}, True),
        ({"arg": "url", "hostIn": ["example.com"]}, {"url": 5}, False),
        ({"arg": "content", "sizeOver": 3}, {"content": "abc"}, False),
        ({"arg": "content", "sizeOver": 3}, {"content": "abcd"}, True),
        ({"arg": "content", "sizeOver": 3}, {"content": "é拼"}, True),  # UTF-8 bytes, not characters
        ({"arg": "content", "sizeOver": 3}, {"content": [1, 2]}, True),  # JSON of a non-string
        ({"arg": "n", "greaterThan": 10}, {"n": 11}, True),
        ({"arg": "n", "greaterThan": 10}, {"n": 10}, False),
        ({"arg": "n", "greaterThan": 0}, {"n": True}, False),  # a bool is not a number here
        ({"arg": "n", "lessThan": 0}, {"n": "-1"}, False),  # nor is a string
        ({"arg": "mode", "equals": "delete"}, {"mode": "delete"}, True),
        ({"arg": "mode", "oneOf": ["rm", "delete"]}, {"mode": "read"}, False),
        ({"arg": "path", "matches": r"^/etc/"}, {"path": "/etc/passwd"}, True),
        ({"arg": "path", "matches": r"^/etc/"}, {"path": 1}, False),
        ({"arg": "file.name", "equals": "x"}, {"file": {"name": "x"}}, True),
        ({"arg": "files.1", "equals": "b"}, {"files": ["a", "b"]}, True),
        ({"arg": "force", "exists": True}, {"force": None}, True),
        ({"arg": "force", "exists": False}, {}, True),
        ({"all": [{"arg": "a", "equals": 1}, {"arg": "b", "equals": 2}]}, {"a": 1, "b": 3}, False),
        ({"any": [{"arg": "a", "equals": 1}, {"arg": "b", "equals": 2}]}, {"a": 0, "b": 2}, True),
        ({"not": {"arg": "a", "equals": 1}}, {"a": 1}, False),
        ({"arg": "a", "equals": 1}, "not an object", False),
    ],
)
def test_each_operator_decides_on_the_arguments(rule: dict[str, Any], args: Any, asks: bool) -> None:
    assert _asks(rule, args) is asks


def test_never_always_and_the_reason() -> None:
    assert parse_policy("never").reason("t", {}) is None and parse_policy(None).reason("t", {}) is None
    assert parse_policy("always").reason("t", {}) == "t always needs approval"
    said = parse_policy({"when": {"arg": "n", "greaterThan": 1}, "reason": "big"})
    assert said.reason("t", {"n": 2}) == "big"
    described = parse_policy({"when": {"not": {"arg": "url", "hostIn": ["example.com"]}}})
    assert described.reason("http_get", {"url": "http://x.org"}) == 'http_get: not (url hostIn ["example.com"])'


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("sometimes", "'never' or 'always'"),
        ({"when": {"arg": "url"}}, "exactly one operator"),
        ({"when": {"arg": "url", "equals": 1, "matches": "x"}}, "exactly one operator"),
        ({"when": {"arg": "url", "matches": "("}}, "not a valid regular expression"),
        ({"when": {"arg": "url", "hostIn": ["a b"]}}, "not host names"),
        ({"when": {"arg": "url", "hostIn": []}}, "the host list is empty"),
        ({"when": {"arg": "a b", "equals": 1}}, "dotted path"),
        ({"when": {"all": []}}, "at least 1 item"),
        ({"when": {"arg": "a", "equal": 1}}, "Extra inputs are not permitted"),
        ({"when": {"arg": "a", "sizeOver": -1}}, "greater than or equal to 0"),
        ({"if": {"arg": "a", "equals": 1}}, "when: Field required"),
        ({"when": "__import__('os')"}, "Input should be"),
    ],
)
def test_a_bad_rule_is_a_clear_error(spec: Any, says: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_policy(spec)
    assert says in str(raised.value)


def test_a_bad_rule_in_an_agent_file_stops_the_start_naming_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "key: bad\nname: Bad\ntools:\n  - name: http_get\n    approval: {when: {arg: url, hostNotIn: []}}\n",
        encoding="utf-8",
    )
    with pytest.raises(AgentDefinitionError) as raised:
        load_definition(path)
    assert str(path) in str(raised.value) and raised.value.field == "tools.0.approval.when.hostNotIn"
    assert "the host list is empty" in raised.value.problem


def test_one_tool_given_a_policy_in_two_places_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "twice.yaml"
    path.write_text("key: t\nname: T\ntools:\n  - {name: time, approval: always}\napprovals: {time: always}\n")
    with pytest.raises(AgentDefinitionError) as raised:
        load_definition(path)
    assert "both in tools and in approvals" in raised.value.problem


def test_the_deployments_rules_are_checked_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TOOL_APPROVAL", '{"http_get": {"when": {"arg": "url"}}}')
    with pytest.raises(ValueError, match=r"AGENT_TOOL_APPROVAL\['http_get'\].*exactly one operator"):
        Settings()
    monkeypatch.setenv("AGENT_TOOL_APPROVAL", '{"save_file": "always"}')
    assert Settings().tool_approval == {"save_file": "always"}
    monkeypatch.setenv("AGENT_TOOL_APPROVAL", "")
    assert Settings().tool_approval == {}
