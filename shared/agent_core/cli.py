"""agent-core serve: the local server with embedded storage and every route."""

from __future__ import annotations

import argparse
import sys

from agent_core.config import Settings, get_settings


def _banner(settings: Settings, host: str, port: int) -> str:
    base = f"http://{host}:{port}"
    llm, storage = settings.effective_llm_provider, settings.effective_storage
    return (
        f"agent-core listening on {base}  (storage: {storage}, llm: {llm}, model: {settings.model})\n"
        f"Try:\n"
        f"  id=$(curl -s -X POST {base}/api/v1/conversations -H 'content-type: application/json' "
        f'-d \'{{"title":"demo"}}\' | python3 -c \'import sys,json;print(json.load(sys.stdin)["conversationId"])\')\n'
        f"  curl -s -X POST {base}/api/v1/conversations/$id/chat -H 'content-type: application/json' "
        f'-d \'{{"message":"what time is it in Tokyo?"}}\'\n'
    )


def serve(host: str, port: int) -> None:
    import uvicorn

    from agent_core.api import routes
    from agent_core.api.app import build_app
    from agent_core.context import build_context
    from agent_core.runtime.agents import AgentDefinitionError

    settings = get_settings()
    try:
        context = build_context(settings)  # embedded storage starts here, before the first request
    except AgentDefinitionError as error:
        # An invalid agent definition stops the server from starting, naming file, field and problem.
        raise SystemExit(f"agent-core: invalid agent definition: {error}") from error
    app = build_app(*routes.local, context=context)
    print(_banner(settings, host, port), flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agent-core", description="Serverless LLM agent backend, run locally.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser("serve", help="start the local server with embedded storage")
    serve_cmd.add_argument("--host", default="127.0.0.1")
    serve_cmd.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
