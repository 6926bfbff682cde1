"""The REST API as clients and operators meet it: binary responses, CORS preflight, execution log retention."""

from __future__ import annotations

import pytest

from infra.components.api import BINARY_MEDIA_TYPES
from tests.infra.test_stack import PROD_JWT, Synth, _methods, _only, _ref, _synth


@pytest.fixture(scope="module")
def dev() -> Synth:
    return _synth()


@pytest.fixture(scope="module")
def prod_jwt_week() -> Synth:
    """CORS origins configured (preflight methods) and a 7-day log retention."""
    return _synth({**PROD_JWT, "logRetentionDays": 7})


@pytest.mark.parametrize("variant", ["dev", "prod_jwt_week"])
def test_every_media_type_is_binary(variant: str, request: pytest.FixtureRequest) -> None:
    """A PNG from the data function (isBase64Encoded) reaches a browser as bytes whatever it sends first in Accept."""
    synth: Synth = request.getfixturevalue(variant)
    _, api = _only(synth, "AWS::ApiGateway::RestApi")
    assert api["Properties"]["BinaryMediaTypes"] == BINARY_MEDIA_TYPES == ["*/*"]


def test_cors_preflight_is_answered_as_text(prod_jwt_week: Synth) -> None:
    """With */* binary, a mock integration without CONVERT_TO_TEXT answers every preflight with a 500."""
    preflight = [m for (_, verb), m in _methods(prod_jwt_week).items() if verb == "OPTIONS"]
    assert preflight
    for method in preflight:
        assert method["Integration"]["Type"] == "MOCK"
        assert method["Integration"]["ContentHandling"] == "CONVERT_TO_TEXT"
    # Proxy integrations keep passing bodies through: the functions decode base64 themselves.
    proxies = [m for (_, verb), m in _methods(prod_jwt_week).items() if verb != "OPTIONS"]
    assert proxies and all("ContentHandling" not in m["Integration"] for m in proxies)


@pytest.mark.parametrize(("variant", "stage", "days"), [("dev", "dev", 30), ("prod_jwt_week", "prod", 7)])
def test_execution_logs_have_the_configured_retention(
    variant: str, stage: str, days: int, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    api_id, _ = _only(synth, "AWS::ApiGateway::RestApi")
    _, stage_resource = _only(synth, "AWS::ApiGateway::Stage")
    name = {"Fn::Join": ["", ["API-Gateway-Execution-Logs_", _ref(api_id), f"/{stage}"]]}
    groups = [
        (k, g) for k, g in synth.resources("AWS::Logs::LogGroup").items() if g["Properties"].get("LogGroupName") == name
    ]
    assert len(groups) == 1, "the execution log group API Gateway writes to is the stack's own"
    group_id, group = groups[0]
    assert group["Properties"]["RetentionInDays"] == days
    assert group["DeletionPolicy"] == ("Delete" if stage == "dev" else "Retain")
    # Created before the stage turns execution logging on, so API Gateway never creates it first.
    assert group_id in stage_resource["DependsOn"]
    settings = stage_resource["Properties"]["MethodSettings"]
    assert {s["LoggingLevel"] for s in settings} == {"ERROR"}
