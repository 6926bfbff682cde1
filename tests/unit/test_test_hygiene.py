"""Tests wait on nothing: no fixed sleep stands in for synchronisation anywhere under tests/.

A test waits for the thing itself: an event, a condition, an injected clock or sleep it drives, or a bounded
poll on a condition through `tests/support/wait.py`. This scan fails on `asyncio.sleep(0)` (a yield hoping
another task has run) and on `time.sleep(<constant>)` / `asyncio.sleep(<constant>)` (a wait hoping something
happened meanwhile), awaited or not, outside the allow-listed functions below.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

# (path under tests/, function): the bounded polls every test goes through, and the adapter emulation's own
# readiness poll (a stdlib-only process emulating what the real Lambda Web Adapter does before an invocation).
ALLOWED = {
    ("support/wait.py", "poll_until"),
    ("support/wait.py", "apoll_until"),
    ("support/deployed/web_adapter.py", "wait_ready"),
}


def _sleep_call(node: ast.Call) -> str | None:
    """`time.sleep` / `asyncio.sleep` / a bare imported `sleep`, by how the call names it, or a sleep in
    disguise: `wait` on an event made for the call (`threading.Event().wait(0.05)`), which nothing sets."""
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "wait" and isinstance(func.value, ast.Call):
        made = func.value.func
        if (isinstance(made, ast.Attribute) and made.attr == "Event") or (
            isinstance(made, ast.Name) and made.id == "Event"
        ):
            return "Event().wait"
    if isinstance(func, ast.Attribute) and func.attr == "sleep" and isinstance(func.value, ast.Name):
        return f"{func.value.id}.sleep" if func.value.id in ("time", "asyncio") else None
    if isinstance(func, ast.Name) and func.id == "sleep":
        return "sleep"
    return None


def _constant_seconds(node: ast.Call) -> bool:
    args = list(node.args) + [k.value for k in node.keywords if k.arg in ("delay", "seconds", "secs", "timeout")]
    return len(args) >= 1 and isinstance(args[0], ast.Constant) and isinstance(args[0].value, int | float)


def offences(source: str, path: str) -> list[str]:
    """`path:line: call` for each fixed sleep outside an allowed function."""
    found: list[str] = []

    def visit(node: ast.AST, function: str | None) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        fixed = isinstance(node, ast.Call) and _sleep_call(node) is not None and _constant_seconds(node)
        if fixed and (path, function) not in ALLOWED:
            found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), None)
    return found


def test_no_test_synchronises_by_sleeping() -> None:
    found = [
        offence
        for file in sorted(TESTS.rglob("*.py"))
        for offence in offences(file.read_text(encoding="utf-8"), file.relative_to(TESTS).as_posix())
    ]
    assert found == [], "wait for a condition instead (tests/support/wait.py):\n" + "\n".join(found)


def test_the_scan_finds_each_kind_of_fixed_sleep_and_spares_waits_on_something() -> None:
    source = """
import asyncio, threading, time
from time import sleep

async def a(seconds, event):
    await asyncio.sleep(0)
    await asyncio.sleep(0.05)
    asyncio.sleep(delay=1)
    time.sleep(0.1)
    sleep(2)
    await asyncio.sleep(seconds)  # an injected or computed delay: not a fixed one
    await asyncio.wait_for(event.wait(), 10)
    threading.Event().wait(0.05)
    event.wait(timeout=5)  # a bounded wait on an event something sets

def poll_until():
    time.sleep(0.01)
"""
    assert offences(source, "x.py") == [
        "x.py:6: asyncio.sleep(0)",
        "x.py:7: asyncio.sleep(0.05)",
        "x.py:8: asyncio.sleep(delay=1)",
        "x.py:9: time.sleep(0.1)",
        "x.py:10: sleep(2)",
        "x.py:13: threading.Event().wait(0.05)",
        "x.py:17: time.sleep(0.01)",
    ]
    assert (
        offences(source, "support/wait.py")[-1] == "support/wait.py:13: threading.Event().wait(0.05)"
    )  # the helper's own is allowed
