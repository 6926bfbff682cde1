"""Fixtures for every test: see tests/support/fixtures.py."""

from tests.support.fixtures import (  # noqa: F401
    any_blobs,
    any_table,
    audit_lines,
    aws_env,
    bedrock_stub,
    ctx,
    moto_table,
    openai_stub,
    sqlite_db,
    sqlite_table,
)
