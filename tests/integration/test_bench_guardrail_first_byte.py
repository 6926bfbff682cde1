"""Smoke test of `bench.guardrail_first_byte` (no timing asserted): both agents stream their answer from one model
request each, and the guarded one never shows the address or the number it masks (`run` raises if it does)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_core.observability import logger
from bench import guardrail_first_byte


@pytest.fixture
def logger_level() -> Iterator[None]:
    level = logger.log_level
    try:
        yield
    finally:
        logger.setLevel(level)


def test_both_agents_stream_and_the_guarded_one_masks(logger_level: None) -> None:
    result = guardrail_first_byte.run(turns=1)
    assert result["turns"] == 1 and result["answer_chars"] > 400
    for agent in ("plain", "guarded"):
        assert result[agent]["first_byte_p50_ms"] > 0 and result[agent]["complete_p95_ms"] > 0
    assert "added_first_byte_p95_ms" in result
