"""DynamoDB table adapter: boto3 in a worker thread; honours AWS_ENDPOINT_URL(_DYNAMODB) by itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from agent_core.backoff import Backoff, Sleep, retrying
from agent_core.errors import ServiceUnavailable
from agent_core.store.aws_client import ThreadedAwsClient
from agent_core.store.schema import PK, SK, key_attributes
from agent_core.store.table import (
    Atom,
    Condition,
    ConditionFailed,
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

CONDITION_FAILED = "ConditionalCheckFailed"
# Cancellation reasons of a transaction that say "try again later", not "your conditions failed".
TRANSIENT_REASONS = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded", "TransactionConflict"})

_ser = TypeSerializer()
_de = TypeDeserializer()


def _to_ddb(item: Item) -> dict[str, Any]:
    return {k: _ser.serialize(v) for k, v in item.items() if v is not None}


def _from_ddb(item: dict[str, Any]) -> Item:
    out: Item = {}
    for k, v in item.items():
        value = _de.deserialize(v)
        # Numbers come back as Decimal; the store only writes integers.
        out[k] = int(value) if isinstance(value, Decimal) else value
    return out


class _Expr:
    """Accumulates placeholder names and values for one request's expressions."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def name(self, attr: str) -> str:
        placeholder = f"#n{len(self.names)}"
        self.names[placeholder] = attr
        return placeholder

    def value(self, value: Any) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = _ser.serialize(value)
        return placeholder

    def atom(self, atom: Atom) -> str:
        if atom.op == "exists":
            return f"attribute_exists({self.name(atom.attr)})"
        if atom.op == "not_exists":
            return f"attribute_not_exists({self.name(atom.attr)})"
        operator = {"eq": "=", "lt": "<", "gt": ">"}[atom.op]
        return f"{self.name(atom.attr)} {operator} {self.value(atom.value)}"

    def condition(self, condition: Condition) -> str:
        return " AND ".join("(" + " OR ".join(self.atom(a) for a in clause) + ")" for clause in condition.clauses)

    def update(self, update: Update) -> str:
        parts = []
        if update.set:
            parts.append("SET " + ", ".join(f"{self.name(k)} = {self.value(v)}" for k, v in update.set.items()))
        if update.add:
            parts.append("ADD " + ", ".join(f"{self.name(k)} {self.value(v)}" for k, v in update.add.items()))
        if update.remove:
            parts.append("REMOVE " + ", ".join(self.name(k) for k in update.remove))
        return " ".join(parts)

    def apply(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.names:
            request["ExpressionAttributeNames"] = self.names
        if self.values:
            request["ExpressionAttributeValues"] = self.values
        return request


def _key(key: Key) -> dict[str, Any]:
    return {PK: {"S": key[PK]}, SK: {"S": key[SK]}}


class UnprocessedItems(RuntimeError):
    """A batch request still left items unprocessed after every retry (the table is throttling)."""


# Resending a batch's unprocessed items: eight requests in all, full jitter from 50 ms doubling up to 2 s.
BATCH_BACKOFF = Backoff(attempts=8, base_s=0.05, cap_s=2.0, jitter="full")


class DynamoTable(ThreadedAwsClient):
    """The Table port on a real (or moto) DynamoDB table."""

    def __init__(
        self,
        table_name: str,
        client_factory: Callable[[], Any],
        *,
        backoff: Backoff = BATCH_BACKOFF,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.table_name = table_name
        self.backoff = backoff
        self._sleep = sleep
        super().__init__(client_factory)

    async def _batch(self, operation: str, request: dict[str, Any], unprocessed: str) -> list[dict[str, Any]]:
        """Send a BatchGetItem / BatchWriteItem and resend what it left unprocessed, backing off; the responses."""
        responses: list[dict[str, Any]] = []
        pending = request

        async def send() -> None:
            nonlocal pending
            response = await self._call(operation, RequestItems=pending)
            responses.append(response)
            pending = response.get(unprocessed) or {}
            if pending:
                left = sum(len(v.get("Keys", v)) if isinstance(v, dict) else len(v) for v in pending.values())
                raise UnprocessedItems(f"{operation}: {left} item(s) still unprocessed after {len(responses)} requests")

        await retrying(send, self.backoff, UnprocessedItems, sleep=self._sleep)
        return responses

    async def get(self, key: Key) -> Item | None:
        response = await self._call("get_item", TableName=self.table_name, Key=_key(key), ConsistentRead=True)
        item = response.get("Item")
        return _from_ddb(item) if item else None

    async def batch_get(self, keys: list[Key]) -> list[Item]:
        if not keys:
            return []
        found: list[Item] = []
        for start in range(0, len(keys), 100):  # BatchGetItem: at most 100 keys
            request = {self.table_name: {"Keys": [_key(k) for k in keys[start : start + 100]], "ConsistentRead": True}}
            for response in await self._batch("batch_get_item", request, "UnprocessedKeys"):
                found.extend(_from_ddb(i) for i in response.get("Responses", {}).get(self.table_name, []))
        return found

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
        pk_attr, sk_attr = key_attributes(index)
        expr = _Expr()
        condition = f"{expr.name(pk_attr)} = {expr.value(pk)}"
        if sk is not None and sk.begins_with is not None:
            condition += f" AND begins_with({expr.name(sk_attr)}, {expr.value(sk.begins_with)})"
        elif sk is not None and sk.low is not None and sk.high is not None:
            condition += f" AND {expr.name(sk_attr)} BETWEEN {expr.value(sk.low)} AND {expr.value(sk.high)}"
        elif sk is not None and sk.low is not None:
            condition += f" AND {expr.name(sk_attr)} >= {expr.value(sk.low)}"
        elif sk is not None and sk.high is not None:
            condition += f" AND {expr.name(sk_attr)} <= {expr.value(sk.high)}"
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": condition,
            "ScanIndexForward": forward,
        }
        if index is not None:
            request["IndexName"] = index
        else:
            request["ConsistentRead"] = True
        if limit is not None:
            request["Limit"] = limit
        if start_key is not None:
            request["ExclusiveStartKey"] = _to_ddb(start_key)
        response = await self._call("query", **expr.apply(request))
        last = response.get("LastEvaluatedKey")
        return QueryPage(
            items=[_from_ddb(i) for i in response.get("Items", [])],
            last_key=_from_ddb(last) if last else None,
        )

    async def put(self, item: Item, condition: Condition | None = None) -> None:
        request: dict[str, Any] = {"TableName": self.table_name, "Item": _to_ddb(item)}
        expr = _Expr()
        if condition is not None:
            request["ConditionExpression"] = expr.condition(condition)
        try:
            await self._call("put_item", **expr.apply(request))
        except ClientError as exc:
            _raise_condition(exc)

    async def update(self, key: Key, update: Update, condition: Condition | None = None) -> Item:
        expr = _Expr()
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": _key(key),
            "UpdateExpression": expr.update(update),
            "ReturnValues": "ALL_NEW",
        }
        if condition is not None:
            request["ConditionExpression"] = expr.condition(condition)
        try:
            response = await self._call("update_item", **expr.apply(request))
        except ClientError as exc:
            _raise_condition(exc)
        return _from_ddb(response.get("Attributes", {}))

    async def delete(self, key: Key, condition: Condition | None = None) -> None:
        request: dict[str, Any] = {"TableName": self.table_name, "Key": _key(key)}
        expr = _Expr()
        if condition is not None:
            request["ConditionExpression"] = expr.condition(condition)
        try:
            await self._call("delete_item", **expr.apply(request))
        except ClientError as exc:
            _raise_condition(exc)

    def _op(self, op: WriteOp) -> dict[str, Any]:
        expr = _Expr()
        body: dict[str, Any] = {"TableName": self.table_name}
        if isinstance(op, Put):
            body["Item"] = _to_ddb(op.item)
            kind = "Put"
        elif isinstance(op, UpdateOp):
            body["Key"] = _key(op.key)
            body["UpdateExpression"] = expr.update(op.update)
            kind = "Update"
        else:
            body["Key"] = _key(op.key)
            kind = "Delete"
        if op.condition is not None:
            body["ConditionExpression"] = expr.condition(op.condition)
        return {kind: expr.apply(body)}

    async def transact(self, ops: list[WriteOp]) -> None:
        try:
            await self._call("transact_write_items", TransactItems=[self._op(op) for op in ops])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons") or []
            codes = [r.get("Code") if r.get("Code") not in (None, "None") else None for r in reasons]
            if CONDITION_FAILED not in codes and any(c in TRANSIENT_REASONS for c in codes):
                # Throttled or in conflict with another transaction: nothing was written, and a later
                # attempt may succeed. Not a condition failure (which would read as "lease held").
                raise ServiceUnavailable(f"storage is unavailable (transaction cancelled: {codes})") from exc
            raise TransactionFailed(codes or ["unknown"]) from exc

    async def batch_delete(self, keys: list[Key]) -> None:
        for start in range(0, len(keys), 25):  # BatchWriteItem: at most 25 requests
            request = {self.table_name: [{"DeleteRequest": {"Key": _key(k)}} for k in keys[start : start + 25]]}
            await self._batch("batch_write_item", request, "UnprocessedItems")


def _raise_condition(exc: ClientError) -> None:
    if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
        raise ConditionFailed(str(exc)) from exc
    raise exc
