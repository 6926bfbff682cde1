"""The Amazon Bedrock adapter of the LlmClient port: ConverseStream through boto3, pre-stream-only retries.

boto3 blocks, so the call and each read of the event stream run in a worker thread; the event loop keeps
serving other streams. Nothing here imports openai.

The adapter retries itself (botocore's retries are off): botocore's would cover the call only, not an
exception event (throttling, model stream error) that arrives in the event stream before the first output.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from agent_core.config import Settings
from agent_core.errors import LlmAccessDenied, LlmRejectedTools, LlmRequestInvalid, LlmUnavailable
from agent_core.llm.base import LlmDelta, LlmRequest
from agent_core.llm.converse import StreamMapper, converse_request
from agent_core.store.aws_client import boto_client

RETRYABLE_CODES = frozenset(
    {
        "throttlingexception",
        "serviceunavailableexception",
        "internalserverexception",
        "modelnotreadyexception",
        "modeltimeoutexception",
        "modelstreamerrorexception",
    }
)
CONFIGURATION_CODES = frozenset(
    {"accessdeniedexception", "unrecognizedclientexception", "resourcenotfoundexception", "expiredtokenexception"}
)
# ValidationException messages that mean the model id itself is wrong for this account or Region (a
# configuration error another model of the fallback chain may not have), not a malformed request.
MODEL_ID_PROBLEMS = ("on-demand throughput", "model identifier", "inference profile")
_END = object()
SleepFn = Callable[[float], Awaitable[None]]
# The openai SDK's backoff, so both providers retry alike: 0.5 s doubling up to 8 s, less up to 25 % jitter.
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0


def backoff_delay(retry: int, rng: Callable[[], float]) -> float:
    """The wait before retry number `retry` + 1 (0-based)."""
    return min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**retry) * (1 - 0.25 * rng())


def make_bedrock_client(settings: Settings) -> Any:
    """A bedrock-runtime client: botocore's own retries off (the adapter retries), the LLM timeout for reads.

    The endpoint follows boto3's own variables (`AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, `AWS_ENDPOINT_URL`).
    """
    return boto_client(
        settings,
        "bedrock-runtime",
        retries={"total_max_attempts": 1, "mode": "standard"},
        read_timeout=settings.llm_timeout_s,
    )


class BedrockLlmClient:
    """Streams Converse answers from Amazon Bedrock with bounded retries before any output."""

    def __init__(
        self,
        settings: Settings,
        client_factory: Callable[[], Any] | None = None,
        *,
        sleep: SleepFn = asyncio.sleep,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self._settings = settings
        self._factory = client_factory or (lambda: make_bedrock_client(settings))
        self._client: Any = None
        self._sleep = sleep
        self._rng = rng

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self._factory()
        return self._client

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]:
        """Yield one LlmDelta per meaningful stream event; raise LlmUnavailable (or a subclass) on failure."""
        from botocore.exceptions import BotoCoreError, ClientError

        model = request.model or self._settings.model
        kwargs = converse_request(request, model)
        client = await asyncio.to_thread(lambda: self.client)
        max_retries = max(0, self._settings.llm_max_retries)
        attempt = 0
        while True:
            started = False
            events: Any = None
            try:
                response = await asyncio.to_thread(client.converse_stream, **kwargs)
                events = response["stream"]
                mapper = StreamMapper()
                iterator: Iterator[dict[str, Any]] = iter(events)
                while (event := await asyncio.to_thread(next, iterator, _END)) is not _END:
                    delta = mapper.delta(event)  # type: ignore[arg-type]
                    if delta is None:
                        continue
                    started = True
                    yield delta
                return
            except (ClientError, BotoCoreError) as exc:
                if started or not is_retryable(exc) or attempt >= max_retries:
                    raise self._error(exc, model, request, attempt, started) from exc
                await self._sleep(backoff_delay(attempt, self._rng))
                attempt += 1
            finally:
                if events is not None:
                    events.close()

    def _error(
        self, exc: BaseException, model: str, request: LlmRequest, attempt: int, started: bool
    ) -> LlmUnavailable:
        """The port's error for a Bedrock failure, with a readable message."""
        code, message = error_code(exc), error_message(exc)
        text = f"LLM request failed: Bedrock {code or type(exc).__name__}"
        if message:
            text += f": {message}"
        if started:
            return LlmUnavailable(text + " (stream interrupted after output started)")
        if attempt:
            text += f" after {attempt} {'retry' if attempt == 1 else 'retries'}"
        lowered = code.lower()
        if lowered == "validationexception" and not any(p in message.lower() for p in MODEL_ID_PROBLEMS):
            mentions_tools = "tool" in message.lower() or "function" in message.lower()
            return (LlmRejectedTools if request.tools and mentions_tools else LlmRequestInvalid)(text)
        if lowered in CONFIGURATION_CODES or lowered == "validationexception":
            return LlmAccessDenied(
                f"{text}. Bedrock refused model {model!r}: check AGENT_MODEL (a model id or inference profile "
                "available in this region), that model access is enabled in the Bedrock console, and that the "
                "role may call bedrock:InvokeModelWithResponseStream on the model and its inference profile"
            )
        return LlmUnavailable(text)


def error_code(exc: BaseException) -> str:
    """The AWS error code (`ThrottlingException`, `throttlingException` from the stream), or ''."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str((response.get("Error") or {}).get("Code") or "")
    return ""


def error_message(exc: BaseException) -> str:
    """The service's own message, shortened; a transport failure's description otherwise."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str((response.get("Error") or {}).get("Message") or "")[:200]
    return str(exc)[:200]


def is_retryable(exc: BaseException) -> bool:
    """Throttling, unavailable and 5xx responses, timeouts and connection failures get another attempt."""
    from botocore.exceptions import (
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        ReadTimeoutError,
    )

    if isinstance(exc, ConnectionClosedError | ConnectTimeoutError | EndpointConnectionError | ReadTimeoutError):
        return True
    if error_code(exc).lower() in RETRYABLE_CODES:
        return True
    response = getattr(exc, "response", None)
    status = (response or {}).get("ResponseMetadata", {}).get("HTTPStatusCode") if isinstance(response, dict) else None
    return isinstance(status, int) and (status == 429 or status >= 500)
