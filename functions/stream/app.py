"""The stream function: the FastAPI app with the streaming routes, run by uvicorn behind the Lambda Web Adapter."""

from __future__ import annotations

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.warmup import load_llm_function_dependencies

load_llm_function_dependencies()

app = build_app(*routes.stream_routes)
