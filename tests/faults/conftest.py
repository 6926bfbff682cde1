"""Fixtures of the fault-injection suite: see harness.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.faults.harness import Harness, build_harness
from tests.support.openai_stub import OpenAiStub


@pytest.fixture
async def harness(aws_env: None, openai_stub: OpenAiStub) -> AsyncIterator[Harness]:
    h = build_harness(openai_stub)
    async with h.client:
        yield h
