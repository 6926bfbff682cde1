"""The Amazon Bedrock adapter: `ApplyGuardrail` (bedrock-runtime) through boto3, in a worker thread.

The guardrail (AGENT_GUARDRAIL_ID, AGENT_GUARDRAIL_VERSION) is configured in Bedrock: its PII entities and
regexes set to ANONYMIZE come back as findings to mask, anything it BLOCKs (denied topics, content filters,
words, PII set to BLOCK, grounding) as a finding that blocks. Bedrock answers with the matched text
(`match`), not offsets: each match is located in the text (every occurrence). A finding that cannot be
located, or an intervention with no finding, blocks: the text is never let through unchecked.

Failures: botocore's standard retries (3 attempts in all) cover throttling, 5xx and connection errors; after
them, and for any other error (access denied, an unknown guardrail), the check raises GuardrailUnavailable
(fail closed): the run ends `guardrail_unavailable` with nothing of the unchecked text sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

from agent_core.config import Settings
from agent_core.errors import GuardrailUnavailable
from agent_core.guardrails.findings import Finding, Source, non_overlapping
from agent_core.observability import logger
from agent_core.store.aws_client import boto_client

INTERVENED = "GUARDRAIL_INTERVENED"
MASKED, BLOCKED = "ANONYMIZED", "BLOCKED"
ATTEMPTS = 3  # botocore's standard mode: the call and two retries (throttling, 5xx, connection errors)


def make_guardrail_client(settings: Settings) -> Any:
    """A bedrock-runtime client for ApplyGuardrail (endpoint: boto3's AWS_ENDPOINT_URL_BEDROCK_RUNTIME)."""
    return boto_client(settings, "bedrock-runtime", retries={"total_max_attempts": ATTEMPTS, "mode": "standard"})


def _located(text: str, match: str, label: str, blocked: bool) -> Iterator[Finding]:
    at = text.find(match) if match else -1
    if at < 0:  # Bedrock found something this text does not contain verbatim: block rather than guess
        yield Finding(0, len(text), label, True)
        return
    while at >= 0:
        yield Finding(at, at + len(match), label, blocked)
        at = text.find(match, at + len(match))


def findings_of(response: dict[str, Any], text: str) -> list[Finding]:
    """ApplyGuardrail's answer as findings in `text` (none when Bedrock did not intervene)."""
    if response.get("action") != INTERVENED:
        return []
    found: list[Finding] = []
    for assessment in response.get("assessments") or []:
        sensitive = assessment.get("sensitiveInformationPolicy") or {}
        for entity in sensitive.get("piiEntities") or []:
            if entity.get("action") in (MASKED, BLOCKED):
                found += _located(text, entity.get("match", ""), entity.get("type", "PII"), entity["action"] == BLOCKED)
        for regex in sensitive.get("regexes") or []:
            if regex.get("action") in (MASKED, BLOCKED):
                found += _located(
                    text, regex.get("match", ""), regex.get("name") or "REGEX", regex["action"] == BLOCKED
                )
        words = assessment.get("wordPolicy") or {}
        for word in [*(words.get("customWords") or []), *(words.get("managedWordLists") or [])]:
            if word.get("action") == BLOCKED:
                found += _located(text, word.get("match", ""), "WORD", True)
        policies = (
            ("topicPolicy", "topics", "TOPIC"),
            ("contentPolicy", "filters", "CONTENT"),
            ("contextualGroundingPolicy", "filters", "GROUNDING"),
        )
        for policy, key, label in policies:
            for item in (assessment.get(policy) or {}).get(key) or []:
                if item.get("action") == BLOCKED:
                    found.append(Finding(0, len(text), label, True))
    if not found:  # intervened, yet nothing to point at (a policy this adapter does not know): block
        found.append(Finding(0, len(text), "GUARDRAIL", True))
    return non_overlapping(found)


class BedrockGuardrailAdapter:
    """Checks text with one Bedrock guardrail. A streamed answer is sent to it in batches (`batch_chars`)."""

    name = "bedrock"

    def __init__(self, settings: Settings, client_factory: Callable[[], Any] | None = None) -> None:
        if not settings.guardrail_id:
            raise ValueError("an agent uses the bedrock guardrail adapter but AGENT_GUARDRAIL_ID is not set")
        self._settings = settings
        self._factory = client_factory or (lambda: make_guardrail_client(settings))
        self._client: Any = None
        # One call per hold-back window's worth of new text (Bedrock bills per 1,000 characters).
        self.batch_chars = max(1, settings.guardrail_holdback_chars)

    def _apply(self, text: str, source: Source) -> dict[str, Any]:
        if self._client is None:
            self._client = self._factory()
        response: dict[str, Any] = self._client.apply_guardrail(
            guardrailIdentifier=self._settings.guardrail_id,
            guardrailVersion=self._settings.guardrail_version,
            source=source,
            content=[{"text": {"text": text}}],
            outputScope="INTERVENTIONS",
        )
        return response

    async def scan(self, text: str, source: Source) -> list[Finding]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = await asyncio.to_thread(self._apply, text, source)
        except (ClientError, BotoCoreError) as exc:
            code = exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else type(exc).__name__
            logger.warning("the guardrail could not answer", extra={"error": code, "source": source})
            raise GuardrailUnavailable("the guardrail could not check the text; nothing unchecked was sent") from exc
        return findings_of(response, text)
