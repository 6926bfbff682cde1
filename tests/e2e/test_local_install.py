"""The README's YAML-agent command in a process that can import only what `pip install -e .[local]` installs.

`make run AGENT_DEFINITIONS_DIR=examples/agents` starts `agent-core serve` from a venv holding the runtime
dependencies and the `local` extra. Building that venv here is too slow; instead the server (and the MCP
server it starts with `python` from PATH, as `make run` puts .venv/bin first) runs under an import guard that
refuses every top-level module of a distribution outside that install's closure (tests/support/distributions.py).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.support.distributions import REPO, closure, guarded_path, import_guard
from tests.support.local_server import local_server
from tests.support.sse import query


def make_run_extras() -> tuple[str, ...]:
    """The extras `make run` installs, read from the Makefile: `run` needs a stamp whose recipe pip-installs them."""
    makefile = (REPO / "Makefile").read_text()
    stamp = re.search(r"^run: (\$\(\w+\))", makefile, re.M)
    assert stamp, "make run depends on an install stamp"
    recipe = re.search(rf"^{re.escape(stamp.group(1))}:.*\n\t.*pip install .*-e \"\.\[([\w,]+)\]\"", makefile, re.M)
    assert recipe, f"the recipe of {stamp.group(1)} pip-installs the project with extras"
    return tuple(recipe.group(1).split(","))


def test_make_run_installs_the_local_extra_as_the_readme_says() -> None:
    assert make_run_extras() == ("local",)
    assert "installs into .venv and starts the local server" in (REPO / "README.md").read_text()


@pytest.fixture(scope="module")
def local_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The guard's bin directory (its `python`) for what `make run` installs: agent-core[local]."""
    return import_guard(tmp_path_factory.mktemp("local-install"), closure(*make_run_extras()))


def test_the_guard_refuses_what_the_install_lacks(local_install: Path) -> None:
    code = "import importlib.util as u, pytest"  # pytest is a test tool, never in agent-core[local]
    result = subprocess.run([local_install / "python", "-c", code], capture_output=True, text=True)
    assert result.returncode == 1 and "No module named 'pytest'" in result.stderr
    assert subprocess.run([local_install / "python", "-c", "import fastapi_offline, mcp_server_time"]).returncode == 0


def test_make_run_with_the_example_agents_serves_a_world_clock_turn_with_its_mcp_server(local_install: Path) -> None:
    # The README: `make run AGENT_DEFINITIONS_DIR=examples/agents`, from the repository's root
    with (
        local_server(
            str(local_install / "python"),
            cwd=str(REPO),
            AGENT_DEFINITIONS_DIR="examples/agents",
            PATH=guarded_path(local_install),
        ) as (base, _),
        httpx.Client(base_url=base, timeout=60) as client,
    ):
        agents = client.get("/api/ap/agents").json()
        events = query(client, {"agentKey": "world-clock", "message": "what time is it in Tokyo?"})
    assert "world-clock" in str(agents)
    # Each turn lists the agent's MCP tools first: a run.warning mcp_unavailable when mcp-server-time cannot start
    assert [e for e in events if e["type"] == "run.warning"] == []
    assert {e["toolName"] for e in events if e["type"] == "tool.start"} == {"time"}
    assert events[-1]["type"] == "run.complete", events[-1]


def test_every_runtime_module_imports_with_only_the_runtime_installed(tmp_path: Path) -> None:
    """What the Lambda layer holds (the runtime declarations alone): every agent_core module imports."""
    bin_dir = import_guard(tmp_path, closure())
    code = (
        "import pkgutil, importlib, agent_core\n"
        "for m in pkgutil.walk_packages(agent_core.__path__, 'agent_core.'):\n"
        "    importlib.import_module(m.name)\n"
        "from agent_core.runtime.agents import load_definitions\n"
        "print([a.key for a in load_definitions('examples/agents')])\n"
    )
    result = subprocess.run([bin_dir / "python", "-c", code], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "['careful-writer', 'support-desk', 'world-clock']"
    # fastapi_offline (the local server's docs pages) is refused here: the guard is really on
    refused = subprocess.run([bin_dir / "python", "-c", "import fastapi_offline"], capture_output=True, text=True)
    assert refused.returncode == 1, refused.stderr
