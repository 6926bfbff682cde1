"""The deployed-emulation tier: one build, one moto server, one process per function for the whole session.

At the end of the run the tier prints each function's init time (cold, this session's start) and the AWS
actions it called, and writes them to .build/deployed/report.json.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.deployed.build import BUILD_DIR, exclusive
from tests.support.deployed.stack import DeployedStack, UnsupportedRuntime
from tests.support.jwks import JWKS_AUDIENCE, JWKS_ISSUER, JwksServer
from tests.support.summary import add_section

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

BEDROCK_MODEL = "us.amazon.nova-pro-v1:0"  # the bedrock variant's model: a cross-Region inference profile
FALLBACK = "openai:gpt-4.1-mini"  # the fallback variant's chain after BEDROCK_MODEL
GUARDRAIL = {"guardrailId": "gr7deployed", "guardrailVersion": "4", "guardrailHoldbackChars": 32}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.deployed)


@pytest.fixture(scope="session")
def jwks() -> Iterator[JwksServer]:
    with JwksServer() as server:
        yield server


@pytest.fixture(scope="session")
def stack(jwks: JwksServer, request: pytest.FixtureRequest) -> Iterator[DeployedStack]:
    variants: dict[str, dict[str, Any]] = {
        "jwt": {
            "authMode": "jwt",
            "jwtIssuer": JWKS_ISSUER,
            "jwtAudience": JWKS_AUDIENCE,
            "jwtJwksUrl": jwks.url,
            "corsOrigins": "https://app.example.com,https://admin.example.com",
        },
        "iam": {"authMode": "iam"},
        "bedrock": {"llmProvider": "bedrock", "model": BEDROCK_MODEL},
        "fallback": {"llmProvider": "bedrock", "model": BEDROCK_MODEL, "llmFallback": FALLBACK},
        "guardrail": GUARDRAIL,  # the OpenAI-compatible model, checked by a Bedrock guardrail
    }
    with exclusive():  # one session at a time builds and runs in .build/deployed
        yield from _started(variants, request.config)


def _started(variants: dict[str, dict[str, Any]], config: pytest.Config) -> Iterator[DeployedStack]:
    try:
        deployed = DeployedStack.start(variants=variants)
    except UnsupportedRuntime as exc:
        pytest.skip(f"deployed-emulation tier: {exc}")
    try:
        yield deployed
    finally:
        rows = deployed.report()
        lines = [f"deployed-emulation tier: runtime {deployed.runtime.note}"]
        lines.append(f"{'function':<14} {'init (s)':>8}  AWS actions called")
        for row in rows:
            used = ", ".join(sorted(row.actions)) or "-"
            lines.append(f"{row.name:<14} {row.init_s:>8.2f}  {used}")
        add_section(config, "deployed-emulation tier", lines)
        report = {
            "runtime": deployed.runtime.note,
            "functions": {r.name: {"init_s": round(r.init_s, 3), "actions": sorted(r.actions)} for r in rows},
        }
        (BUILD_DIR / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        deployed.stop()
