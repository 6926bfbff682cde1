"""Parts of items the store keeps in the blob store: callers hand over and get back whole values.

Replay snapshots and Response bodies written by earlier versions as one object of their own (`snapshotKey`,
`bodyKey`) still read back whole, and go with what they belong to.
"""

from __future__ import annotations

import json

from agent_core.domain.models import Chat, Run, RunStatus
from agent_core.store import items as it
from agent_core.store.memory_blob import MemoryBlobStore
from agent_core.store.memory_table import MemoryTable
from agent_core.store.schema import PK, SK
from agent_core.store.spill import SPILLED, Spiller, item_spill_prefix
from agent_core.store.table_store import TableStore

SNAPSHOT = [{"type": "request.query", "seq": 1}, {"type": "content.snapshot", "seq": 2, "text": "长" * 100_000}]


async def _store_with_legacy_run() -> tuple[TableStore, MemoryBlobStore]:
    table, blobs = MemoryTable(), MemoryBlobStore()
    store = TableStore(table, blobs)
    await store.create_chat(Chat(chat_id="c1", user_id="u1", created_at=1, last_activity_at=1))
    run = Run(run_id="r1", chat_id="c1", user_id="u1", request_id="q1", status=RunStatus.COMPLETED, started_at=2)
    # As earlier versions ended a run whose snapshot was large: the snapshot in its own object, named by the item
    await table.put({**it.run_to_item(run), "snapshotKey": "snapshots/c1/r1.json"})
    await blobs.put("snapshots/c1/r1.json", json.dumps(SNAPSHOT, ensure_ascii=False).encode(), "application/json")
    return store, blobs


async def test_a_snapshot_an_earlier_version_kept_in_its_own_object_reads_back_whole() -> None:
    store, _ = await _store_with_legacy_run()
    found = await store.get_run("c1", "r1")
    assert found is not None and found.snapshot == SNAPSHOT
    runs, _ = await store.list_runs("c1", 10, None)
    assert [r.snapshot for r in runs] == [SNAPSHOT]


async def test_deleting_the_chat_deletes_the_snapshots_earlier_versions_kept() -> None:
    store, blobs = await _store_with_legacy_run()
    assert await store.delete_chat("c1", "u1")
    assert blobs.objects == {}


async def test_a_run_written_now_keeps_a_large_snapshot_whole() -> None:
    table, blobs = MemoryTable(), MemoryBlobStore()
    store = TableStore(table, blobs)
    chat = await store.create_chat(Chat(chat_id="c1", user_id="u1", created_at=1, last_activity_at=1))
    run = Run(run_id="r1", chat_id="c1", user_id="u1", request_id="q1", started_at=2)
    await store.begin_turn(
        chat,
        run,
        it.message_from_item(
            {PK: "CHAT#c1", SK: "MSG#m1", "id": "m1", "role": "USER", "content": "hi", "createdAt": 2}
        ),
        60_000,
    )
    run.status, run.ended_at, run.snapshot = RunStatus.COMPLETED, 3, SNAPSHOT
    await store.finish_turn(run, [], 3)
    # The item holds no copy of it: the part went to the blob store, and the run reads back whole
    stored = await table.get(it.run_key("c1", "r1"))
    assert stored is not None and stored[SPILLED] == ["snapshot"] and "snapshot" not in stored
    assert list(blobs.objects) == [f"{item_spill_prefix('CHAT#c1', 'RUN#r1')}snapshot"]
    found = await store.get_run("c1", "r1")
    assert found is not None and found.snapshot == SNAPSHOT


async def test_a_response_body_an_earlier_version_kept_in_its_own_object_reads_back_and_is_forgotten() -> None:
    blobs = MemoryBlobStore()
    spiller = Spiller(blobs)
    body = {"input": '[{"role":"user"}]', "output": '[{"type":"message"}]', "usage": "null", "response": "{}"}
    await blobs.put("responses/resp_1.json", json.dumps(body).encode(), "application/json")
    item = {PK: "RESP#resp_1", SK: "META", "status": "completed", "bodyKey": "responses/resp_1.json"}
    # Read back: the body's attributes in place of the reference
    restored = (await spiller.restore([dict(item)]))[0]
    assert restored == {PK: "RESP#resp_1", SK: "META", "status": "completed", **body}
    # Forgotten with the item: the old object and any part spilled under the item's own key
    await blobs.put(f"{item_spill_prefix('RESP#resp_1', 'META')}output", b"[]", "text/plain")
    await blobs.put("responses/resp_10.json", b"{}", "application/json")  # another response's: it stays
    await spiller.forget(item)
    assert list(blobs.objects) == ["responses/resp_10.json"]
