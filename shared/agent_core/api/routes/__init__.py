"""Routers grouped by the Lambda function that serves them (ARCHITECTURE.md routes table)."""

from __future__ import annotations

from fastapi import APIRouter

from agent_core.api.routes import (
    agents,
    chain,
    conversations,
    data,
    dev,
    history,
    memory,
    openai_conversations,
    responses,
    stream,
    submit,
)

chat: tuple[APIRouter, ...] = (conversations.router, history.router, agents.router, memory.router)
stream_routes: tuple[APIRouter, ...] = (stream.router, chain.router, responses.router, openai_conversations.router)
submit_routes: tuple[APIRouter, ...] = (submit.router,)
data_routes: tuple[APIRouter, ...] = (data.router,)
dev_routes: tuple[APIRouter, ...] = (dev.router,)  # the local server only; 404 in Lambda
local: tuple[APIRouter, ...] = (*chat, *stream_routes, *submit_routes, *data_routes, *dev_routes)
