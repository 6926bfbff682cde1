"""The Bedrock guardrail adapter: ApplyGuardrail through the real boto3 client against the loopback Bedrock
Runtime (tests/support/bedrock_stub.py), its answers mapped to mask / block, and its failures failing closed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_core.context import build_context
from agent_core.errors import GuardrailIntervened, GuardrailUnavailable
from agent_core.guardrails.bedrock import ATTEMPTS, BedrockGuardrailAdapter, findings_of
from agent_core.guardrails.findings import Finding
from agent_core.guardrails.guard import Guard
from agent_core.guardrails.policy import GuardrailPolicy
from agent_core.store.memory_table import MemoryTable
from tests.support.bedrock_stub import BedrockStub, GuardrailScript
from tests.support.fake_llm import Reply, ScriptedLlm
from tests.support.fixtures import make_settings
from tests.support.runs import run_turn, text

GUARDRAIL = {"AGENT_GUARDRAIL_ID": "gr-test-1", "AGENT_GUARDRAIL_VERSION": "3"}
MAIL = "reach me at carol.diaz@example.net today"


def _guard(action: str = "mask") -> Guard:
    adapter = BedrockGuardrailAdapter(make_settings(**GUARDRAIL))
    return Guard(GuardrailPolicy(adapter="bedrock", output={"action": action}), adapter)


async def test_a_clean_text_passes_and_the_request_is_applyguardrails_wire(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue_guardrail(GuardrailScript.none())
    shown = await _guard().screen("output", "nothing personal here")
    assert shown == "nothing personal here"
    [call] = bedrock_stub.guardrail_calls
    assert (call.guardrail_id, call.version) == ("gr-test-1", "3")
    assert call.body["source"] == "OUTPUT" and call.text == "nothing personal here"
    assert call.body["outputScope"] == "INTERVENTIONS"
    authorization = call.headers["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256") and "/bedrock/aws4_request" in authorization


async def test_anonymized_entities_are_masked_where_bedrock_found_them(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue_guardrail(GuardrailScript.masked(MAIL, [("EMAIL", "carol.diaz@example.net")]))
    assert await _guard().screen("output", MAIL) == "reach me at {EMAIL} today"


async def test_the_input_stage_is_sent_as_source_input(bedrock_stub: BedrockStub) -> None:
    adapter = BedrockGuardrailAdapter(make_settings(**GUARDRAIL))
    guard = Guard(GuardrailPolicy(adapter="bedrock", input={"action": "mask"}), adapter)
    assert await guard.screen("input", MAIL) == "reach me at {EMAIL} today"  # the stub's default: e-mails
    assert [c.body["source"] for c in bedrock_stub.guardrail_calls] == ["INPUT"]


@pytest.mark.parametrize("action", ["mask", "block"])
async def test_an_intervention_bedrock_blocks_blocks_whatever_the_action(
    bedrock_stub: BedrockStub, action: str
) -> None:
    bedrock_stub.enqueue_guardrail(GuardrailScript.blocked())
    with pytest.raises(GuardrailIntervened) as raised:
        await _guard(action).screen("output", "buy these shares now")
    assert raised.value.code == "guardrail_intervened" and "shares" not in raised.value.message


async def test_a_masked_finding_blocks_on_a_block_check(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue_guardrail(GuardrailScript.masked(MAIL, [("EMAIL", "carol.diaz@example.net")]))
    with pytest.raises(GuardrailIntervened) as raised:
        await _guard("block").screen("output", MAIL)
    assert "carol" not in raised.value.message


async def test_throttling_is_retried(bedrock_stub: BedrockStub) -> None:
    bedrock_stub.enqueue_guardrail(GuardrailScript.error(429, "ThrottlingException"), GuardrailScript.none())
    assert await _guard().screen("output", "fine") == "fine"
    assert len(bedrock_stub.guardrail_calls) == 2


@pytest.mark.parametrize(
    ("status", "error_type", "calls"),
    [(500, "InternalServerException", ATTEMPTS), (403, "AccessDeniedException", 1)],
)
async def test_a_guardrail_that_cannot_answer_fails_closed(
    bedrock_stub: BedrockStub, status: int, error_type: str, calls: int
) -> None:
    bedrock_stub.enqueue_guardrail(*[GuardrailScript.error(status, error_type)] * calls)
    with pytest.raises(GuardrailUnavailable) as raised:
        await _guard().screen("output", MAIL)
    assert raised.value.code == "guardrail_unavailable" and raised.value.status == 503
    assert len(bedrock_stub.guardrail_calls) == calls


def _agent(directory: Path) -> None:
    (directory / "bedrock-guarded.yaml").write_text(
        "key: bedrock-guarded\nname: Guarded\nmode: direct\nguardrails:\n  adapter: bedrock\n  output: mask\n",
        encoding="utf-8",
    )


def _context(tmp_path: Path, llm: ScriptedLlm, **settings: Any) -> Any:
    _agent(tmp_path)
    values = {**GUARDRAIL, "AGENT_DEFINITIONS_DIR": str(tmp_path), "AGENT_GUARDRAIL_HOLDBACK_CHARS": "16", **settings}
    return build_context(make_settings(**values), table=MemoryTable(), llm=llm, audit=lambda _: None)


async def test_a_streamed_answer_is_masked_by_bedrock_before_it_is_sent(
    bedrock_stub: BedrockStub, tmp_path: Path
) -> None:
    answer = "Sure: write to carol.diaz@example.net and she will answer you within the day."
    context = _context(tmp_path, ScriptedLlm(Reply(text=answer)))
    events = await run_turn(context, "bedrock-guarded", "who do I write to?")
    assert text(events) == answer.replace("carol.diaz@example.net", "{EMAIL}")
    assert events[-1]["type"] == "run.complete"
    assert bedrock_stub.guardrail_calls and all(c.body["source"] == "OUTPUT" for c in bedrock_stub.guardrail_calls)


async def test_a_guardrail_that_cannot_answer_ends_the_stream_with_nothing_unchecked(
    bedrock_stub: BedrockStub, tmp_path: Path
) -> None:
    bedrock_stub.enqueue_guardrail(*[GuardrailScript.error(503, "ServiceUnavailableException")] * ATTEMPTS)
    context = _context(tmp_path, ScriptedLlm(Reply(text=MAIL)))
    events = await run_turn(context, "bedrock-guarded", "who do I write to?")
    assert text(events) == ""
    assert events[-1]["type"] == "run.error" and events[-1]["code"] == "guardrail_unavailable"


def test_a_bedrock_agent_without_a_guardrail_id_stops_the_process_at_start_up(tmp_path: Path) -> None:
    _agent(tmp_path)
    settings = make_settings(AGENT_DEFINITIONS_DIR=str(tmp_path))
    with pytest.raises(ValueError, match="AGENT_GUARDRAIL_ID"):
        build_context(settings, table=MemoryTable(), llm=ScriptedLlm(), audit=lambda _: None)


async def test_with_a_guardrail_id_agents_without_a_block_are_checked_by_it(bedrock_stub: BedrockStub) -> None:
    llm = ScriptedLlm(Reply(text="Write to carol.diaz@example.net."))
    context = build_context(make_settings(**GUARDRAIL), table=MemoryTable(), llm=llm, audit=lambda _: None)
    events = await run_turn(context, "main-agent", "I am ed@example.org")
    assert events[0]["message"] == "I am {EMAIL}" and text(events) == "Write to {EMAIL}."
    assert [c.body["source"] for c in bedrock_stub.guardrail_calls] == ["INPUT", "OUTPUT"]


def test_the_answer_maps_to_findings_policy_by_policy() -> None:
    text = "call me at carol.diaz@example.net, about shares"
    masked_answer = GuardrailScript.masked(text, [("EMAIL", "carol.diaz@example.net")]).response
    assert findings_of(masked_answer, text) == [Finding(11, 33, "EMAIL")]
    assert findings_of(GuardrailScript.blocked().response, text) == [Finding(0, len(text), "TOPIC", True)]
    words = {"action": "GUARDRAIL_INTERVENED", "assessments": [{"wordPolicy": {"customWords": [
        {"match": "shares", "action": "BLOCKED"}]}}]}  # fmt: skip
    assert findings_of(words, text) == [Finding(text.index("shares"), len(text), "WORD", True)]
    unknown = {"action": "GUARDRAIL_INTERVENED", "assessments": [{"automatedReasoningPolicy": {"findings": [{}]}}]}
    assert findings_of(unknown, text) == [Finding(0, len(text), "GUARDRAIL", True)]
    elsewhere = GuardrailScript.masked("x", [("EMAIL", "someone@else.org")]).response  # a match not in the text
    assert findings_of(elsewhere, text) == [Finding(0, len(text), "EMAIL", True)]
    assert findings_of(GuardrailScript.none().response, text) == []
