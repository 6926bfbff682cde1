"""The OpenAI / Azure OpenAI adapter of the LlmClient port: streaming, the SDK's retries, typed deltas."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from email.utils import parsedate_to_datetime
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletionChunk

from agent_core.config import Settings
from agent_core.domain.models import Usage
from agent_core.errors import LlmRejectedTools, LlmUnavailable
from agent_core.llm.base import LlmDelta, LlmRequest, ToolCallFragment
from agent_core.secrets import read_secret

_NO_KEY = "not-set"
_REASONS = {429: "rate limited", 500: "server error", 502: "bad gateway", 503: "service unavailable"}
_SECRET_KEYS = ("api_key", "apiKey", "OPENAI_API_KEY", "key")


class StreamTruncated(Exception):
    """The upstream stream closed before a finish reason."""


class OpenAiLlmClient:
    """Streams Chat Completions from OpenAI or Azure OpenAI; the SDK retries, before the response starts only.

    The SDK's own retries (`max_retries` = AGENT_LLM_MAX_RETRIES): connection errors, timeouts, 408, 409, 429
    and 5xx, after `retry-after-ms` / `Retry-After` when the server sends one (up to two minutes; a longer
    one is not retried) or exponential backoff from 0.5 s to 8 s with jitter; `x-should-retry` overrides.
    A streamed call is retried only until its response starts, so output is never repeated: a stream that
    breaks later (or ends without a finish reason) is `llm_unavailable`, for the fallback chain to take over.
    """

    def __init__(self, settings: Settings, client: openai.AsyncOpenAI | None = None) -> None:
        self._settings = settings
        self._client = client.with_options(max_retries=self._max_retries) if client is not None else None
        self._owns_client = client is None
        self._api_key = ""
        self._lock = asyncio.Lock()

    @property
    def _max_retries(self) -> int:
        return max(0, self._settings.llm_max_retries)

    async def aclose(self) -> None:
        """Close the underlying SDK client when this adapter created it."""
        if self._client is not None and self._owns_client:
            await self._client.close()
            self._client = None

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]:
        """Yield one LlmDelta per meaningful upstream chunk; raise LlmUnavailable on failure."""
        client = await self._get_client()
        started = finished = False
        upstream: openai.AsyncStream[ChatCompletionChunk] | None = None
        try:
            upstream = await self._create(client, request)
            async with upstream:
                async for chunk in upstream:
                    delta = chunk_to_delta(chunk)
                    if delta is None:
                        continue
                    started = True
                    finished = finished or delta.finish_reason is not None
                    yield delta
            if not finished:
                # Closed without a finish reason (and without [DONE]): a cut, not an answer.
                raise StreamTruncated("the stream ended before the model finished (no finish_reason)")
        except openai.OpenAIError as exc:
            if rejects_tools(exc, request):
                raise LlmRejectedTools(self._describe(exc, started)) from exc
            raise LlmUnavailable(self._describe(exc, started)) from exc
        except Exception as exc:
            # Garbled or truncated upstream data (not a documented API error): the provider failed.
            raise LlmUnavailable(self._describe(exc, started, upstream)) from exc

    async def _create(self, client: openai.AsyncOpenAI, request: LlmRequest) -> openai.AsyncStream[ChatCompletionChunk]:
        """Open one streaming Chat Completions call."""
        return await client.chat.completions.create(
            model=request.model or self._settings.model,
            messages=cast(Any, request.messages),
            tools=cast(Any, request.tools) if request.tools else openai.omit,
            stream=True,
            stream_options={"include_usage": True},
            tool_choice=cast(Any, request.tool_choice) if request.tools and request.tool_choice else openai.omit,
            parallel_tool_calls=(
                request.parallel_tool_calls
                if request.tools and request.parallel_tool_calls is not None
                else openai.omit
            ),
            temperature=request.temperature if request.temperature is not None else openai.omit,
            max_tokens=request.max_tokens if request.max_tokens is not None else openai.omit,
            stop=request.stop if request.stop else openai.omit,
            timeout=self._settings.llm_timeout_s,
        )

    async def sdk_client(self) -> openai.AsyncOpenAI:
        """The SDK client this adapter uses (built on first use): the embeddings adapter shares it."""
        return await self._get_client()

    async def _get_client(self) -> openai.AsyncOpenAI:
        """Create the SDK client on first use and cache it on the instance."""
        if self._client is not None:
            return self._client
        async with self._lock:
            if self._client is None:
                self._api_key = await self._resolve_api_key()
                self._client = self._build_client(self._api_key)
        return self._client

    def _build_client(self, api_key: str) -> openai.AsyncOpenAI:
        """Build an AsyncOpenAI (or AsyncAzureOpenAI) client retrying AGENT_LLM_MAX_RETRIES times."""
        s = self._settings
        if s.effective_llm_provider == "azure":
            return openai.AsyncAzureOpenAI(
                azure_endpoint=s.openai_base_url,
                api_version=s.azure_api_version,
                api_key=api_key,
                max_retries=self._max_retries,
                timeout=s.llm_timeout_s,
            )
        return openai.AsyncOpenAI(
            api_key=api_key,
            base_url=s.openai_base_url or None,
            max_retries=self._max_retries,
            timeout=s.llm_timeout_s,
        )

    async def _resolve_api_key(self) -> str:
        """The configured key, else the Secrets Manager secret, else a placeholder for keyless servers."""
        if self._settings.openai_api_key:
            return self._settings.openai_api_key
        if self._settings.llm_api_key_secret:
            try:
                return await asyncio.to_thread(read_secret_key, self._settings.llm_api_key_secret)
            except Exception as exc:
                raise LlmUnavailable(f"LLM API key secret could not be read: {type(exc).__name__}") from exc
        return _NO_KEY

    def _describe(
        self, exc: Exception, started: bool, upstream: openai.AsyncStream[ChatCompletionChunk] | None = None
    ) -> str:
        """A readable failure message that never contains the API key."""
        message = f"LLM request failed: {describe_error(exc, self._settings.llm_timeout_s)}"
        if started:
            message += " (stream interrupted after output started)"
        elif retries := retries_taken(exc, upstream):
            message += f" after {retries} {'retry' if retries == 1 else 'retries'}"
        if (wait := retry_after_seconds(exc)) is not None:
            message += f"; retry after {wait:g}s"
        return redact(message, self._api_key or self._settings.openai_api_key)


def read_secret_key(name: str) -> str:
    """Read the API key from Secrets Manager (plain string or a JSON object holding it)."""
    return read_secret(name, _SECRET_KEYS)


def rejects_tools(exc: BaseException, request: LlmRequest) -> bool:
    """A 4xx naming tools or functions for a request that declared tools: no function calling there.

    Not 429 (a rate limit is retried) nor 401/403 (credentials), whatever their message says.
    """
    if not request.tools or not isinstance(exc, openai.APIStatusError):
        return False
    if not 400 <= exc.status_code < 500 or exc.status_code in (401, 403, 429):
        return False
    message = _upstream_message(exc).lower()
    return "tool" in message or "function" in message


def retries_taken(exc: BaseException, upstream: openai.AsyncStream[Any] | None = None) -> int:
    """How many retries the SDK made before this failure: its `x-stainless-retry-count` request header."""
    if isinstance(exc, openai.APIError):
        request = exc.request
    elif upstream is not None:  # the stream opened, then its data failed
        request = upstream.response.request
    else:
        return 0
    try:
        return int(request.headers.get("x-stainless-retry-count", 0))
    except ValueError:
        return 0


def retry_after_seconds(exc: BaseException) -> float | None:
    """Seconds from `retry-after-ms` / `Retry-After` (delta seconds or HTTP date), if present."""
    if not isinstance(exc, openai.APIStatusError):
        return None
    headers = exc.response.headers
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def describe_error(exc: BaseException, timeout_s: float) -> str:
    """A short description of an SDK error: status and reason, or the failure kind."""
    if isinstance(exc, openai.APITimeoutError):
        return f"timed out after {timeout_s:g}s"
    if isinstance(exc, openai.APIConnectionError):
        return "connection error"
    if isinstance(exc, openai.APIStatusError):
        reason = _REASONS.get(exc.status_code) or _upstream_message(exc)
        return f"{exc.status_code} {reason}".strip()
    if isinstance(exc, openai.APIError):
        return f"upstream error: {_upstream_message(exc)}"
    if isinstance(exc, StreamTruncated):
        return str(exc)
    return f"malformed upstream stream ({type(exc).__name__})"


def _upstream_message(exc: openai.APIError) -> str:
    """The provider's own error message, shortened."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        text = inner.get("message") if isinstance(inner, dict) else inner
        if isinstance(text, str) and text:
            return text[:200]
    return (exc.message or type(exc).__name__)[:200]


def redact(text: str, secret: str) -> str:
    """Remove the secret (and any recognisable prefix of it) from a text."""
    if secret and secret != _NO_KEY:
        text = text.replace(secret, "***")
        if len(secret) > 8:
            text = text.replace(secret[:8], "***")
    return text


def chunk_to_delta(chunk: ChatCompletionChunk) -> LlmDelta | None:
    """Map one upstream chunk to an LlmDelta, or None when it carries nothing."""
    out = LlmDelta()
    if chunk.usage is not None:
        out.usage = Usage(
            prompt_tokens=chunk.usage.prompt_tokens or 0,
            completion_tokens=chunk.usage.completion_tokens or 0,
        )
    if chunk.choices:
        choice = chunk.choices[0]
        delta = choice.delta
        if delta is not None:
            out.content = delta.content or None
            out.reasoning = _reasoning(delta) or None
            out.tool_calls = [
                ToolCallFragment(
                    index=tc.index,
                    id=tc.id or None,
                    name=(tc.function.name if tc.function else None) or None,
                    arguments=(tc.function.arguments if tc.function else None) or "",
                )
                for tc in delta.tool_calls or []
            ]
            out.tool_calls = [f for f in out.tool_calls if f.id or f.name or f.arguments]
        out.finish_reason = choice.finish_reason or None
    empty = not (out.content or out.reasoning or out.tool_calls or out.finish_reason or out.usage)
    return None if empty else out


def _reasoning(delta: Any) -> str | None:
    """DeepSeek-style `reasoning_content` (or `reasoning`) from the delta's extra fields."""
    extra = getattr(delta, "model_extra", None) or {}
    for name in ("reasoning_content", "reasoning"):
        value = getattr(delta, name, None)
        if value is None:
            value = extra.get(name)
        if isinstance(value, str) and value:
            return value
    return None
