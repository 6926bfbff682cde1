"""Long turns and long imports overflow one DynamoDB transaction (at most 100 items): TableStore splits them.

moto refuses a TransactWriteItems of 101 items as DynamoDB does (ValidationException); SQLite has no such limit,
so the table is wrapped to record every transaction's size, and each must fit DynamoDB's.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
from botocore.exceptions import ClientError

from agent_core.domain.models import Message, Role, RunStatus
from agent_core.store.dynamodb import DynamoTable
from agent_core.store.table import Put, Table
from agent_core.store.table_store import TableStore
from tests.integration.test_store_contract import ALICE, LEASE_MS, T0, completed, new_chat, new_run, user_message

DYNAMODB_TRANSACTION_ITEMS = 100


class SizedTable:
    """A table that records the number of items of each transaction it is asked to write."""

    def __init__(self, inner: Table) -> None:
        self.inner = inner
        self.sizes: list[int] = []

    async def transact(self, ops: list[Any]) -> None:
        self.sizes.append(len(ops))
        await self.inner.transact(ops)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture(params=["moto", "sqlite"])
def table(request: pytest.FixtureRequest) -> SizedTable:
    inner: Table = request.getfixturevalue("moto_table" if request.param == "moto" else "sqlite_table")
    return SizedTable(inner)


def _replies(chat_id: str, run_id: str, count: int) -> list[Message]:
    return [
        Message(
            id=f"{T0 + 1 + n:013d}-r{n:04d}",
            chat_id=chat_id,
            role=Role.ASSISTANT,
            content=f"part {n}",
            run_id=run_id,
            created_at=T0 + 1 + n,
        )
        for n in range(count)
    ]


# finish_turn writes the messages, the RUN item and the META release: 99, 100 and 101 items in all.
@pytest.mark.parametrize("writes", [99, 100, 101])
async def test_a_long_turn_ends_in_transactions_dynamodb_accepts(table: SizedTable, writes: int) -> None:
    # Given a turn that produced writes - 2 messages
    store = TableStore(cast(Table, table))
    chat = await store.create_chat(new_chat(ALICE))
    run = new_run(chat, started_at=T0)
    await store.begin_turn(chat, run, user_message(chat, run, "tell me a long story"), LEASE_MS)
    replies = _replies(chat.chat_id, run.run_id, writes - 2)
    table.sizes.clear()

    # When it ends
    await store.finish_turn(completed(run, T0 + writes), replies, T0 + writes)

    # Then every transaction fits DynamoDB's limit, and one transaction does whenever the writes fit in one
    assert max(table.sizes) <= DYNAMODB_TRANSACTION_ITEMS
    assert sum(table.sizes) == writes
    assert len(table.sizes) == (1 if writes <= DYNAMODB_TRANSACTION_ITEMS else 2)
    # And everything is stored: the messages in order, the run completed, the lease released
    page = await store.list_messages(chat.chat_id, ALICE, 200, None)
    assert page is not None
    assert [m.content for m in page.items] == ["tell me a long story", *(m.content for m in replies)]
    stored = await store.get_run(chat.chat_id, run.run_id)
    assert stored is not None and stored.status == RunStatus.COMPLETED
    meta = await store.get_chat(chat.chat_id, ALICE)
    assert meta is not None and meta.active_run_id is None and meta.message_count == writes - 1


# add_messages writes the messages and the META count: 99, 100 and 101 items in all.
@pytest.mark.parametrize("writes", [99, 100, 101])
async def test_a_long_import_is_written_in_transactions_dynamodb_accepts(table: SizedTable, writes: int) -> None:
    store = TableStore(cast(Table, table))
    chat = await store.create_chat(new_chat(ALICE))
    imported = _replies(chat.chat_id, "import", writes - 1)
    table.sizes.clear()

    await store.add_messages(chat.chat_id, imported)

    assert max(table.sizes) <= DYNAMODB_TRANSACTION_ITEMS
    assert len(table.sizes) == (1 if writes <= DYNAMODB_TRANSACTION_ITEMS else 2)
    page = await store.list_messages(chat.chat_id, ALICE, 200, None)
    assert page is not None and [m.content for m in page.items] == [m.content for m in imported]
    meta = await store.get_chat(chat.chat_id, ALICE)
    assert meta is not None and meta.message_count == len(imported)


async def test_moto_refuses_a_transaction_over_dynamodbs_limit(moto_table: DynamoTable) -> None:
    """What the tests above rely on: moto, like DynamoDB, refuses 101 items in one transaction."""
    ops = [Put({"pk": f"LIMIT#{n}", "sk": "X"}) for n in range(DYNAMODB_TRANSACTION_ITEMS + 1)]
    with pytest.raises(ClientError, match="less than or equal to 100"):
        await moto_table.transact(cast(Any, ops))
    await moto_table.transact(cast(Any, ops[:DYNAMODB_TRANSACTION_ITEMS]))
