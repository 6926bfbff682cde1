"""Shared pytest fixtures; tests/conftest.py imports from here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.openai_stub import OpenAiStub


@pytest.fixture
def openai_stub() -> Iterator[OpenAiStub]:
    """A started loopback OpenAI-compatible stub server, stopped after the test."""
    with OpenAiStub() as stub:
        yield stub
