"""Fixtures for every test, registered as plugins (see each module): no test module imports a fixture.

The suite runs on pytest-xdist workers, one per core (`--numprocesses auto --dist loadscope` in
pyproject.toml). Each module's tests run on one worker, so its module-scoped fixtures start once; a tier whose
session fixture serves several modules runs on one worker as a whole (SHARED_SESSION below). `-n 0` runs in
this process; so does `-p no:xdist` (the two options are then accepted and ignored).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

pytest_plugins = [
    "tests.support.fixtures",
    "tests.support.responses_app",
    "tests.support.function_env",
    "tests.support.summary",
]

# Folders whose tests share one session fixture: the deployed tier's one build, moto server and processes.
SHARED_SESSION = ("tests/deployed/",)


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if not pluginmanager.hasplugin("xdist"):
        parser.addoption("--numprocesses", dest="numprocesses", default=None, help="(pytest-xdist disabled)")
        parser.addoption("--dist", dest="dist", default="no", help="(pytest-xdist disabled)")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test gets a nodeid of its own: pytest-xdist runs one test per nodeid and would skip the rest.

    Under pytest 9.2, schemathesis names its per-operation items `test_x[GET /path]` but leaves them the
    function's nodeid (tests/integration/test_openapi_fuzz.py): they get their full name back here.
    """
    for item in items:
        if "[" in item.name and "[" not in item.nodeid and item.parent is not None:
            item._id = type(item.id).parse(f"{item.parent.nodeid}::{item.name}")
    twice = [nodeid for nodeid, count in Counter(item.nodeid for item in items).items() if count > 1]
    if twice:
        raise pytest.UsageError(f"tests share a nodeid, so a parallel run would skip some: {twice[:3]}")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadscope` by module, and by folder for the SHARED_SESSION tiers."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return next((tier for tier in SHARED_SESSION if module.startswith(tier)), module)

    return ModuleScheduling(config, log)
