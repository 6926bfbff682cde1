"""Deleting a conversation on moto: complete (items, run partitions, data files, snapshots) and retryable after
a storage fault at any step (S3 first, then items, META last)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import boto3
import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.context import AppContext, build_context
from agent_core.store.dynamodb import DynamoTable
from agent_core.store.s3 import S3BlobStore
from agent_core.store.spill import chat_spill_prefixes
from tests.support.aws_faults import failing_call
from tests.support.fixtures import make_settings, s3_blob_store

USER = {"X-User-Id": "alice"}
TURNS = 12  # enough items for several BatchWriteItem requests of 25


@pytest.fixture
def blobs() -> S3BlobStore:
    return s3_blob_store(make_settings())


@pytest.fixture
def table(moto_table: DynamoTable) -> DynamoTable:
    return moto_table


@pytest.fixture
def context(table: DynamoTable, blobs: S3BlobStore) -> AppContext:
    return build_context(make_settings(), table=table, blobs=blobs, audit=lambda line: None)


@pytest.fixture
async def client(context: AppContext) -> AsyncIterator[httpx.AsyncClient]:
    # A 500 is an answer here, not a test error (Starlette re-raises after sending it)
    transport = httpx.ASGITransport(app=build_app(*routes.local, context=context), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://local", headers=USER) as c:
        yield c


def _items(table: DynamoTable) -> list[dict[str, Any]]:
    """Every item of the table (a test may Scan)."""
    items: list[dict[str, Any]] = []
    for page in (
        boto3.client("dynamodb", region_name="us-east-1").get_paginator("scan").paginate(TableName=table.table_name)
    ):
        items += page["Items"]
    return items


def _objects(blobs: S3BlobStore) -> list[str]:
    listed = blobs.client.list_objects_v2(Bucket=blobs.bucket)
    return [o["Key"] for o in listed.get("Contents", [])]


async def _busy_chat(
    context: AppContext, client: httpx.AsyncClient, table: DynamoTable, blobs: S3BlobStore
) -> tuple[str, list[str]]:
    """A chat with turns, a data file and spilled replay snapshots; returns (chat id, run ids)."""
    cid = (await client.post("/api/v1/conversations", json={})).json()["conversationId"]
    runs: list[str] = []
    for turn in range(TURNS):
        message = "save it as notes.txt: hello" if turn == 0 else f"message {turn}"
        answered = await client.post(f"/api/v1/conversations/{cid}/chat", json={"message": message})
        assert answered.status_code == 200, answered.text
        # The jobs the turn queued (its usage ledger write, compaction) are done before the next call: their
        # storage calls are not the deletion's, and in-process moto is not thread-safe (a TransactWriteItems
        # deep-copies the table while another thread writes: RuntimeError, a 500 on the next turn).
        await context.background.join()
    for item in _items(table):
        if item["pk"]["S"] == f"CHAT#{cid}" and item["sk"]["S"].startswith("RUN#"):
            runs.append(item["sk"]["S"].removeprefix("RUN#"))
    for run_id in runs:  # as earlier versions spilled a long answer's snapshot
        await blobs.put(f"{chat_spill_prefixes(cid)[1]}{run_id}.json", b"[]", "application/json")
    return cid, runs


def _owned(table: DynamoTable, blobs: S3BlobStore, cid: str, runs: list[str]) -> tuple[list[str], list[str]]:
    """The chat's remaining items (its partition and its runs' partitions) and objects."""
    partitions = {f"CHAT#{cid}", *(f"RUN#{r}" for r in runs)}
    items = [f"{i['pk']['S']}|{i['sk']['S']}" for i in _items(table) if i["pk"]["S"] in partitions]
    objects = [k for k in _objects(blobs) if cid in k]
    return items, objects


async def test_deletion_removes_everything_the_chat_owns(
    context: AppContext, client: httpx.AsyncClient, table: DynamoTable, blobs: S3BlobStore
) -> None:
    # Given a chat with messages, runs (each with its own partition), a data file and spilled snapshots
    cid, runs = await _busy_chat(context, client, table, blobs)
    other, _ = await _busy_chat(context, client, table, blobs)
    items, objects = _owned(table, blobs, cid, runs)
    assert len(runs) == TURNS and len(items) > 50
    assert any(k.startswith("data/") for k in objects) and sum(k.startswith("snapshots/") for k in objects) == TURNS
    assert any(i.startswith("RUN#") for i in items)
    # When it is deleted
    deleted = await client.delete(f"/api/v1/conversations/{cid}")
    # Then nothing it owned is left, and the other chat is untouched
    assert deleted.status_code == 204
    assert _owned(table, blobs, cid, runs) == ([], [])
    assert (await client.get(f"/api/v1/conversations/{other}")).status_code == 200
    assert [c["conversationId"] for c in (await client.get("/api/v1/conversations")).json()["items"]] == [other]


@pytest.mark.parametrize(
    ("service", "operation", "failing"),
    [
        ("s3", "DeleteObjects", (1,)),  # the data files
        ("s3", "DeleteObjects", (2,)),  # the snapshots, after the data files went
        ("s3", "ListObjectsV2", (2,)),
        ("dynamodb", "BatchWriteItem", (1,)),  # the run partitions
        ("dynamodb", "BatchWriteItem", (2,)),  # the first 25 of the chat's items
        ("dynamodb", "BatchWriteItem", (3,)),  # the second 25
        ("dynamodb", "DeleteItem", (1,)),  # the META, everything else gone
    ],
)
async def test_a_retry_after_a_storage_fault_finishes_the_deletion(
    context: AppContext,
    client: httpx.AsyncClient,
    table: DynamoTable,
    blobs: S3BlobStore,
    service: str,
    operation: str,
    failing: tuple[int, ...],
) -> None:
    cid, runs = await _busy_chat(context, client, table, blobs)
    boto = blobs.client if service == "s3" else table.client
    # When a storage call fails part-way through the deletion
    with failing_call(boto, service, operation, *failing) as fault:
        first = await client.delete(f"/api/v1/conversations/{cid}")
    assert fault.raised == list(failing)
    # Then the client sees an error, and the chat is still there to delete again
    assert first.status_code == 503 and first.json()["error"]["code"] == "service_unavailable"
    assert (await client.get(f"/api/v1/conversations/{cid}")).status_code == 200
    # And the retry deletes everything that was left
    retried = await client.delete(f"/api/v1/conversations/{cid}")
    assert retried.status_code == 204
    assert _owned(table, blobs, cid, runs) == ([], [])
    assert (await client.get(f"/api/v1/conversations/{cid}")).status_code == 404
    assert (await client.delete(f"/api/v1/conversations/{cid}")).status_code == 404


async def test_openai_conversation_deletion_is_complete_too(
    context: AppContext, client: httpx.AsyncClient, table: DynamoTable, blobs: S3BlobStore
) -> None:
    cid, runs = await _busy_chat(context, client, table, blobs)
    deleted = await client.delete(f"/v1/conversations/{cid}")
    assert deleted.json() == {"id": cid, "object": "conversation.deleted", "deleted": True}
    assert _owned(table, blobs, cid, runs) == ([], [])
