"""Shared pytest fixtures, registered for every test by tests/conftest.py (`pytest_plugins`)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_core.config import Settings
from agent_core.context import AppContext, build_context
from agent_core.store.dynamodb import DynamoTable
from agent_core.store.embedded import ensure_resources
from agent_core.store.memory_table import MemoryTable
from agent_core.store.sqlite_db import SqliteDatabase
from agent_core.store.sqlite_table import SqliteTable
from agent_core.store.table import Table
from tests.support.bedrock_stub import BedrockStub
from tests.support.openai_stub import OpenAiStub


def make_settings(**overrides: Any) -> Settings:
    """Settings from explicit values only (environment variables of the machine do not leak in)."""
    base: dict[str, Any] = {"AGENT_STORAGE": "memory", "AGENT_LLM_PROVIDER": "offline"}
    base.update(overrides)
    return Settings(_env_file=None, **base)  # type: ignore[call-arg]


@pytest.fixture(scope="session", autouse=True)
def shared_botocore_data() -> Iterator[None]:
    """One botocore data loader for every boto3 session of the test process.

    The product gives each client its own session (thread safety), and moto gives each test a fresh default
    session; each new session re-reads and re-parses botocore's service models (~0.1 s per client). The
    model files never change during a run, so a loader (which caches what it has read) is shared.
    """
    import botocore.loaders
    import botocore.session

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(botocore.session, "create_loader", functools.cache(botocore.loaders.create_loader))
        yield


@pytest.fixture
def openai_stub() -> Iterator[OpenAiStub]:
    """A started loopback OpenAI-compatible stub server, stopped after the test."""
    with OpenAiStub() as stub:
        yield stub


@pytest.fixture
def bedrock_stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[BedrockStub]:
    """A started loopback Bedrock Runtime; boto3 reaches it through AWS_ENDPOINT_URL_BEDROCK_RUNTIME."""
    with BedrockStub() as stub:
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": stub.endpoint_url,
        }.items():
            monkeypatch.setenv(name, value)
        yield stub


_MOTO_REQUESTS = threading.RLock()


def serial_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's in-process backends answer one request at a time, as each AWS request is atomic: moto has no lock
    of its own (a TransactWriteItems deep-copies the table while another thread writes: `dictionary changed
    size during iteration`; two conditional UpdateItems on one item can both pass). The app's threads still
    race for it in any order, so concurrency between requests is what it is on AWS."""
    from moto.core.botocore_stubber import BotocoreStubber

    answer = BotocoreStubber.__call__

    def one_at_a_time(self: BotocoreStubber, event_name: str, request: Any, **kwargs: Any) -> Any:
        with _MOTO_REQUESTS:
            return answer(self, event_name, request, **kwargs)

    monkeypatch.setattr(BotocoreStubber, "__call__", one_at_a_time)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto's in-process AWS with fake credentials; nothing leaves the machine. Requests are answered one at a
    time (`serial_moto`)."""
    from moto import mock_aws

    serial_moto(monkeypatch)

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    with mock_aws():
        yield


@pytest.fixture
def moto_table(aws_env: None) -> DynamoTable:
    """A real DynamoDB table shape on moto, created from the one schema definition."""
    import boto3

    settings = make_settings()
    client = boto3.client("dynamodb", region_name="us-east-1")
    ensure_resources(settings, client, boto3.client("s3", region_name="us-east-1"))
    return DynamoTable(settings.table_name, lambda: client)


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[SqliteDatabase]:
    """A fresh embedded database file, closed after the test."""
    db = SqliteDatabase(tmp_path / "store" / "agent-core.sqlite3")
    yield db
    db.close()


@pytest.fixture
def sqlite_table(sqlite_db: SqliteDatabase) -> SqliteTable:
    """The embedded store's table on a fresh database file."""
    return SqliteTable(sqlite_db)


@pytest.fixture(params=["memory", "moto", "sqlite"])
def any_table(request: pytest.FixtureRequest) -> Table:
    """Each test using this runs on the in-memory table, on moto and on SQLite: one behaviour for all."""
    if request.param == "memory":
        return MemoryTable()
    table: Table = request.getfixturevalue("moto_table" if request.param == "moto" else "sqlite_table")
    return table


@pytest.fixture
def audit_lines() -> list[dict[str, Any]]:
    return []


@pytest.fixture
def ctx(audit_lines: list[dict[str, Any]]) -> AppContext:
    """An app context on the in-memory table with the offline model."""
    return build_context(make_settings(AGENT_STORAGE="memory"), table=MemoryTable(), audit=audit_lines.append)


def s3_blob_store(settings: Settings) -> Any:
    """An S3BlobStore on moto (inside `aws_env`), its bucket created."""
    from agent_core.store.s3 import S3BlobStore, make_s3_client

    client = make_s3_client(settings)
    client.create_bucket(Bucket=settings.data_bucket)
    return S3BlobStore(settings.data_bucket, lambda: client)


@pytest.fixture(params=["memory", "s3", "files"])
def any_blobs(request: pytest.FixtureRequest) -> Any:
    """Each test using this runs on the in-memory blob store, on S3 over moto and on the embedded file
    store: one behaviour for all."""
    from agent_core.store.file_blob import FileBlobStore
    from agent_core.store.memory_blob import MemoryBlobStore

    if request.param == "memory":
        return MemoryBlobStore()
    if request.param == "files":
        db: SqliteDatabase = request.getfixturevalue("sqlite_db")
        return FileBlobStore(db, db.path.parent / "files")
    request.getfixturevalue("aws_env")
    return s3_blob_store(make_settings())


AI_SDK_CACHE = Path(__file__).resolve().parents[2] / ".build" / "ai-sdk-6"
AI_SDK = "ai@6"  # the major version whose UI message stream (v1, with tool approvals) /api/ui-stream speaks


@pytest.fixture(scope="session")
def ai_modules() -> Path:
    """The `ai` package's node_modules (installed from npm once): its own stream reader and transport."""
    import shutil
    import subprocess

    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed to run the AI SDK's own stream reader")
    modules = AI_SDK_CACHE / "node_modules"
    if not (modules / "ai" / "package.json").is_file():
        AI_SDK_CACHE.mkdir(parents=True, exist_ok=True)
        command = ["npm", "install", "--prefix", str(AI_SDK_CACHE), "--no-audit", "--no-fund", "--silent", AI_SDK]
        subprocess.run(command, check=True, capture_output=True, timeout=300)
    return modules
