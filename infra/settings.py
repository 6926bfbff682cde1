"""One typed settings object for the CDK app, read from cdk.json context and `-c key=value` flags.

Every field has a camelCase context key (its alias): `cdk synth -c stage=prod -c authMode=jwt ...`,
or the `context` block of cdk.json. Values given with `-c` arrive as strings and are coerced.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

# CloudWatch Logs accepts only these retention periods (days).
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
DEV_STAGE = "dev"
# The Lambda Web Adapter's public layer (account 753240598075, LambdaAdapterLayerArm64 / LambdaAdapterLayerX86,
# the same version number for both): version 26 is the adapter's 1.0 release, the one its README lists.
# Versions up to 25 are the 0.x releases (25 = 0.9.1) and are refused.
LWA_LAYER_VERSION = 26
LWA_1_0_LAYER_VERSION = 26


LLM_PROVIDERS = ("openai", "azure", "bedrock")
OPENAI_COMPATIBLE = ("openai", "azure")


class SettingsError(ValueError):
    """The context does not describe a deployable stack; the message says what to change."""


class _Node(Protocol):
    def try_get_context(self, key: str) -> Any: ...


class InfraSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    stage: str = Field(DEV_STAGE, alias="stage", description="deployment stage; names the stack AgentCore-<stage>")
    architecture: Literal["arm64", "x86_64"] = Field("arm64", alias="architecture")
    python_runtime: Literal["3.12", "3.13"] = Field("3.12", alias="pythonRuntime")
    model: str = Field("gpt-4.1-mini", alias="model", min_length=1)
    openai_base_url: str = Field("", alias="openaiBaseUrl")
    auth_mode: Literal["none", "jwt", "iam"] = Field("none", alias="authMode")
    jwt_issuer: str = Field("", alias="jwtIssuer")
    jwt_audience: str = Field("", alias="jwtAudience")
    jwt_jwks_url: str = Field("", alias="jwtJwksUrl")
    lwa_layer_version: int = Field(LWA_LAYER_VERSION, alias="lwaLayerVersion")
    cors_origins: tuple[str, ...] = Field((), alias="corsOrigins")
    worker_max_concurrency: int = Field(5, ge=2, le=1000, alias="workerMaxConcurrency")
    throttling_rate_limit: float = Field(20.0, alias="throttlingRateLimit", gt=0)
    throttling_burst_limit: int = Field(40, alias="throttlingBurstLimit", gt=0)
    log_retention_days: int = Field(30, alias="logRetentionDays")
    boto3_version: str = Field("", alias="boto3Version", description="pin boto3 into the layer; empty: the runtime's")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", alias="logLevel")
    # Per-user defaults of the usage budgets and rate limit (0: none; a user's LIMITS item overrides them).
    usage_daily_token_budget: int = Field(0, ge=0, alias="usageDailyTokenBudget")
    usage_daily_cost_budget_usd: float = Field(0.0, ge=0, alias="usageDailyCostBudgetUsd")
    usage_requests_per_minute: int = Field(0, ge=0, alias="usageRequestsPerMinute")
    # Alarms: refused turns (budget or rate limit) per 5 minutes, and the estimated spend per hour.
    budget_denials_alarm: int = Field(20, ge=1, alias="budgetDenialsAlarm")
    spend_alarm_usd_per_hour: float = Field(10.0, gt=0, alias="spendAlarmUsdPerHour")
    # The model provider of `model`; `bedrock`: a Bedrock model id, inference profile id or ARN.
    llm_provider: Literal["openai", "azure", "bedrock"] = Field("openai", alias="llmProvider")
    # Further `provider:model` entries tried in order when a call fails before any output.
    llm_fallback: tuple[str, ...] = Field((), alias="llmFallback")
    # Approval policies every agent obeys, by tool name (AGENT_TOOL_APPROVAL; docs/approval.md): a JSON object.
    tool_approval: dict[str, Any] = Field(default_factory=dict, alias="toolApproval")

    @field_validator("stage")
    @classmethod
    def _stage_name(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9-]{0,15}", value):
            raise ValueError("stage must be 1-16 lowercase letters, digits or '-', starting with a letter")
        return value

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("llm_fallback", mode="before")
    @classmethod
    def _split_fallback(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("llm_fallback")
    @classmethod
    def _fallback_entries(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            provider, _, model = entry.partition(":")
            if provider not in LLM_PROVIDERS or not model:
                raise ValueError(f"llmFallback entry {entry!r} must be provider:model, provider one of {LLM_PROVIDERS}")
        return value

    @field_validator("tool_approval", mode="before")
    @classmethod
    def _approval_json(cls, value: object) -> object:
        if isinstance(value, str):  # `-c toolApproval='{"save_file": "always"}'`
            try:
                return json.loads(value) if value.strip() else {}
            except ValueError as exc:
                raise ValueError(f"toolApproval is not JSON: {exc}") from exc
        return value

    @field_validator("tool_approval")
    @classmethod
    def _approval_policies(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name, spec in value.items():
            if spec not in ("never", "always") and not (isinstance(spec, dict) and "when" in spec):
                raise ValueError(f"toolApproval[{name!r}] must be never, always or {{when: <rule>}}")
        return value

    @field_validator("lwa_layer_version")
    @classmethod
    def _web_adapter_1_0(cls, value: int) -> int:
        if value < LWA_1_0_LAYER_VERSION:
            raise ValueError(
                f"lwaLayerVersion {value} is a Lambda Web Adapter release before 1.0 (layer version "
                f"{LWA_1_0_LAYER_VERSION}); use {LWA_LAYER_VERSION} or a later version the adapter publishes"
            )
        return value

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"logRetentionDays must be one of {LOG_RETENTION_DAYS}")
        return value

    @field_validator("boto3_version")
    @classmethod
    def _boto3_version(cls, value: str) -> str:
        if value and not re.fullmatch(r"\d+\.\d+(\.\d+)?", value):
            raise ValueError("boto3Version must be a release number such as 1.40.0")
        return value

    @model_validator(mode="after")
    def _deployable(self) -> InfraSettings:
        if self.auth_mode == "none" and self.stage != DEV_STAGE:
            raise ValueError(
                f"authMode 'none' is refused for stage '{self.stage}': it trusts any X-User-Id header and is "
                f"allowed only in the '{DEV_STAGE}' stage. Use -c authMode=jwt (with jwtIssuer, jwtAudience, "
                "jwtJwksUrl) or -c authMode=iam."
            )
        if self.auth_mode == "jwt":
            missing = [
                alias
                for alias, value in (("jwtIssuer", self.jwt_issuer), ("jwtJwksUrl", self.jwt_jwks_url))
                if not value
            ]
            if missing:
                raise ValueError(f"authMode 'jwt' needs {', '.join(missing)} (context keys)")
        return self

    @property
    def is_dev(self) -> bool:
        return self.stage == DEV_STAGE

    def llm_chain(self) -> list[tuple[str, str]]:
        """The model and its fallbacks as (provider, model); a fallback splits on its first colon."""
        return [
            (self.llm_provider, self.model),
            *((e.partition(":")[0], e.partition(":")[2]) for e in self.llm_fallback),
        ]

    @property
    def bedrock_models(self) -> list[str]:
        """The Bedrock model ids of the chain, in order, once each (the functions may invoke exactly these)."""
        return list(dict.fromkeys(model for provider, model in self.llm_chain() if provider == "bedrock"))

    @property
    def needs_llm_key(self) -> bool:
        """An OpenAI-compatible provider is in the chain: the stack holds its API key in a secret."""
        return any(provider in OPENAI_COMPATIBLE for provider, _ in self.llm_chain())

    @property
    def stack_name(self) -> str:
        return f"AgentCore-{self.stage}"

    @classmethod
    def context_keys(cls) -> list[str]:
        return [field.alias or name for name, field in cls.model_fields.items()]

    @classmethod
    def from_context(cls, node: _Node) -> InfraSettings:
        """The settings from a construct node's context (cdk.json `context` and `-c` flags)."""
        values = {key: node.try_get_context(key) for key in cls.context_keys()}
        return cls.from_mapping({key: value for key, value in values.items() if value is not None})

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> InfraSettings:
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg'].removeprefix('Value error, ')}"
                for err in exc.errors()
            )
            raise SettingsError(f"invalid CDK context: {problems}") from exc
