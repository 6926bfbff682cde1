"""Writes that must finish even when the request that started them is cancelled (a client gone mid-write)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import anyio

T = TypeVar("T")


async def to_the_end(work: Coroutine[Any, Any, T]) -> T:
    """Run `work` to completion in this task even if the task is cancelled meanwhile, then re-raise.

    `asyncio.shield` alone lets the caller go on (and a Lambda freeze or a closed loop then loses the write):
    here the caller waits. Cancellation from an anyio scope (Starlette's disconnect listener) is held off
    by a shielded scope; a native `Task.cancel()` is absorbed until the work is done and raised after it.
    """
    task = asyncio.ensure_future(work)
    interrupted = False
    with anyio.CancelScope(shield=True):
        while True:
            try:
                result = await asyncio.shield(task)
                break
            except asyncio.CancelledError:
                if task.cancelled():
                    raise
                interrupted = True
    if interrupted:
        raise asyncio.CancelledError
    return result
