"""Fixtures for every test: see tests/support/fixtures.py."""

from tests.support.fixtures import (  # noqa: F401
    audit_lines,
    any_table,
    aws_env,
    ctx,
    moto_table,
    openai_stub,
)
