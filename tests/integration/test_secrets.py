"""Secrets Manager values (moto): plain strings, JSON objects with a known key, and plain values starting with `{`."""

from __future__ import annotations

import logging
import uuid

import boto3
import pytest

from agent_core.secrets import SecretFormatError, read_secret

KEYS = ("apiKey", "key", "value")


def _secret(value: str) -> str:
    name = f"agent-core/test/{uuid.uuid4().hex}"  # unique: Powertools caches values by name
    boto3.client("secretsmanager", region_name="us-east-1").create_secret(Name=name, SecretString=value)
    return name


def test_a_plain_value_is_returned_trimmed(aws_env: None) -> None:
    assert read_secret(_secret("  sk-plain-123 \n"), KEYS) == "sk-plain-123"


def test_a_json_object_gives_the_first_expected_key(aws_env: None) -> None:
    name = _secret('{"other": 1, "key": " sk-json-456 ", "value": "second"}')
    assert read_secret(name, KEYS) == "sk-json-456"


@pytest.mark.parametrize("value", ["{not json at all", "{{placeholder}}", '{"unterminated": "x', "{}junk"])
def test_a_plain_value_starting_with_a_brace_is_used_as_is(aws_env: None, value: str) -> None:
    # Given a secret that starts with "{" but is not a JSON object (e.g. a generated placeholder)
    # Then it is the value itself, not a parse error
    assert read_secret(_secret(value), KEYS) == value


def test_a_json_array_or_string_starting_with_a_brace_is_not_an_object(aws_env: None) -> None:
    assert read_secret(_secret('{"a": 1} trailing'), KEYS) == '{"a": 1} trailing'


def test_without_expected_keys_a_json_looking_value_is_plain(aws_env: None) -> None:
    # MCP `${secret:NAME}` values ask for no key: a JSON document is passed through verbatim
    assert read_secret(_secret('{"token": "abc"}')) == '{"token": "abc"}'


def test_a_json_object_without_the_keys_is_a_clear_error_that_never_shows_the_value(
    aws_env: None, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a JSON object secret holding none of the expected keys
    name = _secret('{"password": "hunter2-super-secret"}')
    caplog.set_level(logging.INFO)  # botocore DEBUG prints response bodies: never enabled in the product
    # When it is read
    with pytest.raises(SecretFormatError) as raised:
        read_secret(name, KEYS)
    # Then the error names the secret, the expected and the found keys, and never the value
    message = str(raised.value)
    assert name in message and "apiKey" in message and "password" in message
    assert "hunter2" not in message
    assert raised.value.__cause__ is None and raised.value.__context__ is None
    out = capsys.readouterr()
    assert "hunter2" not in caplog.text + out.out + out.err


def test_an_empty_secret_is_a_clear_error(aws_env: None) -> None:
    with pytest.raises(SecretFormatError, match="empty"):
        read_secret(_secret("   "), KEYS)
