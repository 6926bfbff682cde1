"""Smoke test of `bench.wire_first_byte` (no timing asserted): each wire's request is accepted, streams text
and ends normally, and every turn costs the app exactly one model request."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_core.observability import logger
from bench import wire_first_byte


@pytest.fixture
def logger_level() -> Iterator[None]:
    """The bench quiets the process-wide logger (INFO off): give the next tests theirs back."""
    level = logger.log_level
    try:
        yield
    finally:
        logger.setLevel(level)


def test_every_wire_streams_text_from_one_model_request(logger_level: None) -> None:
    result = wire_first_byte.run(turns=1)
    # One warm-up turn and one measured turn per wire; `first_text_ms` raises on a refused request, a stream
    # without text or one that did not end normally.
    assert result["llm_requests"] == 2 * len(wire_first_byte.WIRES)
    assert set(wire_first_byte.WIRES) <= set(result)
    assert result["native"]["ratio_p50"] == 1.0
