"""The runtime's import graph has no cycle, and none is hidden behind TYPE_CHECKING or function-level imports.

Which package may import which (the dependency direction, the run protocol's users, the OpenAI API over the
runtime, Lambda code without local-only modules) are import-linter contracts in pyproject.toml, checked by
`lint-imports` in `make lint` and `make test`; import-linter's own acyclic contract works on packages, so the
module-level cycle checks stay here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

import agent_core

PACKAGE = Path(agent_core.__file__).parent
RUNTIME = "agent_core.runtime"


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ["agent_core", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _module_of(name: str) -> str | None:
    """The agent_core module an imported name lives in (`a.b.func` -> `a.b`), None outside agent_core."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif node.level == 0 and node.module:
        names = [f"{node.module}.{alias.name}" for alias in node.names]
    else:  # the package uses absolute imports only
        raise AssertionError(f"relative import at line {node.lineno}")
    for name in names:
        if (module := _module_of(name)) is not None:
            yield module


def _module_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports run when the module is imported: top level, and inside top-level if/try blocks."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            yield from _module_level(node.body)
            yield from _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody):
                yield from _module_level(block)


def _tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(encoding="utf-8"))


def import_graph() -> dict[str, set[str]]:
    """Module-level imports between agent_core modules."""
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        targets = {t for node in _module_level(_tree(module).body) for t in _targets(node)}
        graph[module] = targets - {module}
    return graph


def _runtime_modules() -> list[str]:
    return sorted(m for m in MODULES if m == RUNTIME or m.startswith(f"{RUNTIME}."))


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as error:
        return list(error.args[1])
    return None


def _reaching_runtime(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph cut down to modules on some path through the runtime (any cycle through it stays)."""
    runtime = set(_runtime_modules())
    reverse: dict[str, set[str]] = {m: set() for m in graph}
    for module, targets in graph.items():
        for target in targets:
            reverse[target].add(module)

    def closure(start: set[str], edges: dict[str, set[str]]) -> set[str]:
        seen, todo = set(start), list(start)
        while todo:
            for nxt in edges[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    keep = closure(runtime, graph) & closure(runtime, reverse)
    return {m: graph[m] & keep for m in keep}


def full_import_graph() -> dict[str, set[str]]:
    """Every import between agent_core modules: deferred (function-level) and `if TYPE_CHECKING:` ones included."""
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        nodes = (n for n in ast.walk(_tree(module)) if isinstance(n, ast.Import | ast.ImportFrom))
        graph[module] = {t for node in nodes for t in _targets(node)} - {module}
    return graph


def test_the_package_is_in_no_import_cycle_even_counting_deferred_imports() -> None:
    """Deferred and TYPE_CHECKING imports are for cold starts (a function loads only what it uses), never to hide a
    cycle: counting them, the graph still has none."""
    assert _cycle(full_import_graph()) is None


def test_the_runtime_is_in_no_import_cycle() -> None:
    assert _cycle(_reaching_runtime(import_graph())) is None


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = import_graph()
    graph["agent_core.runtime.run_protocol"] = graph["agent_core.runtime.run_protocol"] | {"agent_core.runtime.loop"}
    cycle = _cycle(_reaching_runtime(graph))
    assert cycle is not None and "agent_core.runtime.loop" in cycle


def test_no_type_checking_block_or_function_level_import_in_the_runtime() -> None:
    """A cycle hidden behind `if TYPE_CHECKING:` or an import inside a function would escape the graph."""
    found = []
    for module in _runtime_modules():
        tree = _tree(module)
        top = {id(node) for node in _module_level(tree.body)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Name) and node.id == "TYPE_CHECKING") or (
                isinstance(node, ast.Attribute) and node.attr == "TYPE_CHECKING"
            ):
                found.append(f"{module}:{node.lineno} TYPE_CHECKING")
            elif isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in top and any(_targets(node)):
                found.append(f"{module}:{node.lineno} function-level import of {', '.join(_targets(node))}")
    assert found == []


WIRES = "agent_core.wires"
API = "agent_core.api"
# The wires any wire may build on: the encoder base, the input items, the turn planner, the client's tools.
SHARED_WIRE = {
    f"{WIRES}.{name}" for name in ("encoder", "input", "turn", "client_tools", "client_turn", "approval_answers")
} | {WIRES}
BELOW_THE_WIRES = ("runtime", "tools", "memory", "llm", "store", "domain", "jobs.handlers", "container", "context")


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def _wire_of(module: str) -> str | None:
    """The wire a module belongs to (`agent_core.wires.responses`, `agent_core.wires.ag_ui`...), None for the
    shared modules and outside the wires."""
    if not _in(module, WIRES) or module in SHARED_WIRE:
        return None
    return ".".join(module.split(".")[:3])


def wire_rule_breaks(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Every import that breaks the wire seam's rules, by rule (counting deferred and TYPE_CHECKING imports).

    - the wires never import the HTTP layer (`api` imports them, never the other way round);
    - nothing below the wires (runtime, tools, memory, llm, store, domain, the job map, the container, the
      composition root) imports a wire or `api`;
    - the shared wire modules import no wire, and a UI wire (native, AG-UI, UI stream) imports no other wire:
      they plan through `wires/turn.py`, not the Responses package (Chat Completions builds on Responses).
    """
    breaks: dict[str, list[str]] = {"wires -> api": [], "below -> wires/api": [], "wire -> wire": []}
    below = tuple(f"agent_core.{name}" for name in BELOW_THE_WIRES)
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            edge = f"{module} -> {target}"
            if _in(module, WIRES) and _in(target, API):
                breaks["wires -> api"].append(edge)
            if any(_in(module, b) for b in below) and (_in(target, WIRES) or _in(target, API)):
                breaks["below -> wires/api"].append(edge)
            source_wire, target_wire = _wire_of(module), _wire_of(target)
            crossing = target_wire is not None and source_wire != target_wire and _in(module, WIRES)
            on_responses = (source_wire, target_wire) == (f"{WIRES}.chat_completions", f"{WIRES}.responses")
            if crossing and not on_responses:
                breaks["wire -> wire"].append(edge)
    return {rule: edges for rule, edges in breaks.items() if edges}


def test_the_wire_seam_holds() -> None:
    assert wire_rule_breaks(full_import_graph()) == {}


@pytest.mark.parametrize(
    ("source", "target", "rule"),
    [
        ("agent_core.wires.responses.encoder", "agent_core.api.sse", "wires -> api"),
        ("agent_core.wires.encoder", "agent_core.api.deps", "wires -> api"),
        ("agent_core.context", "agent_core.wires.responses.execution", "below -> wires/api"),
        ("agent_core.runtime.loop", "agent_core.wires.native", "below -> wires/api"),
        ("agent_core.store.responses", "agent_core.api.routes.responses", "below -> wires/api"),
        ("agent_core.wires.client_turn", "agent_core.wires.responses.plan", "wire -> wire"),
        ("agent_core.wires.ag_ui", "agent_core.wires.responses.request", "wire -> wire"),
        ("agent_core.wires.turn", "agent_core.wires.chat_completions.request", "wire -> wire"),
    ],
)
def test_the_seam_check_finds_a_broken_rule(source: str, target: str, rule: str) -> None:
    graph = full_import_graph()
    graph[source] = graph[source] | {target}
    assert f"{source} -> {target}" in wire_rule_breaks(graph).get(rule, [])


KEY_ATTRIBUTES = {"PK", "SK"}


def _literal_keys(module: str) -> list[str]:
    """Dicts keyed by PK/SK whose value is a string literal or an f-string: a table key derived in place."""
    found = []
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                literal = isinstance(value, ast.JoinedStr) or (
                    isinstance(value, ast.Constant) and isinstance(value.value, str)
                )
                if isinstance(key, ast.Name) and key.id in KEY_ATTRIBUTES and literal:
                    found.append(f"{module}:{node.lineno}")
    return found


def test_every_table_key_is_built_in_store_items() -> None:
    """`store/items.py` holds the key layout; everyone else asks it for a key (or copies one read back)."""
    assert [hit for m in sorted(MODULES) if m != "agent_core.store.items" for hit in _literal_keys(m)] == []


def test_the_key_check_finds_a_key_built_elsewhere() -> None:
    assert _literal_keys("agent_core.store.items") != []  # where keys are built, it sees them


def test_the_runtime_and_the_native_wire_do_not_import_the_openai_api() -> None:
    """The OpenAI-compatible wires depend on the runtime as `api` does, never the other way round."""
    graph = import_graph()
    below = [m for m in graph if m.startswith(("agent_core.runtime", "agent_core.store", "agent_core.wires.native"))]
    openai = ("agent_core.wires.responses", "agent_core.wires.chat_completions")
    found = {m: sorted(t for t in graph[m] if t.startswith(openai)) for m in below}
    assert {m: targets for m, targets in found.items() if targets} == {}
