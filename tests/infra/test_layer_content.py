"""The layer carries what Lambda runs: agent_core without its local-only modules, and every function starts from it.

The layer's agent_core is what `infra.layer_build.copy_agent_core` writes (the build step the CDK bundler and
`make layer` run); the deployed tier (tests/deployed) runs every function from the fully built layer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from infra.layer_build import AGENT_CORE_DIR, LOCAL_ONLY, PYPROJECT, copy_agent_core, layer_sources
from infra.registry import FUNCTIONS, REPO_ROOT

# The local server's modules: the CLI, its terminal chat, the settings page generator, the embedded store,
# the local scheduler, the dev routes (never served in Lambda: `Settings.dev_features`).
LOCAL_ONLY_MODULES = {
    "agent_core.cli",
    "agent_core.chat_client",
    "agent_core.settings_doc",
    "agent_core.api.routes.dev",
    "agent_core.jobs.local_scheduler",
    "agent_core.store.embedded",
    "agent_core.store.file_blob",
    "agent_core.store.sqlite_db",
    "agent_core.store.sqlite_jobs",
    "agent_core.store.sqlite_table",
}
LOCAL_ONLY_CONTRACT = "Lambda code does not import local-only modules"


def agent_core_modules(package_parent: Path) -> set[str]:
    """Dotted names of the agent_core modules under `package_parent`."""
    names = set()
    for path in (package_parent / "agent_core").rglob("*.py"):
        parts = path.relative_to(package_parent).with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


@pytest.fixture(scope="module")
def layer_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("layer") / "python"
    copy_agent_core(site)
    return site


def test_the_layer_holds_every_module_but_the_local_only_ones(layer_site: Path) -> None:
    source = agent_core_modules(AGENT_CORE_DIR.parent)
    assert source >= LOCAL_ONLY_MODULES  # every name is a real module (a renamed one would slip through)
    in_layer = agent_core_modules(layer_site)
    assert in_layer & LOCAL_ONLY_MODULES == set()
    assert in_layer == source - LOCAL_ONLY_MODULES
    assert not list(layer_site.rglob("__pycache__"))


def test_the_playground_files_ship_because_the_chat_function_can_serve_the_page(layer_site: Path) -> None:
    static = AGENT_CORE_DIR / "api" / "static"
    names = sorted(p.name for p in static.iterdir() if p.is_file())
    assert names and sorted(p.name for p in (layer_site / "agent_core" / "api" / "static").iterdir()) == names


def test_local_only_files_do_not_change_the_layer_fingerprint() -> None:
    """The asset hash covers what the layer carries: editing the CLI does not rebuild the layer."""
    carried = {str(p.relative_to(AGENT_CORE_DIR)) for p in layer_sources()}
    assert carried & set(LOCAL_ONLY) == set()
    assert "api/routes/chat_stream.py" in carried and "api/static/playground.html" in carried


def test_the_import_contract_forbids_exactly_the_modules_the_layer_leaves_out() -> None:
    """pyproject.toml's import-linter contract (run by `lint-imports` in `make test`) and the layer's
    exclusions name the same modules, so Lambda code cannot import a module its layer lacks."""
    with PYPROJECT.open("rb") as handle:
        contracts = tomllib.load(handle)["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["name"] == LOCAL_ONLY_CONTRACT]
    assert contract["type"] == "forbidden"
    assert set(contract["forbidden_modules"]) == LOCAL_ONLY_MODULES


_PROBE = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
from agent_core.config import get_settings
from agent_core.context import build_context

build_context(get_settings())  # what each function builds on its first request (AGENT_STORAGE=embedded is ignored)
loaded = {n: getattr(m, "__file__", None) for n, m in sys.modules.items() if n.split(".")[0] == "agent_core"}
print(json.dumps(loaded))
"""


def _entry_modules() -> list[str]:
    """Each function's entry module: the handler module, or the app the stream function's run.sh serves."""
    return [f"functions.{spec.name}.{'app' if spec.streaming else 'handler'}" for spec in FUNCTIONS]


@pytest.mark.parametrize("playground", ["false", "true"])
def test_every_function_imports_from_the_layer_without_a_local_only_module(layer_site: Path, playground: str) -> None:
    """Each function's entry module imports, and the context each builds, with only the layer's agent_core on the path
    (as on Lambda, where the local-only modules do not exist), the chat function with its playground page on and off."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_", "AWS_"))}
    env |= {
        "PYTHONPATH": f"{layer_site}{os.pathsep}{REPO_ROOT}",  # the layer first, then the function code
        "AWS_LAMBDA_FUNCTION_NAME": "agent-core-fn",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AGENT_TABLE_NAME": "agent-core",
        "AGENT_DATA_BUCKET": "agent-core-data",
        "AGENT_LLM_PROVIDER": "offline",
        "AGENT_STORAGE": "embedded",  # Lambda always uses AWS: the composition root must not open SQLite
        "AGENT_DATA_TOKEN_SECRET": "test-secret",
        "AGENT_PLAYGROUND_ENABLED": playground,
        "POWERTOOLS_TRACE_DISABLED": "1",
    }
    entries = _entry_modules()
    assert "functions.chat.handler" in entries and "functions.stream.app" in entries
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *entries],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=layer_site.parent,
    )
    assert done.returncode == 0, done.stderr
    loaded: dict[str, str | None] = json.loads(done.stdout)
    assert set(loaded) & LOCAL_ONLY_MODULES == set()
    files = [f for f in loaded.values() if f is not None]
    assert files and all(Path(f).is_relative_to(layer_site) for f in files)  # agent_core came from the layer
    assert ("agent_core.api.routes.playground" in loaded) == (playground == "true")
