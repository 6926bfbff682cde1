"""Approval policies: which tool calls wait for a human's yes or no before they run.

A policy is `never` (the default), `always`, or `{when: <rule>, reason?: <text>}`, where a rule is a small
tree over the call's JSON arguments, checked at load (a bad rule stops the process from starting) and
evaluated with no `eval`:

- `{all: [rule, ...]}`, `{any: [rule, ...]}`, `{not: rule}`
- a test: `{arg: <dotted path>, <one operator>: <value>}`; the operators are
  `exists` (bool), `equals` (a value), `oneOf` (values), `matches` (a regular expression, searched in a
  string argument), `greaterThan` / `lessThan` (numbers), `sizeOver` (bytes: UTF-8 of a string argument,
  of its JSON otherwise), `hostIn` / `hostNotIn` (the host of a URL argument against a list of hosts;
  `*.example.com` matches its subdomains, not `example.com` itself; an unparsable URL is on no list).

A test on an argument the call does not have is false (except `exists: false`); so is a comparison of the
wrong type (`greaterThan` on a string). `hostNotIn` is true for a missing or unparsable URL: a call whose
host cannot be shown to be on the list needs approval.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

_PATH = re.compile(r"^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$")
_HOST = re.compile(r"^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")
OPERATORS = (
    "exists",
    "equals",
    "one_of",
    "matches",
    "greater_than",
    "less_than",
    "size_over",
    "host_in",
    "host_not_in",
)
_MISSING = object()


class _Rule(BaseModel):
    model_config = ConfigDict(populate_by_name=True, alias_generator=to_camel, extra="forbid", frozen=True)


class ArgTest(_Rule):
    """One test on one argument: `{arg: "url", hostNotIn: ["example.com"]}`."""

    arg: str
    exists: bool | None = None
    equals: Any = None
    one_of: list[Any] | None = None
    matches: str | None = None
    greater_than: float | None = None
    less_than: float | None = None
    size_over: int | None = Field(None, ge=0)
    host_in: list[str] | None = None
    host_not_in: list[str] | None = None

    @field_validator("arg")
    @classmethod
    def _path(cls, value: str) -> str:
        if not _PATH.match(value):
            raise ValueError(f"arg {value!r} is not a dotted path of argument names (e.g. 'url', 'file.name')")
        return value

    @field_validator("matches")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"matches is not a valid regular expression: {exc}") from exc
        return value

    @field_validator("host_in", "host_not_in")
    @classmethod
    def _hosts(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("the host list is empty")
        hosts = [h.strip().lower() for h in value]
        bad = [h for h in hosts if not _HOST.match(h)]
        if bad:
            raise ValueError(f"not host names (or *.domain): {bad}")
        return hosts

    @model_validator(mode="after")
    def _one_operator(self) -> ArgTest:
        given = [name for name in OPERATORS if name in self.model_fields_set]
        if len(given) != 1:
            names = ", ".join(to_camel(n) for n in OPERATORS)
            raise ValueError(f"a test on arg {self.arg!r} takes exactly one operator of: {names} (got {len(given)})")
        return self

    @property
    def operator(self) -> str:
        return next(name for name in OPERATORS if name in self.model_fields_set)

    def holds(self, args: Mapping[str, Any]) -> bool:
        value = _lookup(args, self.arg)
        op = self.operator
        if op == "exists":
            return (value is not _MISSING) == self.exists
        if op == "host_not_in":
            return not _host_listed(value, self.host_not_in or [])
        if value is _MISSING:
            return False
        if op == "equals":
            return bool(value == self.equals)
        if op == "one_of":
            return value in (self.one_of or [])
        if op == "matches":
            return isinstance(value, str) and re.search(self.matches or "", value) is not None
        if op in ("greater_than", "less_than"):
            if not isinstance(value, int | float) or isinstance(value, bool):
                return False
            return value > (self.greater_than or 0) if op == "greater_than" else value < (self.less_than or 0)
        if op == "size_over":
            return _size(value) > (self.size_over or 0)
        return _host_listed(value, self.host_in or [])

    def describe(self) -> str:
        op = self.operator
        return f"{self.arg} {to_camel(op)} {json.dumps(getattr(self, op), ensure_ascii=False)}"


class AllOf(_Rule):
    all: list[Rule] = Field(min_length=1)

    def holds(self, args: Mapping[str, Any]) -> bool:
        return all(rule.holds(args) for rule in self.all)

    def describe(self) -> str:
        return " and ".join(f"({rule.describe()})" for rule in self.all)


class AnyOf(_Rule):
    any: list[Rule] = Field(min_length=1)

    def holds(self, args: Mapping[str, Any]) -> bool:
        return any(rule.holds(args) for rule in self.any)

    def describe(self) -> str:
        return " or ".join(f"({rule.describe()})" for rule in self.any)


class Not(_Rule):
    not_: Rule = Field(alias="not")

    def holds(self, args: Mapping[str, Any]) -> bool:
        return not self.not_.holds(args)

    def describe(self) -> str:
        return f"not ({self.not_.describe()})"


def _rule_tag(value: Any) -> str:
    if isinstance(value, Mapping):
        for key in ("all", "any", "not"):
            if key in value:
                return f"rule:{key}"
        return "rule:test"
    tags: dict[type, str] = {AllOf: "rule:all", AnyOf: "rule:any", Not: "rule:not"}
    return tags.get(type(value), "rule:test")


# Tagged unions; their tags hold a colon, so `parse_policy` leaves them out of the path it reports.
Rule = Annotated[
    Annotated[AllOf, Tag("rule:all")]
    | Annotated[AnyOf, Tag("rule:any")]
    | Annotated[Not, Tag("rule:not")]
    | Annotated[ArgTest, Tag("rule:test")],
    Discriminator(_rule_tag),
]


class ConditionalApproval(_Rule):
    """`{when: <rule>, reason?: <text>}`: approval when the rule holds on the call's arguments."""

    when: Rule
    reason: str = Field("", max_length=500)


PolicySpec = Annotated[
    Annotated[Literal["never", "always"], Tag("policy:word")] | Annotated[ConditionalApproval, Tag("policy:when")],
    Discriminator(lambda value: "policy:word" if isinstance(value, str) else "policy:when"),
]


@dataclass(frozen=True)
class ApprovalPolicy:
    """A checked policy: `reason(args)` is why the call needs approval, or None when it may run."""

    spec: PolicySpec = "never"

    def reason(self, tool_name: str, args: Any) -> str | None:
        if self.spec == "never":
            return None
        if self.spec == "always":
            return f"{tool_name} always needs approval"
        if not isinstance(self.spec, ConditionalApproval):
            return None
        if not self.spec.when.holds(args if isinstance(args, Mapping) else {}):
            return None
        return self.spec.reason or f"{tool_name}: {self.spec.when.describe()}"

    @property
    def gated(self) -> bool:
        """Whether the policy may ever ask (anything but `never`)."""
        return self.spec != "never"

    @property
    def always(self) -> bool:
        """Whether every call asks (`always`), whatever its arguments."""
        return self.spec == "always"


_SPEC: TypeAdapter[PolicySpec] = TypeAdapter(PolicySpec)


def parse_policy(value: Any) -> ApprovalPolicy:
    """The policy of a YAML / JSON value; raises ValueError naming what is wrong."""
    if isinstance(value, ApprovalPolicy):
        return value
    if value is None:
        return ApprovalPolicy()
    try:
        return ApprovalPolicy(_SPEC.validate_python(value))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"] if ":" not in str(part))
        raise ValueError(f"{where or '(policy)'}: {first['msg']}") from None


NEVER = ApprovalPolicy()


def strictest(tool_name: str, args: Any, policies: list[ApprovalPolicy]) -> str | None:
    """The first reason any of the policies gives (the deployment's rules and the agent's both hold)."""
    for policy in policies:
        reason = policy.reason(tool_name, args)
        if reason is not None:
            return reason
    return None


def _lookup(args: Mapping[str, Any], path: str) -> Any:
    value: Any = args
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _size(value: Any) -> int:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return len(text.encode("utf-8"))


def _host_listed(value: Any, hosts: list[str]) -> bool:
    if not isinstance(value, str):
        return False
    try:
        host = (urlsplit(value.strip()).hostname or "").rstrip(".").lower()
    except ValueError:
        return False
    if not host:
        return False
    for pattern in hosts:
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]):
                return True
        elif host == pattern:
            return True
    return False


for _model in (AllOf, AnyOf, Not, ConditionalApproval):
    _model.model_rebuild()


# The wires where a person can answer an approval (named when a wire that cannot ask refuses).
APPROVAL_WIRES = "the native stream (/api/ap/query), /v1/responses with store: true, /api/ui-stream or /api/ag-ui"

# `interrupted`: approved, but taken by a process that stopped before the run went on (it may have run): not run
# again (runtime/continuation.py)
Outcome = Literal["approved", "denied", "timeout", "cancelled", "unavailable", "interrupted"]


@dataclass(frozen=True)
class ApprovalOutcome:
    """How an approval ended: `approved` / `denied` by a person (`by`, `at_ms`, `reason`), `timeout` (nobody
    answered in time), `cancelled` (the run ended while it waited), `unavailable` (nothing could ask)."""

    decision: Outcome
    asked: str = ""  # why the call needed approval
    by: str = ""
    at_ms: int = 0
    reason: str = ""

    def audit(self) -> dict[str, Any]:
        """The `approval` object of the call's TOOL_AUDIT line."""
        line: dict[str, Any] = {"decision": self.decision, "asked": self.asked}
        if self.by:
            line["by"] = self.by
        if self.at_ms:
            line["at"] = self.at_ms
        if self.reason:
            line["reason"] = self.reason
        return line
