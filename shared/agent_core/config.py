"""One Settings object: the only module that reads the environment."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from agent_core.domain.approval import parse_policy


def _split(value: object) -> object:
    """A list setting as people write it: empty, one value, `a, b` (trimmed) or a JSON list."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


DEV_STAGE = "dev"
FALLBACK_PROVIDERS = ("openai", "azure", "bedrock")
# A lease lasts 2.5 heartbeats from its last renewal (kept as twice that, an integer).
LEASE_HEARTBEATS_X2 = 5

# Read raw from the environment (no JSON decoding first), then split by `_split`.
StrList = Annotated[list[str], NoDecode]


class Settings(BaseSettings):
    """Every setting of the product: its variable, default and description (the table in docs/settings.md)."""

    model_config = SettingsConfigDict(env_prefix="", extra="ignore", populate_by_name=True)

    storage: Literal["embedded", "aws", "memory"] = Field(
        "embedded",
        alias="AGENT_STORAGE",
        description="Where data lives: `embedded` (SQLite and files in AGENT_DATA_DIR, the local server), `aws` "
        "(DynamoDB and S3; always in Lambda, whatever this says), `memory` (one process, for tests)",
    )
    table_name: str = Field("agent-core-local", alias="AGENT_TABLE_NAME", description="The DynamoDB table (`aws`)")
    data_bucket: str = Field(
        "agent-core-local-data", alias="AGENT_DATA_BUCKET", description="The S3 bucket of saved data files (`aws`)"
    )
    work_queue_url: str = Field(
        "",
        alias="AGENT_WORK_QUEUE_URL",
        description="The SQS queue of background jobs in Lambda; empty, or off Lambda: an in-process queue",
    )
    data_dir: str = Field(
        ".agent-core",
        alias="AGENT_DATA_DIR",
        description="Embedded storage's directory: the SQLite database and saved files (one server per directory)",
    )

    model: str = Field("gpt-4.1-mini", alias="AGENT_MODEL", description="The model of agents that name none")
    llm_provider: Literal["openai", "azure", "bedrock", "offline", ""] = Field(
        "",
        alias="AGENT_LLM_PROVIDER",
        description="The model provider; empty: `openai` when an endpoint or key is set, else `offline` "
        "(the built-in offline model, no network)",
    )
    openai_base_url: str = Field(
        "", alias="OPENAI_BASE_URL", description="An OpenAI-compatible endpoint (Azure: the resource's endpoint)"
    )
    openai_api_key: str = Field(
        "", alias="OPENAI_API_KEY", repr=False, description="The endpoint's API key (a secret: never logged)"
    )
    llm_api_key_secret: str = Field(
        "",
        alias="AGENT_LLM_API_KEY_SECRET",
        description="A Secrets Manager secret holding the API key, read when OPENAI_API_KEY is empty (deployed)",
    )
    llm_timeout_s: float = Field(60.0, alias="AGENT_LLM_TIMEOUT_S", description="Seconds a model call may take")
    llm_max_retries: int = Field(
        3,
        alias="AGENT_LLM_MAX_RETRIES",
        description="Retries of a model call that failed before any output (rate limits, 5xx, connection errors)",
    )
    azure_api_version: str = Field(
        "2024-10-21", alias="OPENAI_API_VERSION", description="The Azure OpenAI API version (`azure`)"
    )
    llm_fallback: StrList = Field(
        default_factory=list,
        alias="AGENT_LLM_FALLBACK",
        description="Further `provider:model` entries (split on the first colon; provider openai, azure or "
        "bedrock), tried in order when a call fails before any output; refused after the offline model",
    )

    auth_mode: Literal["none", "jwt", "iam"] = Field(
        "none",
        alias="AGENT_AUTH_MODE",
        description="Who the caller is: `none` (X-User-Id, else the bearer token, else local-user), `jwt` (a "
        "verified JWT's `sub`), `iam` (the IAM principal API Gateway verified)",
    )
    jwt_issuer: str = Field("", alias="AGENT_JWT_ISSUER", description="The JWTs' required `iss` (`jwt`)")
    jwt_audience: str = Field("", alias="AGENT_JWT_AUDIENCE", description="The JWTs' required `aud` (`jwt`)")
    jwt_jwks_url: str = Field(
        "", alias="AGENT_JWT_JWKS_URL", description="Where the JWT signing keys are fetched (`jwt`)"
    )
    jwt_jwks_timeout_s: float = Field(
        3.0,
        gt=0,
        alias="AGENT_JWT_JWKS_TIMEOUT_S",
        description="Seconds one fetch of the JWKS may wait on the network (`jwt`); while no key set could be "
        "fetched, tokens are answered 503 `jwks_unavailable`",
    )
    jwt_jwks_min_refresh_s: float = Field(
        60.0,
        ge=0,
        alias="AGENT_JWT_JWKS_MIN_REFRESH_S",
        description="Least seconds between two fetches of the JWKS (`jwt`): a token naming an unknown `kid` "
        "refetches the keys at most this often (failed fetches count); cached keys are refetched hourly",
    )

    tools_allowed: StrList = Field(
        default_factory=lambda: ["*"],
        alias="AGENT_TOOLS_ALLOWED",
        description="Tool names any agent may call (`*`: every one); others are denied `not_allowed`",
    )
    permissions_granted: StrList = Field(
        default_factory=lambda: ["*"],
        alias="AGENT_PERMISSIONS_GRANTED",
        description="Permissions granted to tools (`*`: all); a tool needing another is denied `missing_permission`",
    )
    tool_max_input_bytes: int = Field(
        16384, alias="AGENT_TOOL_MAX_INPUT_BYTES", description="Largest tool-call arguments, in UTF-8 bytes"
    )
    tool_max_output_bytes: int = Field(
        65536, alias="AGENT_TOOL_MAX_OUTPUT_BYTES", description="Largest tool result, in UTF-8 bytes of its JSON"
    )
    tool_timeout_ms: int = Field(
        10000, alias="AGENT_TOOL_TIMEOUT_MS", description="How long one tool call may run (a tool may set its own)"
    )
    tool_approval: Annotated[dict[str, Any], NoDecode] = Field(
        default_factory=dict,
        alias="AGENT_TOOL_APPROVAL",
        description="Approval policies every agent obeys, by tool name, as JSON: "
        '`{"http_get": {"when": {"arg": "url", "hostNotIn": ["example.com"]}}, "save_file": "always"}` '
        "(docs/approval.md); with an agent's own policy, a call needing either waits for approval. A bad rule "
        "is refused at start-up",
    )
    tool_approval_timeout_ms: int = Field(
        600000,
        ge=1000,
        alias="AGENT_TOOL_APPROVAL_TIMEOUT_MS",
        description="How long a tool call waits for a human's approval; then it does not run and the model is "
        "told it timed out",
    )
    http_allowed_hosts: StrList = Field(
        default_factory=list,
        alias="AGENT_HTTP_ALLOWED_HOSTS",
        description="Host names `http_get` may fetch even when they resolve to private or local addresses",
    )

    max_message_bytes: int = Field(
        32768,
        alias="AGENT_MAX_MESSAGE_BYTES",
        description="Largest message, input item or submit `params`, in UTF-8 bytes (413 `message_too_large`)",
    )
    memory_window: int = Field(
        20, alias="AGENT_MEMORY_WINDOW", description="Messages kept verbatim after the rolling summary"
    )
    memory_compact_after: int = Field(
        40,
        alias="AGENT_MEMORY_COMPACT_AFTER",
        description="Unsummarised messages after which older ones are folded into the rolling summary",
    )
    memory_max_prompt_tokens: int = Field(
        12000,
        alias="AGENT_MEMORY_MAX_PROMPT_TOKENS",
        description="Estimated prompt tokens the history may fill; older turns are dropped whole beyond it",
    )
    memory_embedder: Literal["hashing", "openai", "bedrock"] = Field(
        "hashing",
        alias="AGENT_MEMORY_EMBEDDER",
        description="How memory records are embedded: `hashing` (offline feature hashing, no model), `openai` "
        "(the configured endpoint's /v1/embeddings), `bedrock` (Titan Text Embeddings v2)",
    )
    memory_embedding_model: str = Field(
        "",
        alias="AGENT_MEMORY_EMBEDDING_MODEL",
        description="The embedding model; empty: `text-embedding-3-small` (openai), "
        "`amazon.titan-embed-text-v2:0` (bedrock)",
    )
    memory_embedding_dimensions: int = Field(
        1024,
        ge=64,
        le=3072,
        alias="AGENT_MEMORY_EMBEDDING_DIMENSIONS",
        description="Size of the memory vectors (Titan v2: 256, 512 or 1024); changing it re-embeds on read",
    )
    memory_recall_tokens: int = Field(
        800,
        ge=0,
        alias="AGENT_MEMORY_RECALL_TOKENS",
        description='Estimated tokens of remembered records a turn\'s prompt may get ("What you remember"); 0: none',
    )
    memory_recall_min_similarity: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        alias="AGENT_MEMORY_RECALL_MIN_SIMILARITY",
        description="The relevance floor of records added to a turn: a common word and at least this cosine",
    )
    tool_output_window_chars: int = Field(
        2000,
        alias="AGENT_MEMORY_TOOL_OUTPUT_CHARS",
        description="Characters of a tool result the prompt keeps (the stored result is whole)",
    )

    definitions_dir: str = Field(
        "", alias="AGENT_DEFINITIONS_DIR", description="A directory of agent YAML files, added to `main-agent`"
    )
    default_timezone: str = Field(
        "Asia/Shanghai",
        alias="AGENT_DEFAULT_TIMEZONE",
        description="The IANA zone of users whose request and profile name none (days, sessions, time queries); "
        "an unknown zone is refused at start-up",
    )
    usage_prices: dict[str, dict[str, float]] = Field(
        {"gpt-4.1-mini": {"input": 0.4, "output": 1.6, "cached": 0.1}},
        alias="AGENT_USAGE_PRICES",
        description="Estimated prices in USD per million tokens, by model, as JSON: "
        '`{"model": {"input": 0.4, "output": 1.6, "cached": 0.1}}` (cached: prompt tokens read from the cache); '
        "a model not listed costs 0 in the usage ledger",
    )
    usage_daily_token_budget: int = Field(
        0,
        ge=0,
        alias="AGENT_USAGE_DAILY_TOKEN_BUDGET",
        description="Tokens (prompt + completion) a user may spend per local day; 0: no budget. A user's "
        "LIMITS item overrides it",
    )
    usage_daily_cost_budget_usd: float = Field(
        0.0,
        ge=0,
        alias="AGENT_USAGE_DAILY_COST_BUDGET_USD",
        description="Estimated USD a user may spend per local day (from AGENT_USAGE_PRICES); 0: no budget",
    )
    usage_requests_per_minute: int = Field(
        0, ge=0, alias="AGENT_USAGE_REQUESTS_PER_MINUTE", description="Turns a user may start per minute; 0: no limit"
    )
    usage_reserve_tokens: int = Field(
        4096,
        ge=1,
        alias="AGENT_USAGE_RESERVE_TOKENS",
        description="Tokens a turn reserves against the daily budget before the model is called (settled to its "
        "actual use when it ends): a run's max tokens, the most a budget can be overshot by",
    )
    usage_limits_cache_s: int = Field(
        60, ge=0, alias="AGENT_USAGE_LIMITS_CACHE_S", description="Seconds a user's LIMITS item is cached in a process"
    )
    guardrail_id: str = Field(
        "",
        alias="AGENT_GUARDRAIL_ID",
        description="The Amazon Bedrock guardrail (id or ARN) that checks agents whose `guardrails.adapter` is "
        "`bedrock` (ApplyGuardrail); empty: such agents are refused at start-up",
    )
    guardrail_version: str = Field(
        "DRAFT", alias="AGENT_GUARDRAIL_VERSION", description="The Bedrock guardrail's version (a number or DRAFT)"
    )
    guardrail_holdback_chars: int = Field(
        200,
        ge=0,
        alias="AGENT_GUARDRAIL_HOLDBACK_CHARS",
        description="Characters of a streamed answer held back until checked by the agent's output guardrail, so "
        "a match split across deltas is caught before any of it is sent (the longest match caught)",
    )
    usage_handoff_delay_s: int = Field(
        30,
        ge=0,
        le=900,
        alias="AGENT_USAGE_HANDOFF_DELAY_S",
        description="A run's usage record whose ledger write still fails after its retries is queued again this "
        "many seconds later (doubling per hand-off, at most 900)",
    )
    idle_timeout_minutes: int = Field(
        30, alias="AGENT_IDLE_TIMEOUT_MINUTES", description="Idle minutes after which a chat's session ends"
    )
    frontend_submit_timeout_ms: int = Field(
        300000,
        alias="AGENT_FRONTEND_SUBMIT_TIMEOUT_MS",
        description="How long a run waits for the client to submit a frontend tool's result",
    )
    run_log_ttl_s: int = Field(
        86400,
        ge=1,
        alias="AGENT_RUN_LOG_TTL_S",
        description="Seconds a run's event log is kept after its events were written: the window in which a "
        "dropped stream resumes from any instance (GET /api/ap/runs/{runId}/events, /v1/responses/{id}?stream=true)",
    )
    run_log_flush_ms: int = Field(
        1000,
        ge=0,
        alias="AGENT_RUN_LOG_FLUSH_MS",
        description="Longest a sent event waits in its run's log buffer before the buffer is written (a batch is "
        "written sooner when it holds 25 events, and at once for a terminal or waiting event): a stream resumed on "
        "another instance lags the live run by at most this plus one poll (<= 1 s); shorter costs more writes for "
        "a slow stream (at most one per interval), 0 writes whenever the writer runs",
    )

    data_token_secret: str = Field(
        "",
        alias="AGENT_DATA_TOKEN_SECRET",
        repr=False,
        description="The key signing data links (a secret: never logged; at least 32 bytes, else PyJWT warns on "
        "each use); empty: the secret below, else (embedded storage) one generated once and kept in AGENT_DATA_DIR "
        "(`data-link.key`, mode 0600), else one per process",
    )
    data_token_secret_name: str = Field(
        "",
        alias="AGENT_DATA_TOKEN_SECRET_NAME",
        description="A Secrets Manager secret holding the data-link key (deployed)",
    )
    data_token_validation_enabled: bool = Field(
        True,
        alias="AGENT_DATA_TOKEN_VALIDATION_ENABLED",
        description="Whether a data link's token authorises a download; off: only the chat's owner may download",
    )

    turn_deadline_ms: int = Field(
        25000,
        alias="AGENT_TURN_DEADLINE_MS",
        description="Buffered routes end a turn `deadline_exceeded` (504) after this long (API Gateway stops at 29 s)",
    )
    run_heartbeat_ms: int = Field(
        10000,
        gt=0,
        alias="AGENT_RUN_HEARTBEAT_MS",
        description="A running turn renews its chat's lease this often, to 2.5 times this from now: a run that "
        "misses two renewals (its process died) frees the chat",
    )
    allow_clock_override: bool = Field(
        False,
        alias="AGENT_ALLOW_CLOCK_OVERRIDE",
        description="Let a request say what `now` is (`X-Agent-Now`); dev stage only, refused elsewhere",
    )
    cors_origins: StrList = Field(
        default_factory=list, alias="AGENT_CORS_ORIGINS", description="Browser origins allowed to call the API"
    )
    public_base_url: str = Field(
        "",
        alias="AGENT_PUBLIC_BASE_URL",
        description="Where clients reach the API (https://api.example.com/prod), for data links; empty: the "
        "gateway address and stage the request came through, else root-relative links (local)",
    )
    playground_enabled: bool = Field(
        False,
        alias="AGENT_PLAYGROUND_ENABLED",
        description="Serve the playground page at `/` on the chat function (the local server always does)",
    )
    max_body_bytes: int = Field(
        1048576,
        ge=1,
        alias="AGENT_MAX_BODY_BYTES",
        description="Largest request body, checked before any work (413 `request_too_large`)",
    )
    body_read_timeout_s: float = Field(
        30.0,
        gt=0,
        alias="AGENT_BODY_READ_TIMEOUT_S",
        description="Seconds a client may take to send a request body once its headers are in (408 "
        "`request_timeout`, then the connection is closed); on the local server also the most a request's "
        "headers may take (then the connection is closed)",
    )
    keep_alive_timeout_s: int = Field(
        5,
        ge=1,
        alias="AGENT_KEEP_ALIVE_TIMEOUT_S",
        description="Local server: seconds an idle keep-alive connection stays open between requests",
    )
    max_input_items: int = Field(
        500, ge=1, alias="AGENT_MAX_INPUT_ITEMS", description="Most input items in one request (`too_many_items`)"
    )
    max_instructions_bytes: int = Field(
        65536,
        ge=1,
        alias="AGENT_MAX_INSTRUCTIONS_BYTES",
        description="Largest `instructions`, in UTF-8 bytes (413 `instructions_too_large`)",
    )
    stage: str = Field(
        "prod",
        min_length=1,
        max_length=32,
        alias="AGENT_STAGE",
        description="`dev` enables the dev job routes and AGENT_ALLOW_CLOCK_OVERRIDE, never in Lambda "
        "(`agent-core serve` defaults to `dev`)",
    )
    stream_deadline_ms: int = Field(
        840000,
        alias="AGENT_STREAM_DEADLINE_MS",
        description="Streaming routes end with run.error `deadline_exceeded` after this long (below Lambda's 15 min)",
    )
    store_write_attempts: int = Field(
        5,
        alias="AGENT_STORE_WRITE_ATTEMPTS",
        description="Tries of a write that must not be lost (the end of a turn, taking the lease), backing off",
    )
    store_retry_base_ms: int = Field(
        100,
        alias="AGENT_STORE_RETRY_BASE_MS",
        description="The first back-off of those writes, doubling with jitter",
    )

    service_name: str = Field(
        "agent-core", alias="POWERTOOLS_SERVICE_NAME", description="The service name on log lines and metrics"
    )
    otel_enabled: bool = Field(
        False,
        alias="AGENT_OTEL_ENABLED",
        description="Record OpenTelemetry traces (GenAI conventions) and export them over OTLP/HTTP as the "
        "standard OTEL_EXPORTER_OTLP_* variables say; also on when OTEL_EXPORTER_OTLP_ENDPOINT is set (needs "
        "the `otel` extra or the ADOT layer)",
    )
    # The OpenTelemetry SDK's own variables, read here (as every setting is) to decide whether to trace; the
    # SDK's exporter reads the rest of OTEL_EXPORTER_OTLP_* itself.
    otel_sdk_disabled: bool = Field(False, alias="OTEL_SDK_DISABLED", description="OpenTelemetry's off switch")
    otel_exporter_otlp_endpoint: str = Field(
        "", alias="OTEL_EXPORTER_OTLP_ENDPOINT", description="OTLP endpoint (standard); set, it turns traces on"
    )
    otel_exporter_otlp_traces_endpoint: str = Field(
        "", alias="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", description="OTLP traces endpoint (standard); turns traces on"
    )
    otel_service_name: str = Field(
        "", alias="OTEL_SERVICE_NAME", description="The traces' service.name (standard); else POWERTOOLS_SERVICE_NAME"
    )
    otel_capture_content: bool = Field(
        False,
        alias="AGENT_OTEL_CAPTURE_CONTENT",
        description="Put message contents on model-call spans (gen_ai.input.messages / gen_ai.output.messages)",
    )
    lambda_function_name: str = Field(
        "",
        alias="AWS_LAMBDA_FUNCTION_NAME",
        description="Set by Lambda: its presence means the process runs in a Lambda function",
    )
    aws_region: str = Field("us-east-1", alias="AWS_REGION", description="The AWS region (set by Lambda)")
    lambda_exec_wrapper: str = Field(
        "",
        alias="AWS_LAMBDA_EXEC_WRAPPER",
        description="Set by the stack on the streaming function: the Lambda Web Adapter's wrapper. Only behind "
        "the adapter is `x-amzn-request-context` the gateway's request context",
    )
    lwa_invoke_mode: str = Field(
        "", alias="AWS_LWA_INVOKE_MODE", description="Set by the stack on the streaming function: the adapter's mode"
    )

    @field_validator(
        "tools_allowed", "permissions_granted", "http_allowed_hosts", "cors_origins", "llm_fallback", mode="before"
    )
    @classmethod
    def _lists(cls, value: object) -> object:
        return _split(value)

    @field_validator("tool_approval", mode="before")
    @classmethod
    def _approval_json(cls, value: object) -> object:
        if isinstance(value, str):
            return json.loads(value) if value.strip() else {}
        return value

    @field_validator("tool_approval")
    @classmethod
    def _approval_policies(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name, spec in value.items():
            try:
                parse_policy(spec)
            except ValueError as exc:
                raise ValueError(f"AGENT_TOOL_APPROVAL[{name!r}] is not an approval policy: {exc}") from exc
        return value

    @field_validator("llm_fallback")
    @classmethod
    def _fallback_entries(cls, value: list[str]) -> list[str]:
        for entry in value:
            provider, _, model = entry.partition(":")
            if provider not in FALLBACK_PROVIDERS or not model:
                raise ValueError(
                    f"AGENT_LLM_FALLBACK entry {entry!r} is not provider:model with provider one of "
                    f"{', '.join(FALLBACK_PROVIDERS)}"
                )
        return value

    @field_validator("default_timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        """Refused at start-up, not logged on each request that falls back to it."""
        from agent_core.domain.zones import known_zone

        if not known_zone(value):
            raise ValueError(f"{value!r} is not an IANA time zone name such as Asia/Shanghai, Europe/Paris or UTC")
        return value

    @model_validator(mode="after")
    def _fallback_after_a_real_model(self) -> Settings:
        """A fallback chain follows a provider's model: the offline model never fails, so nothing would reach it."""
        if self.llm_fallback and self.effective_llm_provider == "offline":
            raise ValueError(
                "AGENT_LLM_FALLBACK needs a model provider to fall back from, and the primary is the offline model "
                "(AGENT_LLM_PROVIDER=offline, or unset with no OPENAI_BASE_URL, OPENAI_API_KEY or "
                "AGENT_LLM_API_KEY_SECRET): set AGENT_LLM_PROVIDER (openai, azure or bedrock) and AGENT_MODEL, or "
                "unset AGENT_LLM_FALLBACK"
            )
        return self

    @model_validator(mode="after")
    def _dev_only(self) -> Settings:
        """Dev-only features refuse to start outside the dev stage, and in Lambda whatever the stage."""
        if self.allow_clock_override and not self.dev_features:
            where = "in a Lambda function" if self.in_lambda else f"with AGENT_STAGE={self.stage!r}"
            raise ValueError(
                f"AGENT_ALLOW_CLOCK_OVERRIDE is a dev-only feature and is refused {where}: "
                "unset it, or run the local server with AGENT_STAGE=dev"
            )
        return self

    @property
    def run_lease_ms(self) -> int:
        """How long a lease lasts from its last renewal: two missed heartbeats and a half."""
        return self.run_heartbeat_ms * LEASE_HEARTBEATS_X2 // 2

    @property
    def in_lambda(self) -> bool:
        return bool(self.lambda_function_name)

    @property
    def behind_web_adapter(self) -> bool:
        """A Lambda process served through the Lambda Web Adapter (its exec wrapper or invoke mode is set)."""
        return self.in_lambda and bool(self.lambda_exec_wrapper or self.lwa_invoke_mode)

    @property
    def dev_features(self) -> bool:
        """The dev job routes and the clock override: the dev stage only, and never in Lambda."""
        return self.stage == DEV_STAGE and not self.in_lambda

    @property
    def effective_storage(self) -> str:
        """Lambda always uses real AWS, whatever the variable says."""
        return "aws" if self.in_lambda else self.storage

    @property
    def effective_llm_provider(self) -> str:
        if self.llm_provider:
            return self.llm_provider
        if self.openai_base_url or self.openai_api_key or self.llm_api_key_secret:
            return "openai"
        return "offline"

    def fallback_chain(self) -> list[tuple[str, str]]:
        """AGENT_LLM_FALLBACK as (provider, model) pairs: `bedrock:amazon.nova-pro-v1:0` splits on its first colon."""
        return [(entry.partition(":")[0], entry.partition(":")[2]) for entry in self.llm_fallback]

    def environment(self) -> Mapping[str, str]:
        """The process environment, for `${secret:NAME}` values resolved locally (MCP server settings)."""
        return os.environ

    def data_token_key(self) -> str:
        """The data-token key: the value, else the Secrets Manager secret, else the one kept in the embedded
        store's data directory (links survive a restart), else one generated per process (memory storage)."""
        if self.data_token_secret:
            return self.data_token_secret
        if self.data_token_secret_name:
            from agent_core.secrets import read_secret

            return read_secret(self.data_token_secret_name, ("secret", "key", "value"))
        if self.effective_storage == "embedded":
            from agent_core.store.link_key import data_link_key

            return data_link_key(self.data_dir)
        return _generated_secret()


@lru_cache(maxsize=1)
def _generated_secret() -> str:
    return secrets.token_urlsafe(32)


def local_server_settings() -> Settings:
    """The settings of `agent-core serve`: as `Settings()`, but the stage is `dev` unless AGENT_STAGE says."""
    if "AGENT_STAGE" in os.environ:
        return Settings()
    return Settings(AGENT_STAGE=DEV_STAGE)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, validated once at cold start."""
    return Settings()
