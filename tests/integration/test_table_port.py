"""The Table port itself, on every adapter (in-memory, moto DynamoDB, SQLite): conditions, updates,
transactions, and queries with key conditions, ordering, limits and start keys."""

from __future__ import annotations

import pytest

from agent_core.store.schema import GSI1, GSI2, PK, SK
from agent_core.store.table import (
    Condition,
    ConditionFailed,
    Delete,
    Item,
    Put,
    SkRange,
    Table,
    TransactionFailed,
    Update,
    UpdateOp,
    eq,
    exists,
    gt,
    lt,
    not_exists,
)


def key(pk: str, sk: str) -> dict[str, str]:
    return {PK: pk, SK: sk}


async def all_pages(table: Table, pk: str, limit: int, **kwargs: object) -> list[list[str]]:
    """The sort keys of every page of a query read `limit` at a time."""
    pages: list[list[str]] = []
    start: Item | None = None
    while True:
        page = await table.query(pk, limit=limit, start_key=start, **kwargs)  # type: ignore[arg-type]
        pages.append([i[SK] for i in page.items])
        if page.last_key is None:
            return pages
        start = page.last_key


async def test_put_get_and_conditional_put(any_table: Table) -> None:
    await any_table.put({**key("P", "a"), "n": 1, "s": "x", "flag": True})
    assert await any_table.get(key("P", "a")) == {**key("P", "a"), "n": 1, "s": "x", "flag": True}
    assert await any_table.get(key("P", "missing")) is None
    with pytest.raises(ConditionFailed):
        await any_table.put({**key("P", "a"), "n": 2}, Condition.of(not_exists(PK)))
    assert (await any_table.get(key("P", "a")) or {})["n"] == 1
    await any_table.put({**key("P", "a"), "n": 3}, Condition.of(eq("n", 1)))
    assert (await any_table.get(key("P", "a")) or {})["n"] == 3


async def test_update_sets_adds_removes_and_returns_the_new_item(any_table: Table) -> None:
    created = await any_table.update(key("P", "u"), Update(set={"a": "1"}, add={"count": 2}))
    assert created == {**key("P", "u"), "a": "1", "count": 2}
    changed = await any_table.update(
        key("P", "u"), Update(set={"b": "2"}, add={"count": 3}, remove=("a",)), Condition.of(exists(PK))
    )
    assert changed == {**key("P", "u"), "b": "2", "count": 5}
    with pytest.raises(ConditionFailed):
        await any_table.update(key("P", "none"), Update(set={"x": "1"}), Condition.of(exists(PK)))
    assert await any_table.get(key("P", "none")) is None


async def test_condition_clauses_are_a_conjunction_of_disjunctions(any_table: Table) -> None:
    await any_table.put({**key("P", "c"), "lease": 10})
    free = Condition.of(exists(PK)).any_of(not_exists("owner"), lt("lease", 5))
    await any_table.update(key("P", "c"), Update(set={"owner": "r1"}), free)  # no owner yet: holds
    with pytest.raises(ConditionFailed):  # owner set and lease not below 5
        await any_table.update(key("P", "c"), Update(set={"owner": "r2"}), free)
    await any_table.update(key("P", "c"), Update(set={"owner": "r3"}), Condition.of(gt("lease", 9)))
    assert (await any_table.get(key("P", "c")) or {})["owner"] == "r3"


async def test_delete_with_a_condition(any_table: Table) -> None:
    await any_table.put({**key("P", "d"), "v": "1"})
    with pytest.raises(ConditionFailed):
        await any_table.delete(key("P", "d"), Condition.of(eq("v", "2")))
    await any_table.delete(key("P", "d"), Condition.of(eq("v", "1")))
    assert await any_table.get(key("P", "d")) is None


async def test_transaction_is_all_or_nothing_with_one_reason_per_op(any_table: Table) -> None:
    await any_table.put({**key("T", "held"), "owner": "someone"})
    await any_table.put({**key("T", "gone"), "v": "1"})
    ops = [
        Put({**key("T", "new"), "v": "1"}, Condition.of(not_exists(PK))),
        UpdateOp(key("T", "held"), Update(set={"owner": "me"}), Condition.of(not_exists("owner"))),
        Delete(key("T", "gone")),
    ]
    with pytest.raises(TransactionFailed) as failed:
        await any_table.transact(ops)
    assert failed.value.reasons == [None, "ConditionalCheckFailed", None]
    assert await any_table.get(key("T", "new")) is None
    assert (await any_table.get(key("T", "held")) or {})["owner"] == "someone"
    assert await any_table.get(key("T", "gone")) is not None
    ops[1] = UpdateOp(key("T", "held"), Update(set={"owner": "me"}, add={"n": 1}), Condition.of(eq("owner", "someone")))
    await any_table.transact(ops)
    assert await any_table.get(key("T", "new")) == {**key("T", "new"), "v": "1"}
    assert await any_table.get(key("T", "held")) == {**key("T", "held"), "owner": "me", "n": 1}
    assert await any_table.get(key("T", "gone")) is None


async def test_a_transaction_creating_an_item_that_exists_writes_nothing_and_names_that_op(any_table: Table) -> None:
    """A create-only put (`not_exists`) on an existing item, between ops whose conditions hold: nothing of the
    transaction is written, not even the ops before it, and the reasons name that op alone."""
    await any_table.put({**key("C", "taken"), "v": "old"})
    await any_table.put({**key("C", "counter"), "n": 1})
    ops = [
        Put({**key("C", "fresh"), "v": "1"}, Condition.of(not_exists(PK))),
        Put({**key("C", "taken"), "v": "new"}, Condition.of(not_exists(PK))),
        UpdateOp(key("C", "counter"), Update(add={"n": 1}), Condition.of(exists(PK))),
        Put({**key("C", "plain"), "v": "1"}),
    ]
    with pytest.raises(TransactionFailed) as failed:
        await any_table.transact(ops)
    assert failed.value.reasons == [None, "ConditionalCheckFailed", None, None]
    assert await any_table.get(key("C", "fresh")) is None
    assert await any_table.get(key("C", "plain")) is None
    assert await any_table.get(key("C", "taken")) == {**key("C", "taken"), "v": "old"}
    assert await any_table.get(key("C", "counter")) == {**key("C", "counter"), "n": 1}
    with pytest.raises(ConditionFailed):
        await any_table.put({**key("C", "taken"), "v": "new"}, Condition.of(not_exists(SK)))
    assert await any_table.get(key("C", "taken")) == {**key("C", "taken"), "v": "old"}


async def test_batch_get_and_batch_delete(any_table: Table) -> None:
    for sk in ("a", "b", "c"):
        await any_table.put({**key("B", sk), "v": sk})
    found = await any_table.batch_get([key("B", "a"), key("B", "missing"), key("B", "c")])
    assert sorted(i["v"] for i in found) == ["a", "c"]
    assert await any_table.batch_get([]) == []
    await any_table.batch_delete([key("B", "a"), key("B", "b"), key("B", "missing")])
    assert [i[SK] for i in (await any_table.query("B")).items] == ["c"]


async def test_query_reads_one_partition_in_order_with_key_conditions(any_table: Table) -> None:
    for sk in ("MSG#3", "MSG#1", "RUN#1", "META", "MSG#2", "MSG#10"):
        await any_table.put({**key("Q", sk), "x": "1"})
    await any_table.put({**key("Q2", "MSG#0"), "x": "1"})
    assert [i[SK] for i in (await any_table.query("Q")).items] == ["META", "MSG#1", "MSG#10", "MSG#2", "MSG#3", "RUN#1"]
    prefix = await any_table.query("Q", SkRange(begins_with="MSG#"), forward=False)
    assert [i[SK] for i in prefix.items] == ["MSG#3", "MSG#2", "MSG#10", "MSG#1"]
    between = await any_table.query("Q", SkRange(low="MSG#10", high="MSG#3"))
    assert [i[SK] for i in between.items] == ["MSG#10", "MSG#2", "MSG#3"]
    assert (await any_table.query("nothing")).items == []


async def test_query_pages_forward_and_backward_with_start_keys(any_table: Table) -> None:
    for n in range(7):
        await any_table.put({**key("G", f"MSG#{n}"), "n": n})
    forward = await all_pages(any_table, "G", 3, sk=SkRange(begins_with="MSG#"))
    assert [sk for page in forward for sk in page] == [f"MSG#{n}" for n in range(7)]
    assert [len(p) for p in forward][:2] == [3, 3]
    backward = await all_pages(any_table, "G", 2, forward=False)
    assert [sk for page in backward for sk in page] == [f"MSG#{n}" for n in reversed(range(7))]
    # A page that ends exactly at the last item may or may not say "more" (DynamoDB does); never a duplicate.
    exact = await all_pages(any_table, "G", 7)
    assert [sk for page in exact for sk in page] == [f"MSG#{n}" for n in range(7)]


async def test_gsi_query_is_sparse_ordered_and_pages_through_ties(any_table: Table) -> None:
    # Three chats share one activity sort key: ties are ordered by the base key, and paging never skips one.
    for n, activity in enumerate(["002", "001", "002", "003", "002"]):
        await any_table.put({**key(f"CHAT#{n}", "META"), GSI1.pk: "USER#u", GSI1.sk: activity, "n": n})
    await any_table.put({**key("CHAT#x", "META"), GSI1.pk: "USER#other", GSI1.sk: "001"})
    await any_table.put({**key("CHAT#y", "META"), GSI1.pk: "USER#u"})  # no sort key: not in the index
    await any_table.put({**key("CHAT#z", "META"), GSI2.pk: "IDLE#0", GSI2.sk: "5"})
    newest = await all_pages(any_table, "USER#u", 2, index=GSI1.name, forward=False)
    flat = [sk for page in newest for sk in page]
    assert len(flat) == 5
    page = await any_table.query("USER#u", index=GSI1.name, forward=False)
    assert [i["n"] for i in page.items] == [3, 4, 2, 0, 1]
    oldest = await any_table.query("USER#u", SkRange(high="002"), index=GSI1.name, limit=2)
    assert [i["n"] for i in oldest.items] == [1, 0]
    assert oldest.last_key is not None and oldest.last_key[GSI1.pk] == "USER#u"
    rest = await any_table.query("USER#u", SkRange(high="002"), index=GSI1.name, limit=2, start_key=oldest.last_key)
    assert [i["n"] for i in rest.items] == [2, 4]
    # An item that loses its index key leaves the index.
    await any_table.update(key("CHAT#3", "META"), Update(remove=(GSI1.sk,)))
    assert [i["n"] for i in (await any_table.query("USER#u", index=GSI1.name)).items] == [1, 0, 2, 4]


async def test_returned_items_are_copies(any_table: Table) -> None:
    await any_table.put({**key("C", "a"), "v": "1"})
    item = await any_table.get(key("C", "a"))
    assert item is not None
    item["v"] = "changed"
    page = await any_table.query("C")
    page.items[0]["v"] = "changed too"
    assert (await any_table.get(key("C", "a")) or {})["v"] == "1"
