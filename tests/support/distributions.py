"""What an install of agent-core (or agent-core[local]) brings, from this environment's package metadata.

`closure` follows requirements recursively as pip would resolve them here (markers evaluated for this
interpreter and for the extras asked of each distribution), starting from the repository's pyproject.toml.
`import_guard` writes a `python` that refuses to import a top-level module of any distribution outside a
closure: a fresh process then sees what a venv with only that install would have, without building one.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = REPO / "pyproject.toml"
PROJECT = "agent-core"
# Packages of the repository that an installed agent-core never has (only shared/agent_core is packaged).
REPOSITORY_ONLY = ("tests", "bench", "infra")
# What `python -m venv` puts in every venv (`make run` creates one), whatever agent-core requires.
VENV_BASELINE = {"pip", "setuptools"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _project() -> dict[str, object]:
    with PYPROJECT.open("rb") as handle:
        project = tomllib.load(handle)["project"]
    assert isinstance(project, dict)
    return project


def declared(*extras: str) -> list[Requirement]:
    """agent-core's own requirements (pyproject.toml, not the installed metadata): the runtime's and `extras`'."""
    project = _project()
    optional = project.get("optional-dependencies", {})
    assert isinstance(optional, dict)
    requirements = [Requirement(line) for line in project["dependencies"]]  # type: ignore[attr-defined]
    pending, seen = list(extras), set()
    while pending:
        extra = pending.pop()
        seen.add(extra)
        for requirement in map(Requirement, optional[extra]):
            if canonical(requirement.name) == PROJECT:  # agent-core[other] inside an extra
                pending += sorted(requirement.extras - seen)
            else:
                requirements.append(requirement)
    return requirements


def closure(*extras: str) -> set[str]:
    """Canonical names of every distribution `pip install agent-core[extras]` installs (agent-core excluded)."""
    found: dict[str, set[str]] = {}
    pending = [r for r in declared(*extras) if r.marker is None or r.marker.evaluate({"extra": ""})]
    while pending:
        requirement = pending.pop()
        name = canonical(requirement.name)
        wanted = set(requirement.extras)
        if name in found and wanted <= found[name]:
            continue
        found[name] = found.get(name, set()) | wanted
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError as exc:
            raise AssertionError(f"{name} (required) is not installed in this environment") from exc
        for line in requires:
            sub = Requirement(line)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in {"", *found[name]}):
                pending.append(sub)
    return set(found)


def module_distributions() -> dict[str, set[str]]:
    """Top-level module name -> canonical names of the installed distributions that provide it."""
    return {module: {canonical(d) for d in dists} for module, dists in metadata.packages_distributions().items()}


def refused_modules(allowed: set[str]) -> set[str]:
    """Top-level modules that only distributions outside `allowed` provide, and the repository's own extras."""
    refused = {m for m, dists in module_distributions().items() if not dists & (allowed | VENV_BASELINE | {PROJECT})}
    return refused | set(REPOSITORY_ONLY)


GUARD = '''\
"""Installed by tests/support/distributions.py: refuse modules outside the install under test."""
import json, sys
from pathlib import Path

_REFUSED = frozenset(json.loads((Path(__file__).parent / "refused.json").read_text()))


class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if path is None and name in _REFUSED:
            raise ModuleNotFoundError(f"No module named {name!r} (not in the install under test)", name=name)
        return None


sys.meta_path.insert(0, _Refuse())
'''


def import_guard(directory: Path, allowed: set[str], python: str = sys.executable) -> Path:
    """A `bin/python` (with `bin/` to put first on PATH) whose processes, and every Python they start with
    `python` from PATH, cannot import what `allowed` does not install. Returns the bin directory.

    The guard lives in a sitecustomize.py the wrapper puts first on PYTHONPATH itself: MCP stdio servers
    start with a reduced environment (no PYTHONPATH) and are guarded all the same.
    """
    site = directory / "guard"
    site.mkdir(parents=True)
    (site / "sitecustomize.py").write_text(GUARD)
    (site / "refused.json").write_text(json.dumps(sorted(refused_modules(allowed))))
    bin_dir = directory / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{python}" "$@"\n')
    wrapper.chmod(0o755)
    return bin_dir


def guarded_path(bin_dir: Path) -> str:
    """PATH with the guard's python first (as `make run` puts .venv/bin first)."""
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
