"""Routers grouped by the Lambda function that serves them (the routes table in README.md).

The groups are built on first access (PEP 562 module `__getattr__`), so a function imports only its own
routes: the chat function never loads the Responses API, submit and data load almost nothing.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi import APIRouter

    chat: tuple[APIRouter, ...]
    stream_routes: tuple[APIRouter, ...]
    submit_routes: tuple[APIRouter, ...]
    data_routes: tuple[APIRouter, ...]
    dev_routes: tuple[APIRouter, ...]
    playground_routes: tuple[APIRouter, ...]
    local: tuple[APIRouter, ...]

_GROUPS: dict[str, tuple[str, ...]] = {
    "chat": ("conversations", "history", "agents", "profile", "memory", "usage"),
    "stream_routes": (
        "stream",
        "chat_stream",
        "responses",
        "openai_conversations",
        "chat_completions",
        "ui_stream",
        "ag_ui",
    ),
    "submit_routes": ("submit",),
    "data_routes": ("data",),
    "dev_routes": ("dev",),  # the local server only; 404 in Lambda
    "playground_routes": ("playground",),  # the page at `/`: the local server; the chat function when enabled
}
_GROUPS["local"] = tuple(
    m
    for group in ("chat", "stream_routes", "submit_routes", "data_routes", "dev_routes", "playground_routes")
    for m in _GROUPS[group]
)


def __getattr__(name: str) -> Any:
    modules = _GROUPS.get(name)
    if modules is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    group = tuple(import_module(f"{__name__}.{m}").router for m in modules)
    globals()[name] = group
    return group
