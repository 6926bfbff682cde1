"""Writes split into transactions within DynamoDB's limits (100 items, 4 MB), in order."""

from __future__ import annotations

from agent_core.store.item_size import item_size
from agent_core.store.table import Put, WriteOp

TRANSACT_LIMIT = 100  # items per transaction
TRANSACT_BYTES = 3_500_000  # DynamoDB caps a transaction at 4 MB of items; keep a margin for expressions
OP_OVERHEAD = 1024  # a condition or update expression, its names and values


def transaction_groups(puts: list[WriteOp], *, reserve_ops: int, reserve_bytes: int) -> list[list[WriteOp]]:
    """Split writes into transactions within DynamoDB's limits (100 items, 4 MB), in order; the last
    group keeps room for `reserve_ops` more operations of `reserve_bytes`."""
    sizes = [op_size(p) for p in puts]
    # The final group: as many of the last writes as fit beside the reserved operations.
    tail, tail_bytes = len(puts), reserve_bytes
    while tail > 0:
        size = sizes[tail - 1]
        if len(puts) - tail + 1 + reserve_ops > TRANSACT_LIMIT or tail_bytes + size > TRANSACT_BYTES:
            break
        tail -= 1
        tail_bytes += size
    groups: list[list[WriteOp]] = []
    current: list[WriteOp] = []
    current_bytes = 0
    for put, size in zip(puts[:tail], sizes[:tail], strict=True):
        if current and (len(current) >= TRANSACT_LIMIT or current_bytes + size > TRANSACT_BYTES):
            groups.append(current)
            current, current_bytes = [], 0
        current.append(put)
        current_bytes += size
    if current:
        groups.append(current)
    groups.append(puts[tail:])
    return groups


def op_size(op: WriteOp) -> int:
    return (item_size(op.item) if isinstance(op, Put) else 0) + OP_OVERHEAD
