"""Storage faults through botocore's event hooks: a client's Nth call of an operation raises a service error."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError


@dataclass
class Fault:
    """Counts the calls of one operation; `failing` are the 1-based call numbers that raise."""

    operation: str
    failing: set[int]
    code: str = "InternalServerError"
    calls: int = 0
    raised: list[int] = field(default_factory=list)

    def __call__(self, **_: Any) -> None:
        self.calls += 1
        if self.calls in self.failing:
            self.raised.append(self.calls)
            raise ClientError({"Error": {"Code": self.code, "Message": "injected fault"}}, self.operation)


@contextmanager
def failing_call(
    client: Any, service: str, operation: str, *failing: int, code: str = "InternalServerError"
) -> Iterator[Fault]:
    """While inside, calls number `failing` (1-based) of `operation` on `client` raise `code`."""
    fault = Fault(operation, set(failing), code)
    event = f"before-call.{service}.{operation}"
    client.meta.events.register(event, fault)
    try:
        yield fault
    finally:
        client.meta.events.unregister(event, fault)
