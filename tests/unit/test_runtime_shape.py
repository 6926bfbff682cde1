"""The runtime stays in small pieces: no module over 300 lines, no class over 12 methods (walked with `ast`);
the router sees the run only through the `AgentRun` protocol."""

from __future__ import annotations

import ast
from pathlib import Path

import agent_core.runtime

RUNTIME = Path(agent_core.runtime.__file__).parent
MAX_LINES = 300
MAX_METHODS = 12


def _sources() -> list[Path]:
    return sorted(RUNTIME.rglob("*.py"))


def _name(path: Path) -> str:
    return str(path.relative_to(RUNTIME)) if path.is_relative_to(RUNTIME) else path.name


def long_modules(paths: list[Path]) -> dict[str, int]:
    counts = {_name(p): len(p.read_text("utf-8").splitlines()) for p in paths}
    return {name: n for name, n in counts.items() if n > MAX_LINES}


def big_classes(paths: list[Path]) -> dict[str, int]:
    """Classes with more methods (defs in their own body, properties included) than allowed."""
    found = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ClassDef):
                methods = [d for d in node.body if isinstance(d, ast.FunctionDef | ast.AsyncFunctionDef)]
                if len(methods) > MAX_METHODS:
                    found[f"{_name(path)}:{node.name}"] = len(methods)
    return found


def test_the_walk_covers_the_runtime_and_its_strategies() -> None:
    names = {_name(p) for p in _sources()}
    assert {"loop.py", "scope.py", "recorder.py", "live_run.py", "strategies/function.py"} <= names


def test_no_runtime_module_over_300_lines() -> None:
    assert long_modules(_sources()) == {}


def test_no_runtime_class_over_12_methods() -> None:
    assert big_classes(_sources()) == {}


def test_the_checks_find_a_long_module_and_a_big_class(tmp_path: Path) -> None:
    module = tmp_path / "big.py"
    methods = "".join(f"    def m{i}(self) -> None:\n        pass\n" for i in range(13))
    module.write_text("class Big:\n" + methods + "\n" * 300, encoding="utf-8")
    assert big_classes([module]) and long_modules([module])


def test_the_router_uses_only_the_run_protocol() -> None:
    """No import of the turn or the runner, and no reach into a run's dependencies (`.deps`, `.turn`)."""
    tree = ast.parse((RUNTIME / "router.py").read_text("utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"agent_core.runtime.turn", "agent_core.runtime.loop", "agent_core.runtime.live_run"}
    reached = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not reached & {"deps", "turn", "store", "request"}
