"""Every third-party module agent_core imports is declared in pyproject.toml, on its own line.

A package that arrives only through another package's requirements (PyYAML did, through the test tools) is
missing from `make run`'s venv and from the Lambda layer, both built from the declarations alone.
"""

from __future__ import annotations

import ast
import sys

from packaging.requirements import Requirement

from infra.layer_build import LayerRecipe
from tests.support.distributions import REPO, canonical, closure, declared, module_distributions

PACKAGE = REPO / "shared" / "agent_core"
# Imported only by the local server, never in Lambda: declared in the `local` extra, absent from the layer.
LOCAL_ONLY = {"fastapi_offline"}


def imported_modules() -> dict[str, set[str]]:
    """Third-party top-level module -> the agent_core files importing it (at any depth, lazily or not)."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                if top not in sys.stdlib_module_names and top not in {"agent_core", "__future__"}:
                    found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


def test_the_scan_finds_lazy_imports() -> None:
    # yaml is imported inside load_definition, openai only in its adapter: both count.
    modules = imported_modules()
    assert "shared/agent_core/runtime/agents.py" in modules["yaml"]
    assert {"openai", "boto3", "fastapi", "fastapi_offline"} <= set(modules)


def test_every_imported_module_is_declared_directly() -> None:
    runtime = {canonical(r.name) for r in declared()}
    local = {canonical(r.name) for r in declared("local")}
    providers = module_distributions()
    missing = []
    for module, files in sorted(imported_modules().items()):
        allowed = local if module in LOCAL_ONLY else runtime
        if not providers.get(module, set()) & allowed:
            missing.append(f"{module} (from {sorted(providers.get(module, {'?'}))}) imported by {sorted(files)}")
    assert not missing, "declare in pyproject.toml [project] dependencies:\n" + "\n".join(missing)


def test_every_imported_module_is_installed_by_the_runtime_or_local_closure() -> None:
    """The weaker property the venv and the layer need: whatever pip installs for the declarations has it."""
    runtime, local = closure(), closure("local")
    providers = module_distributions()
    for module in imported_modules():
        assert providers.get(module, set()) & (local if module in LOCAL_ONLY else runtime), module
    assert not {"fastapi-offline", "mcp-server-time"} & runtime  # the local server's extras stay out of Lambda


def test_the_layer_installs_the_runtime_declarations() -> None:
    """The layer's pip install line is pyproject's [project] dependencies: PyYAML is in it, fastapi-offline not."""
    names = {canonical(Requirement(line).name) for line in LayerRecipe().requirements()}
    assert "pyyaml" in names and "fastapi-offline" not in names
    assert names == {canonical(r.name) for r in declared()}
