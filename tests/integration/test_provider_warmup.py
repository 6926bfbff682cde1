"""Lambda init loads only the configured providers' SDKs: the Bedrock path never imports openai.

Each test runs the chat function's module in a fresh process (a cold start) and reads its sys.modules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from agent_core.warmup import OPENAI_ADAPTER, warm_modules
from tests.support.bedrock_stub import BedrockScript, BedrockStub
from tests.support.fixtures import make_settings

MODEL = "amazon.nova-pro-v1:0"

# A cold start of the chat function, then (with TURN=1) one buffered turn through its handler, as API Gateway
# invokes it. Prints the openai modules loaded at init and after the turn, and the turn's answer.
COLD_START = """
import json, os, sys
from functions.chat import handler as module
openai_at_init = sorted(m for m in sys.modules if m.partition(".")[0] == "openai")
adapters = sorted(m for m in sys.modules if m.startswith("agent_core.llm.") and m.endswith("_client"))
answer = None
if os.environ.get("TURN"):
    from tests.support.lambda_events import FakeLambdaContext, rest_v1_event
    headers = {"X-User-Id": "u1"}
    created = module.handler(rest_v1_event("POST", "/api/v1/conversations", {"title": "t"}, headers), FakeLambdaContext())
    chat_id = json.loads(created["body"])["conversationId"]
    event = rest_v1_event("POST", f"/api/v1/conversations/{chat_id}/chat", {"message": "hello"}, headers)
    answer = json.loads(module.handler(event, FakeLambdaContext())["body"])
openai_after = sorted(m for m in sys.modules if m.partition(".")[0] == "openai")
print(json.dumps({"init": openai_at_init, "adapters": adapters, "after": openai_after, "answer": answer}))
"""


def _cold_start(**env: str) -> dict[str, Any]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_", "AWS_"))}
    clean.update({"AGENT_STORAGE": "memory", "POWERTOOLS_TRACE_DISABLED": "1", "AWS_DEFAULT_REGION": "us-east-1"})
    clean.update(env)
    result = subprocess.run([sys.executable, "-c", COLD_START], capture_output=True, text=True, env=clean)
    assert result.returncode == 0, result.stderr[-3000:]
    out: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return out


def test_a_bedrock_cold_start_and_turn_load_no_openai_module() -> None:
    with BedrockStub() as stub:
        stub.enqueue(BedrockScript.text("bedrock ", "answer"))
        seen = _cold_start(
            AGENT_LLM_PROVIDER="bedrock",
            AGENT_MODEL=MODEL,
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
            AWS_ENDPOINT_URL_BEDROCK_RUNTIME=stub.endpoint_url,
            TURN="1",
        )
        assert [call.model_id for call in stub.calls] == [MODEL]
    assert seen["init"] == [] and seen["after"] == []
    assert seen["adapters"] == ["agent_core.llm.bedrock_client"]  # warmed at init, like openai's for OpenAI
    assert "bedrock answer" in json.dumps(seen["answer"])


def test_the_openai_provider_still_loads_its_sdk_at_init() -> None:
    seen = _cold_start(AGENT_LLM_PROVIDER="openai", OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    assert "openai" in seen["init"] and seen["adapters"] == [OPENAI_ADAPTER]


def test_each_fallback_provider_is_warmed_once_and_offline_warms_no_adapter() -> None:
    chain = make_settings(
        AGENT_LLM_PROVIDER="bedrock", AGENT_MODEL=MODEL, AGENT_LLM_FALLBACK="openai:gpt-4.1-mini,azure:gpt-4o"
    )
    assert warm_modules(chain)[-2:] == ["agent_core.llm.bedrock_client", OPENAI_ADAPTER]
    offline = warm_modules(make_settings(AGENT_LLM_PROVIDER="offline"))
    assert not [m for m in offline if m.startswith("agent_core.llm.")]
