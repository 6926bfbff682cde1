"""AGENT_LLM_FALLBACK: the next model answers when one fails before any output, never after output started.

Both providers are real adapters on loopback stubs: Bedrock through boto3, OpenAI through the openai SDK.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_core.context import AppContext, build_context
from agent_core.llm.bedrock_client import BedrockLlmClient
from agent_core.llm.fallback import FallbackLlm
from agent_core.observability import metrics
from agent_core.runtime.agents import AgentCatalog, AgentDefinition
from agent_core.store.memory_table import MemoryTable
from tests.support.bedrock_stub import BedrockScript, BedrockStub
from tests.support.fixtures import make_settings
from tests.support.openai_stub import OpenAiStub, StubScript
from tests.support.runs import run_turn, text

PRIMARY = "us.anthropic.claude-sonnet-4-20250514-v1:0"


async def _no_sleep(seconds: float) -> None:
    return None


def _context(openai_stub: OpenAiStub, **overrides: Any) -> AppContext:
    values: dict[str, Any] = {
        "AGENT_LLM_PROVIDER": "bedrock",
        "AGENT_MODEL": PRIMARY,
        "AGENT_LLM_FALLBACK": "openai:gpt-4.1-mini",
        "OPENAI_BASE_URL": openai_stub.base_url,
        "OPENAI_API_KEY": "sk-fallback",
        "AGENT_LLM_MAX_RETRIES": "1",
    }
    values.update(overrides)
    context = build_context(make_settings(**values), table=MemoryTable(), audit=lambda _: None)
    assert isinstance(context.deps.llm, FallbackLlm)
    for entry in context.deps.llm.entries:
        if isinstance(entry.client, BedrockLlmClient):  # the openai SDK's waits are the stub's retry-after-ms
            entry.client._sleep = _no_sleep
    context.deps.agents = AgentCatalog([AgentDefinition(key="d", name="D", mode="direct")])
    return context


@pytest.fixture(autouse=True)
def _fresh_metrics() -> None:
    metrics.clear_metrics()


def _fallbacks() -> float:
    return sum(metrics.metric_set.get("LlmFallbacks", {}).get("Value", []))


async def test_throttled_after_retries_falls_back_and_the_run_says_which_model_answered(
    bedrock_stub: BedrockStub, openai_stub: OpenAiStub
) -> None:
    # Given Bedrock throttling every attempt
    bedrock_stub.enqueue(*[BedrockScript.error(429, "ThrottlingException") for _ in range(2)])
    openai_stub.enqueue(StubScript.text("From ", "the fallback."))
    context = _context(openai_stub)
    # When a turn runs
    events = await run_turn(context, "d", "hello")
    # Then the primary was tried with its retry, then the fallback answered
    assert len(bedrock_stub.calls) == 2 and openai_stub.requests[0]["model"] == "gpt-4.1-mini"
    assert text(events) == "From the fallback."
    assert events[-1]["type"] == "run.complete" and events[-1]["model"] == "openai:gpt-4.1-mini"
    # And the run record and the metric say so
    [chat] = (await context.deps.chats.list_chats("u", 10, None)).items
    [run] = (await context.deps.turns.list_runs(chat.chat_id, 10, None))[0]
    assert run.answered_by == "openai:gpt-4.1-mini" and run.model == PRIMARY
    assert _fallbacks() == 1


async def test_the_primary_answering_is_named_too_and_nothing_is_counted(
    bedrock_stub: BedrockStub, openai_stub: OpenAiStub
) -> None:
    bedrock_stub.enqueue(BedrockScript.text("Primary."))
    events = await run_turn(_context(openai_stub), "d", "hello")
    assert text(events) == "Primary." and events[-1]["model"] == f"bedrock:{PRIMARY}"
    assert openai_stub.requests == [] and _fallbacks() == 0


async def test_access_denied_falls_back(bedrock_stub: BedrockStub, openai_stub: OpenAiStub) -> None:
    bedrock_stub.enqueue(BedrockScript.error(403, "AccessDeniedException", "not authorized"))
    events = await run_turn(_context(openai_stub), "d", "hello")
    assert len(bedrock_stub.calls) == 1, "access denied is not retried"
    assert text(events) == "stub reply" and events[-1]["model"] == "openai:gpt-4.1-mini"


async def test_no_fallback_after_output_started(bedrock_stub: BedrockStub, openai_stub: OpenAiStub) -> None:
    # Given Bedrock failing mid-answer
    bedrock_stub.enqueue(BedrockScript.interrupted("half an "))
    context = _context(openai_stub)
    events = await run_turn(context, "d", "hello")
    # Then the run ends in an error and the fallback was never called
    assert events[-1]["type"] == "run.error" and events[-1]["code"] == "llm_unavailable"
    assert [e["delta"] for e in events if e["type"] == "content.delta"] == ["half an "]
    assert openai_stub.requests == [] and _fallbacks() == 0


async def test_no_fallback_for_a_request_the_provider_calls_invalid(
    bedrock_stub: BedrockStub, openai_stub: OpenAiStub
) -> None:
    bedrock_stub.enqueue(BedrockScript.error(400, "ValidationException", "messages: malformed"))
    events = await run_turn(_context(openai_stub), "d", "hello")
    assert events[-1]["type"] == "run.error" and events[-1]["code"] == "llm_request_invalid"
    assert openai_stub.requests == []


async def test_openai_failing_falls_back_to_a_bedrock_model_id_with_colons(
    bedrock_stub: BedrockStub, openai_stub: OpenAiStub
) -> None:
    openai_stub.enqueue(*[StubScript.error(500) for _ in range(2)])
    bedrock_stub.enqueue(BedrockScript.text("Nova here."))
    context = _context(
        openai_stub,
        AGENT_LLM_PROVIDER="openai",
        AGENT_MODEL="gpt-4.1",
        AGENT_LLM_FALLBACK="bedrock:amazon.nova-pro-v1:0",
    )
    events = await run_turn(context, "d", "hello")
    assert len(openai_stub.requests) == 2 and [c.model_id for c in bedrock_stub.calls] == ["amazon.nova-pro-v1:0"]
    assert text(events) == "Nova here." and events[-1]["model"] == "bedrock:amazon.nova-pro-v1:0"
    assert _fallbacks() == 1
