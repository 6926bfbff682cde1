"""A minimal item-table port: the DynamoDB operations the Store needs, with typed conditions.

Both adapters (DynamoDB, in-memory) implement this port, and one `TableStore` holds all the
domain logic on top of it, so the two stores cannot drift apart in behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Item = dict[str, Any]
Key = dict[str, str]


@dataclass(frozen=True)
class Atom:
    """One comparison: attribute exists / not exists / equals / less than a value."""

    op: Literal["exists", "not_exists", "eq", "lt", "gt"]
    attr: str
    value: Any = None


@dataclass(frozen=True)
class Condition:
    """A conjunction of disjunctions: all clauses must hold; a clause holds when any atom does."""

    clauses: tuple[tuple[Atom, ...], ...] = ()

    @staticmethod
    def of(*atoms: Atom) -> Condition:
        return Condition(tuple((a,) for a in atoms))

    def any_of(self, *atoms: Atom) -> Condition:
        return Condition((*self.clauses, tuple(atoms)))

    def holds(self, item: Item | None) -> bool:
        return all(any(_atom_holds(atom, item) for atom in clause) for clause in self.clauses)


def _atom_holds(atom: Atom, item: Item | None) -> bool:
    present = item is not None and atom.attr in item
    if atom.op == "exists":
        return present
    if atom.op == "not_exists":
        return not present
    if not present or item is None:
        return False
    if atom.op == "eq":
        return bool(item[atom.attr] == atom.value)
    if atom.op == "gt":
        return bool(item[atom.attr] > atom.value)
    return bool(item[atom.attr] < atom.value)


def not_exists(attr: str) -> Atom:
    return Atom("not_exists", attr)


def exists(attr: str) -> Atom:
    return Atom("exists", attr)


def eq(attr: str, value: Any) -> Atom:
    return Atom("eq", attr, value)


def lt(attr: str, value: Any) -> Atom:
    return Atom("lt", attr, value)


def gt(attr: str, value: Any) -> Atom:
    return Atom("gt", attr, value)


@dataclass(frozen=True)
class Update:
    """SET these attributes, ADD to these numbers, REMOVE these attributes."""

    set: Item = field(default_factory=dict)
    add: dict[str, int] = field(default_factory=dict)
    remove: tuple[str, ...] = ()

    def apply(self, item: Item) -> Item:
        result = dict(item)
        result.update(self.set)
        for attr, amount in self.add.items():
            result[attr] = int(result.get(attr, 0)) + amount
        for attr in self.remove:
            result.pop(attr, None)
        return result


@dataclass(frozen=True)
class Put:
    item: Item
    condition: Condition | None = None


@dataclass(frozen=True)
class UpdateOp:
    key: Key
    update: Update
    condition: Condition | None = None


@dataclass(frozen=True)
class Delete:
    key: Key
    condition: Condition | None = None


WriteOp = Put | UpdateOp | Delete


@dataclass(frozen=True)
class SkRange:
    """Sort-key condition of a query: begins_with, or a between on [low, high]."""

    begins_with: str | None = None
    low: str | None = None
    high: str | None = None


class TransactionFailed(Exception):
    """A transaction was cancelled; `reasons` has one entry per op: None or "ConditionalCheckFailed"."""

    def __init__(self, reasons: list[str | None]) -> None:
        super().__init__(f"transaction cancelled: {reasons}")
        self.reasons = reasons


class ConditionFailed(Exception):
    """A single conditional write did not hold."""


@dataclass
class QueryPage:
    items: list[Item]
    last_key: Item | None = None


class Table(Protocol):
    """The operations of one DynamoDB table, with strongly consistent reads on the base table."""

    async def get(self, key: Key) -> Item | None: ...

    async def batch_get(self, keys: list[Key]) -> list[Item]: ...

    async def query(
        self,
        pk: str,
        sk: SkRange | None = None,
        *,
        index: str | None = None,
        forward: bool = True,
        limit: int | None = None,
        start_key: Item | None = None,
    ) -> QueryPage: ...

    async def put(self, item: Item, condition: Condition | None = None) -> None: ...

    async def update(self, key: Key, update: Update, condition: Condition | None = None) -> Item: ...

    async def delete(self, key: Key, condition: Condition | None = None) -> None: ...

    async def transact(self, ops: list[WriteOp]) -> None: ...

    async def batch_delete(self, keys: list[Key]) -> None: ...
