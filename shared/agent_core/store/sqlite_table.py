"""SQLite table: the Table port on a local database file (the embedded store of `agent-core serve`).

Semantics are the in-memory table's (and DynamoDB's): conditions are checked inside the same write
transaction as the write; a transaction is all or nothing and reports one cancellation reason per op;
queries read one partition (or one GSI key) in sort-key order, with limits and exclusive start keys.
Items are stored as JSON; attributes whose value is None are not stored (as the DynamoDB adapter drops them).
Every operation runs through `SqliteDatabase.run` (on the caller's thread unless it would wait), and a read
of one statement (a get, a query) is that statement alone (no BEGIN / COMMIT around it). A put that may only
create its item (`not_exists` on a key) is a plain INSERT, the primary key checking the condition, with no
read before it; a transaction that writes each item once (as DynamoDB requires) does the same.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Callable
from typing import Any, TypeVar

from agent_core.store import item_json
from agent_core.store.item_size import ITEM_LIMIT_BYTES, item_size
from agent_core.store.schema import INDEXES, PK, SK, TTL_ATTRIBUTE, key_attributes
from agent_core.store.sqlite_db import SqliteDatabase, prefix_end
from agent_core.store.table import (
    Condition,
    ConditionFailed,
    Delete,
    Item,
    Key,
    Put,
    QueryPage,
    SkRange,
    TransactionFailed,
    Update,
    UpdateOp,
    WriteOp,
)

T = TypeVar("T")


class ItemTooLarge(ValueError):
    """An item over DynamoDB's item size limit (DynamoDB answers ValidationException)."""


# `item_size(item) <= 2 * J + 1` for an item whose compact JSON takes J bytes in UTF-8 (by induction: a
# string's JSON has its bytes plus quotes, a number's at most one byte less than DynamoDB counts, true /
# false / null at least the one byte, and a list or map element's separator, quotes and colon at least
# pay for DynamoDB's byte per element and 3 per container). A UTF-8 character takes at most 4 bytes, so
# JSON of at most this many characters cannot be over the limit and needs no exact count.
_SURELY_SMALL_JSON_CHARS = (ITEM_LIMIT_BYTES - 1) // 8


def _checked_size(item: Item, data: str | None = None) -> Item:
    """DynamoDB refuses an item over 400 KB (names and values together, as `item_size` counts them); so does
    this table, so that what fails in production fails locally too. `data`, the item's compact JSON when the
    caller has it, lets a small item skip the exact count."""
    if data is not None and len(data) <= _SURELY_SMALL_JSON_CHARS:
        return item
    size = item_size(item)
    if size > ITEM_LIMIT_BYTES:
        raise ItemTooLarge(f"item {item.get(PK)!r}/{item.get(SK)!r} is {size} bytes, over the {ITEM_LIMIT_BYTES} limit")
    return item


_INDEXED = (*(c for i in INDEXES for c in (i.pk, i.sk)), "ttl")
_COLUMNS = ["pk", "sk", "data", *_INDEXED]
_INSERT = f"INSERT INTO items ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)})"
_UPSERT = _INSERT.replace("INSERT", "INSERT OR REPLACE", 1)
_SELECT = "SELECT data FROM items WHERE pk = ? AND sk = ?"
_UPDATE_DATA = "UPDATE items SET data = ? WHERE pk = ? AND sk = ?"
_DELETE = "DELETE FROM items WHERE pk = ? AND sk = ?"
_BATCH_GET_KEYS = 100  # DynamoDB's BatchGetItem limit; well under SQLite's 500 terms of a compound SELECT


@functools.cache
def _batch_select(keys: int) -> str:
    return " UNION ALL ".join([_SELECT] * keys)


@functools.cache
def _query_sql(
    index: str | None, bounds: tuple[bool, bool, bool, bool], forward: bool, start: bool, limit: bool
) -> str:
    """A query's SELECT, by its shape: the index read, which of the sort key's bounds (begins_with, its end, low,
    high) it has, its direction, whether it resumes after a start key and has a limit (the values are its
    arguments, in that order)."""
    pk_attr, sk_attr = key_attributes(index)
    where = [f"{pk_attr} = ?", f"{sk_attr} IS NOT NULL"]
    where += [f"{sk_attr} {op} ?" for op, given in zip((">=", "<", ">=", "<="), bounds, strict=True) if given]
    # Ties on a GSI sort key are ordered by the base key, so a start key resumes exactly after its item.
    order = [sk_attr, "pk", "sk"] if index is not None else ["sk"]
    if start:
        after = ">" if forward else "<"
        where.append(f"({sk_attr}, pk, sk) {after} (?, ?, ?)" if index is not None else f"sk {after} ?")
    direction = "ASC" if forward else "DESC"
    sql = f"SELECT data FROM items WHERE {' AND '.join(where)} ORDER BY {', '.join(f'{c} {direction}' for c in order)}"
    return sql + " LIMIT ?" if limit else sql


_INDEX_KEYS = tuple((index.pk, index.sk) for index in INDEXES)


def _index_values(item: Item) -> tuple[Any, ...]:
    """The indexed columns' values of an item (`_INDEXED`, in order): its GSI keys (only when both are strings),
    its TTL."""
    values: list[Any] = []
    get = item.get
    for pk_attr, sk_attr in _INDEX_KEYS:
        pk, sk = get(pk_attr), get(sk_attr)
        values += (pk, sk) if isinstance(pk, str) and isinstance(sk, str) else (None, None)
    ttl = get(TTL_ATTRIBUTE)
    values.append(ttl if isinstance(ttl, int) and not isinstance(ttl, bool) else None)
    return tuple(values)


def _row(item: Item) -> tuple[Any, ...]:
    """The column values of an item (`_COLUMNS`): its keys, its JSON, its indexed columns."""
    data = item_json.encode(item)
    _checked_size(item, data)
    return (item[PK], item[SK], data, *_index_values(item))


@functools.cache
def _update_sql(columns: tuple[str, ...]) -> str:
    return f"UPDATE items SET data = ?{''.join(f', {c} = ?' for c in columns)} WHERE pk = ? AND sk = ?"


def _rewrite(item: Item, before: Item) -> tuple[str, tuple[Any, ...]]:
    """The statement that turns the stored `before` into `item` (same key): an UPDATE of its JSON and of only the
    indexed columns whose values change. SQLite then leaves every other index alone, where INSERT OR REPLACE
    deletes the row and inserts it again in the table and in every index holding it: each index b-tree page
    touched is one more page the commit writes to the WAL."""
    row = _row(item)
    new, old = row[3:], _index_values(before)
    if new == old:
        return _UPDATE_DATA, (row[2], row[0], row[1])
    changed = tuple(n for n in range(len(old)) if new[n] != old[n])
    return _update_sql(tuple(_INDEXED[n] for n in changed)), (row[2], *(new[n] for n in changed), row[0], row[1])


def _stored(item: Item) -> Item:
    """The item without its None attributes (as the DynamoDB adapter drops them); the item itself when it has none."""
    if None not in item.values():
        return item
    return {k: v for k, v in item.items() if v is not None}


def _key_of(op: WriteOp) -> tuple[str, str]:
    return (op.item[PK], op.item[SK]) if isinstance(op, Put) else (op.key[PK], op.key[SK])


def _only_if_absent(condition: Condition | None) -> bool:
    """Whether `condition` holds exactly when the item does not exist (`not_exists` on a key attribute, which
    every stored item has): then a plain INSERT checks it, the primary key refusing an existing item."""
    if condition is None or len(condition.clauses) != 1 or len(condition.clauses[0]) != 1:
        return False
    atom = condition.clauses[0][0]
    return atom.op == "not_exists" and atom.attr in (PK, SK)


def _write(connection: sqlite3.Connection, item: Item, before: Item | None) -> None:
    """Store `item` over `before`, the item its key holds, read in this transaction (None: none, or not read)."""
    if before is None:
        connection.execute(_UPSERT, _row(item))
    else:
        connection.execute(*_rewrite(item, before))


class _Recheck(Exception):
    """A condition failed (or an INSERT met an existing item) in the fast path: the transaction, rolled back,
    runs again on the checked path, which reports one reason per op."""


class SqliteTable:
    """The Table port on one SQLite database (see `SqliteDatabase` for the concurrency model)."""

    def __init__(self, db: SqliteDatabase) -> None:
        self.db = db

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.db.run(fn, *args)

    # ---------------------------------------------------------------- reads

    @staticmethod
    def _fetch(connection: sqlite3.Connection, key: tuple[str, str]) -> Item | None:
        row = connection.execute(_SELECT, key).fetchone()
        return item_json.decode(row[0]) if row else None

    def _get(self, key: Key) -> Item | None:
        rows = self.db.select(_SELECT, (key[PK], key[SK]))
        return item_json.decode(rows[0][0]) if rows else None

    async def get(self, key: Key) -> Item | None:
        return await self._run(self._get, key)

    def _batch_get(self, keys: list[Key]) -> list[Item]:
        # One statement of one lookup per key (UNION ALL), so one snapshot without BEGIN / COMMIT: cheaper than
        # a read transaction of a statement per key, than a statement per key on its own (each takes and
        # releases the WAL read lock), and than one join on a VALUES list (measured).
        found: list[Item] = []
        for start in range(0, len(keys), _BATCH_GET_KEYS):
            chunk = keys[start : start + _BATCH_GET_KEYS]
            args = [part for k in chunk for part in (k[PK], k[SK])]
            found += item_json.decode_all([row[0] for row in self.db.select(_batch_select(len(chunk)), args)])
        return found

    async def batch_get(self, keys: list[Key]) -> list[Item]:
        return await self._run(self._batch_get, keys) if keys else []

    def _query(
        self,
        pk: str,
        sk: SkRange | None,
        index: str | None,
        forward: bool,
        limit: int | None,
        start_key: Item | None,
    ) -> QueryPage:
        pk_attr, sk_attr = key_attributes(index)
        args: list[Any] = [pk]
        begins = end = low = high = None
        if sk is not None:
            begins, low, high = sk.begins_with, sk.low, sk.high
            end = prefix_end(begins) if begins is not None else None
        args.extend(bound for bound in (begins, end, low, high) if bound is not None)
        if start_key is not None:
            if index is not None:
                args.extend((start_key[sk_attr], start_key[PK], start_key[SK]))
            else:
                args.append(start_key[SK])
        if limit is not None:
            args.append(limit + 1)  # one more tells whether a next page exists
        bounds = (begins is not None, end is not None, low is not None, high is not None)
        sql = _query_sql(index, bounds, forward, start_key is not None, limit is not None)
        rows = item_json.decode_all([r[0] for r in self.db.select(sql, args)])
        last_key: Item | None = None
        if limit is not None and len(rows) > limit:
            rows = rows[:limit]
            tail = rows[-1]
            last_key = {PK: tail[PK], SK: tail[SK], sk_attr: tail[sk_attr], pk_attr: tail[pk_attr]}
        return QueryPage(items=rows, last_key=last_key)

    async def query(
        self,
        pk: str,
        sk: SkRange | None = None,
        *,
        index: str | None = None,
        forward: bool = True,
        limit: int | None = None,
        start_key: Item | None = None,
    ) -> QueryPage:
        return await self._run(self._query, pk, sk, index, forward, limit, start_key)

    # ---------------------------------------------------------------- writes

    def _checked(
        self, connection: sqlite3.Connection, key: tuple[str, str], condition: Condition | None
    ) -> Item | None:
        """The current item, after checking the condition on it (inside the caller's write transaction)."""
        current = self._fetch(connection, key)
        if condition is not None and not condition.holds(current):
            raise ConditionFailed(str(key))
        return current

    def _put(self, item: Item, condition: Condition | None) -> None:
        with self.db.write() as connection:
            if _only_if_absent(condition):
                try:
                    connection.execute(_INSERT, _row(_stored(item)))
                except sqlite3.IntegrityError:
                    raise ConditionFailed(str((item[PK], item[SK]))) from None
                return
            current = self._checked(connection, (item[PK], item[SK]), condition) if condition is not None else None
            _write(connection, _stored(item), current)

    async def put(self, item: Item, condition: Condition | None = None) -> None:
        await self._run(self._put, item, condition)

    def _update(self, key: Key, update: Update, condition: Condition | None) -> Item:
        with self.db.write() as connection:
            current = self._checked(connection, (key[PK], key[SK]), condition)
            item = update.apply(current or dict(key))
            _write(connection, item, current)
        return item

    async def update(self, key: Key, update: Update, condition: Condition | None = None) -> Item:
        return await self._run(self._update, key, update, condition)

    def _delete(self, key: Key, condition: Condition | None) -> None:
        with self.db.write() as connection:
            if condition is not None:
                self._checked(connection, (key[PK], key[SK]), condition)
            connection.execute(_DELETE, (key[PK], key[SK]))

    async def delete(self, key: Key, condition: Condition | None = None) -> None:
        await self._run(self._delete, key, condition)

    def _transact(self, ops: list[WriteOp]) -> None:
        keys = [_key_of(op) for op in ops]
        if len(set(keys)) == len(keys):
            try:
                self._transact_inserting(ops, keys)
                return
            except _Recheck:
                pass  # rolled back: nothing was written
        self._transact_checked(ops)

    def _transact_inserting(self, ops: list[WriteOp], keys: list[tuple[str, str]]) -> None:
        """The transaction when it writes each item once, as DynamoDB requires: a put that may only create its
        item is a plain INSERT, whose primary key checks the condition, instead of a SELECT before it; every
        other condition is checked before anything is written. Raises _Recheck (rolled back) when a condition
        fails, so that `_transact_checked` reports the reasons."""
        with self.db.write() as connection:
            current: dict[tuple[str, str], Item | None] = {}
            creates = [isinstance(op, Put) and _only_if_absent(op.condition) for op in ops]
            for op, key, create in zip(ops, keys, creates, strict=True):
                if op.condition is not None and not create:
                    current[key] = self._fetch(connection, key)
                    if not op.condition.holds(current[key]):
                        raise _Recheck
            inserts: list[tuple[Any, ...]] = []
            upserts: list[tuple[Any, ...]] = []
            rewrites: list[tuple[str, tuple[Any, ...]]] = []
            deletes: list[tuple[str, str]] = []
            for op, key, create in zip(ops, keys, creates, strict=True):
                if isinstance(op, Put):
                    item, stored = _stored(op.item), current.get(key)
                    if create:
                        inserts.append(_row(item))
                    elif stored is not None:
                        rewrites.append(_rewrite(item, stored))
                    else:
                        upserts.append(_row(item))
                elif isinstance(op, UpdateOp):
                    before = current[key] if key in current else self._fetch(connection, key)
                    if before is None:
                        upserts.append(_row(op.update.apply(dict(op.key))))
                    else:
                        rewrites.append(_rewrite(op.update.apply(before), before))
                else:
                    deletes.append(key)
            # Each item is written once, so the order of the writes does not matter.
            if inserts:
                try:
                    connection.executemany(_INSERT, inserts)
                except sqlite3.IntegrityError:
                    raise _Recheck from None
            if upserts:
                connection.executemany(_UPSERT, upserts)
            for sql, args in rewrites:
                connection.execute(sql, args)
            if deletes:
                connection.executemany(_DELETE, deletes)

    def _transact_checked(self, ops: list[WriteOp]) -> None:
        with self.db.write() as connection:
            # Every condition is checked against the state before the transaction, as DynamoDB does. An item
            # is read once: for its op's condition, or for its update (DynamoDB allows one op per item).
            current: dict[tuple[str, str], Item | None] = {}
            reasons: list[str | None] = []
            for op in ops:
                holds = True
                if op.condition is not None:
                    key = _key_of(op)
                    current[key] = self._fetch(connection, key)
                    holds = op.condition.holds(current[key])
                reasons.append(None if holds else "ConditionalCheckFailed")
            if any(reasons):
                raise TransactionFailed(reasons)  # rolls back: nothing was written
            for op in ops:
                key = _key_of(op)
                if isinstance(op, Put):
                    _write(connection, _stored(op.item), current.get(key))
                elif isinstance(op, UpdateOp):
                    before = current.pop(key) if key in current else self._fetch(connection, key)
                    _write(connection, op.update.apply(before or dict(op.key)), before)
                elif isinstance(op, Delete):
                    connection.execute(_DELETE, key)
                current.pop(key, None)  # a later op on the same key reads what this one wrote

    async def transact(self, ops: list[WriteOp]) -> None:
        await self._run(self._transact, ops)

    def _batch_delete(self, keys: list[Key]) -> None:
        with self.db.write() as connection:
            connection.executemany(_DELETE, [(k[PK], k[SK]) for k in keys])

    async def batch_delete(self, keys: list[Key]) -> None:
        if keys:
            await self._run(self._batch_delete, keys)

    # ---------------------------------------------------------------- TTL

    def sweep_expired(self, now_s: int | None = None) -> int:
        """Delete items whose TTL attribute (epoch seconds) has passed, as DynamoDB's TTL does; reads already
        treat them as missing. Returns how many were deleted."""
        now = int(time.time()) if now_s is None else now_s
        with self.db.write() as connection:
            cursor = connection.execute("DELETE FROM items WHERE ttl IS NOT NULL AND ttl < ?", (now,))
            return cursor.rowcount
