"""The one table's key schema, indexes and TTL attribute: used by the code, the local bootstrap and CDK."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

PK = "pk"
SK = "sk"
TTL_ATTRIBUTE = "expiresAt"


@dataclass(frozen=True)
class IndexSpec:
    name: str
    pk: str
    sk: str


# gsi1: a user's chats by last activity (pk USER#{userId}, sk the zero-padded activity millis).
GSI1 = IndexSpec(name="gsi1", pk="gsi1pk", sk="gsi1sk")
# gsi2 (sparse, write-sharded): open sessions by idle due time (pk IDLE#{shard}, sk zero-padded due millis).
# Only a session's opening writes the key; the idle job moves it when it finds the session still active.
GSI2 = IndexSpec(name="gsi2", pk="gsi2pk", sk="gsi2sk")
# gsi3 (sparse, write-sharded): day markers by the UTC hour in which the local day closes (pk DAYCLOSE#...), and
# the META of every chat whose lease a run holds (pk LEASE#{shard}; keyed with the lease, removed with it).
GSI3 = IndexSpec(name="gsi3", pk="gsi3pk", sk="gsi3sk")
INDEXES: tuple[IndexSpec, ...] = (GSI1, GSI2, GSI3)
_BY_NAME = {index.name: index for index in INDEXES}


def key_attributes(index: str | None) -> tuple[str, str]:
    """The (partition, sort) key attributes a query reads: the base table's, or the named index's (a KeyError
    for any other name: attribute names come from the schema only, never from input)."""
    if index is None:
        return PK, SK
    spec = _BY_NAME[index]
    return spec.pk, spec.sk


SHARDS = 8


def create_table_kwargs(table_name: str) -> dict[str, Any]:
    """The boto3 `create_table` arguments for the table (on-demand)."""
    attrs = {PK, SK}
    for index in INDEXES:
        attrs.update({index.pk, index.sk})
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [
            {"AttributeName": PK, "KeyType": "HASH"},
            {"AttributeName": SK, "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [{"AttributeName": a, "AttributeType": "S"} for a in sorted(attrs)],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": index.name,
                "KeySchema": [
                    {"AttributeName": index.pk, "KeyType": "HASH"},
                    {"AttributeName": index.sk, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
            for index in INDEXES
        ],
    }


def shard(key: str, shards: int = SHARDS) -> int:
    """The index shard `key` (a user or chat id) writes to: stable across processes and versions."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % shards
