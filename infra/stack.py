"""The agent-core stack: storage, the LLM key secret, the layer, the registry's functions, front doors, monitoring."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.components import pascal, removal_policy
from infra.components.api import RestFrontDoor
from infra.components.functions import AgentFunctions
from infra.components.layer import AgentCoreLayer
from infra.components.monitoring import Monitoring
from infra.components.queue import WorkQueue
from infra.components.storage import Storage
from infra.nag import acknowledge
from infra.registry import FUNCTIONS, FunctionSpec, Need
from infra.settings import InfraSettings

# What the LLM key secret holds until the operator puts the key: a fixed, plain (non-JSON) string that says
# what it is. It is no secret (it is in the template); the app reads a value starting with "{" as a JSON
# object, so a generated random placeholder could have been misread as one.
LLM_KEY_PLACEHOLDER = "placeholder-put-the-llm-api-key-here"


class AgentCoreStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: InfraSettings,
        specs: Sequence[FunctionSpec] = FUNCTIONS,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.settings = settings
        self.specs = tuple(specs)
        names = [spec.name for spec in self.specs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate function names in the registry: {names}")

        self.storage = Storage(self, "Storage", settings=settings)

        # Secrets get CloudFormation-generated names (outputs): a fixed name would block re-deploying after
        # `cdk destroy` (a deleted secret keeps its name through its recovery window; a retained one forever).
        # The API key of an OpenAI-compatible provider; Bedrock authenticates with the functions' roles.
        self.llm_secret: secretsmanager.Secret | None = None
        if settings.needs_llm_key:
            self.llm_secret = secretsmanager.Secret(
                self,
                "LlmApiKey",
                description="The LLM provider's API key (plain string); set with aws secretsmanager put-secret-value",
                secret_string_value=cdk.SecretValue.unsafe_plain_text(LLM_KEY_PLACEHOLDER),
                removal_policy=removal_policy(settings),
            )
            acknowledge(
                self.llm_secret,
                "AwsSolutions-SMG4",
                "A third-party LLM provider's API key: it is issued and revoked in the provider's console, so "
                "Secrets Manager cannot rotate it; rotate by putting a new value (functions re-read within 5 min).",
            )

        self.data_token_secret: secretsmanager.Secret | None = None
        if any(Need.DATA_TOKEN_SECRET in spec.needs for spec in self.specs):
            self.data_token_secret = secretsmanager.Secret(
                self,
                "DataTokenKey",
                description="The HMAC key that signs and verifies data-file links (generated)",
                generate_secret_string=secretsmanager.SecretStringGenerator(
                    password_length=64, exclude_punctuation=True
                ),
                removal_policy=removal_policy(settings),
            )
            acknowledge(
                self.data_token_secret,
                "AwsSolutions-SMG4",
                "Rotating the data-link signing key invalidates every link already handed out; rotate it "
                "deliberately with put-secret-value (functions re-read it within 5 minutes).",
            )

        consumers = [spec for spec in self.specs if spec.consumes_queue]
        self.queue: WorkQueue | None = None
        if consumers or any(spec.sends_jobs for spec in self.specs):
            timeout = max((spec.timeout_s for spec in consumers), default=60)
            self.queue = WorkQueue(self, "WorkQueue", consumer_timeout_s=timeout)

        self.layer = AgentCoreLayer(self, "AgentCoreLayer", settings=settings)
        self.functions = AgentFunctions(
            self,
            "Functions",
            settings=settings,
            specs=self.specs,
            layer=self.layer.layer,
            storage=self.storage,
            llm_secret=self.llm_secret,
            data_token_secret=self.data_token_secret,
            queue=self.queue,
        )
        self.front_door = RestFrontDoor(
            self, "RestApi", settings=settings, specs=self.specs, functions=self.functions.functions
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            settings=settings,
            functions=self.functions.functions,
            api=self.front_door.api,
            dead_letters=self.queue.dead_letters if self.queue else None,
        )

        cdk.CfnOutput(self, "RestApiUrl", value=self.front_door.api.url, description="REST API base URL (stage)")
        for name, url in self.functions.urls.items():
            cdk.CfnOutput(self, f"{pascal(name)}FunctionUrl", value=url.url, description=f"{name} Function URL")
        cdk.CfnOutput(self, "TableName", value=self.storage.table.table_name)
        cdk.CfnOutput(self, "DataBucketName", value=self.storage.bucket.bucket_name)
        if self.llm_secret is not None:
            cdk.CfnOutput(self, "LlmApiKeySecretName", value=self.llm_secret.secret_name)
        if self.data_token_secret is not None:
            cdk.CfnOutput(self, "DataTokenSecretName", value=self.data_token_secret.secret_name)
        if self.queue is not None:
            cdk.CfnOutput(self, "WorkQueueUrl", value=self.queue.queue.queue_url)
        cdk.Tags.of(self).add("project", "agent-core")
        cdk.Tags.of(self).add("stage", settings.stage)
