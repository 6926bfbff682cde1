"""Sections a test tier adds to the end-of-run summary, printed whether the tier ran in this process or on a
pytest-xdist worker (whose output the controller receives when the worker finishes)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

SECTIONS = pytest.StashKey[dict[str, list[str]]]()


def add_section(config: pytest.Config, title: str, lines: Iterable[str]) -> None:
    output: dict[str, Any] | None = getattr(config, "workeroutput", None)
    sections = (
        output.setdefault("summary_sections", {}) if output is not None else config.stash.setdefault(SECTIONS, {})
    )
    sections[title] = list(lines)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    received = getattr(node, "workeroutput", {}).get("summary_sections", {})
    node.config.stash.setdefault(SECTIONS, {}).update(received)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    for title, lines in config.stash.get(SECTIONS, {}).items():
        terminalreporter.write_sep("-", title)
        for line in lines:
            terminalreporter.write_line(line)
