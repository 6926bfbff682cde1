"""Routers grouped by the Lambda function that serves them."""

from __future__ import annotations

from fastapi import APIRouter

from agent_core.api.routes import conversations

chat: tuple[APIRouter, ...] = (conversations.router,)
local: tuple[APIRouter, ...] = (*chat,)
