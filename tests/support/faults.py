"""Storage fault injection through botocore's event hooks, on the very boto3 clients the store uses.

`before-call` handlers see every API call after botocore built it and before it is sent: returning a
parsed error response there makes the call fail exactly as AWS would answer it (no network, no botocore
retry: the failure the adapter sees after botocore gave up); raising there is a timeout before the
request reached AWS. `after-call` handlers run once the (moto) service answered: raising there is the
ambiguous failure, the write committed but its answer was lost.

Calls are numbered in order (from 1) over both clients; the cancel watch's periodic reads of the RUN
item and the run's event log writes (batched by time, beside the turn's other calls) are timing-dependent, so
they are neither numbered nor failed by the numbered plan (their own tests cover them); `log_kind` fails
every event log write with that fault instead.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError

# What each kind of fault answers (status, error code), per service.
_ANSWERS: dict[str, dict[str, tuple[int, str]]] = {
    "dynamodb": {
        "throttle": (400, "ProvisionedThroughputExceededException"),
        "server_error": (500, "InternalServerError"),
        "conditional": (400, "ConditionalCheckFailedException"),
    },
    "s3": {"throttle": (503, "SlowDown"), "server_error": (500, "InternalError")},
}
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
KINDS_BY_SERVICE = {
    "dynamodb": ("throttle", "server_error", "timeout", "lost_response", "conflict", "conditional"),
    "s3": ("throttle", "server_error", "timeout", "lost_response"),
}


def applies(kind: str, service: str, operation: str) -> bool:
    """Whether a fault kind makes sense for this call (conflicts and condition failures are for writes)."""
    if kind == "conflict":
        return operation == "TransactWriteItems"
    if kind == "conditional":
        return operation in WRITES
    return kind in KINDS_BY_SERVICE[service]


@dataclass(frozen=True)
class Call:
    service: str
    operation: str

    def __str__(self) -> str:
        return f"{self.service}.{self.operation}"


def _is_cancel_poll(operation: str, params: dict[str, Any]) -> bool:
    if operation != "GetItem":
        return False
    return str(params.get("Key", {}).get("sk", {}).get("S", "")).startswith("RUN#")


def _is_log_write(operation: str, params: dict[str, Any]) -> bool:
    if operation != "PutItem":
        return False
    return str(params.get("Item", {}).get("sk", {}).get("S", "")).startswith("LOG#")


def _cancellation(reasons: list[str]) -> dict[str, Any]:
    return {
        "Error": {"Code": "TransactionCanceledException", "Message": f"Transaction cancelled [{', '.join(reasons)}]"},
        "CancellationReasons": [{"Code": r} for r in reasons],
        "ResponseMetadata": {"HTTPStatusCode": 400},
    }


def _meta_index(params: dict[str, Any]) -> int:
    """The position of the chat's META item in a transaction (the lease), else the last operation."""
    items = params.get("TransactItems", [])
    for index, op in enumerate(items):
        body = next(iter(op.values()))
        key = body.get("Key") or body.get("Item") or {}
        if key.get("sk", {}).get("S") == "META":
            return index
    return len(items) - 1


@dataclass(eq=False)
class FaultPlan:
    """Records every call; fails call number `at` (and the `times - 1` following calls of the same
    operation) with `kind`. `at=None` records only."""

    kind: str = ""
    at: int | None = None
    times: int = 1
    log_kind: str = ""  # every event log write fails so (throttle, server_error, timeout)
    log_writes: list[Call] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    injected: list[Call] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _clients: list[Any] = field(default_factory=list)

    def install(self, *clients: Any) -> FaultPlan:
        for client in clients:
            client.meta.events.register("before-parameter-build", self._params)
            client.meta.events.register("before-call", self._before)
            client.meta.events.register("after-call", self._after)
            self._clients.append(client)
        return self

    def uninstall(self) -> None:
        for client in self._clients:
            client.meta.events.unregister("before-parameter-build", self._params)
            client.meta.events.unregister("before-call", self._before)
            client.meta.events.unregister("after-call", self._after)
        self._clients.clear()

    def _should_fail(self, call: Call) -> bool:
        if self.at is None or not self.kind:
            return False
        number = len(self.calls)
        if number == self.at:
            return True
        # A lasting fault: the following calls of the same operation fail too, `times` in all.
        return number > self.at and len(self.injected) < self.times and call == self.calls[self.at - 1]

    def _params(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["fault_api_params"] = params  # the call's own parameters (before-call sees the HTTP request)

    def _before(self, model: Any, context: dict[str, Any], **_: Any) -> Any:
        params = context.get("fault_api_params", {})
        service = model.service_model.service_id.hyphenize()
        call = Call(service, model.name)
        if _is_cancel_poll(model.name, params):
            return None
        if _is_log_write(model.name, params):
            with self._lock:
                self.log_writes.append(call)
            if not self.log_kind:
                return None
            if self.log_kind == "timeout":
                raise ReadTimeoutError(endpoint_url=f"https://{service}.fault.test")
            status, code = _ANSWERS[service][self.log_kind]
            return _response(status, {"Error": {"Code": code, "Message": f"injected {self.log_kind}"}})
        with self._lock:
            self.calls.append(call)
            fail = self._should_fail(call) and applies(self.kind, service, model.name)
            if fail:
                self.injected.append(call)
        if not fail:
            return None
        if self.kind == "lost_response":
            context["fault_lost_response"] = True  # let it reach the service; lose the answer after
            return None
        if self.kind == "timeout":
            raise ReadTimeoutError(endpoint_url=f"https://{service}.fault.test")
        # A transaction reports throttling, conflicts and condition failures per item, as DynamoDB does.
        reason = {
            "throttle": "ThrottlingError",
            "conflict": "TransactionConflict",
            "conditional": "ConditionalCheckFailed",
        }
        if model.name == "TransactWriteItems" and self.kind in reason:
            reasons = ["None"] * len(params["TransactItems"])
            reasons[_meta_index(params)] = reason[self.kind]
            return _response(400, _cancellation(reasons))
        status, code = _ANSWERS[service][self.kind]
        return _response(status, {"Error": {"Code": code, "Message": f"injected {self.kind}"}})

    def _after(self, context: dict[str, Any], **_: Any) -> None:
        if context.pop("fault_lost_response", False):
            raise ReadTimeoutError(endpoint_url="https://lost-response.fault.test")


def _response(status: int, parsed: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
    parsed.setdefault("ResponseMetadata", {})["HTTPStatusCode"] = status
    return AWSResponse("https://fault.test", status, {}, None), parsed
