"""One Lambda function per registry entry: code, layer, log group, role, grants, triggers, Function URL."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as scheduler_targets
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.components import removal_policy, retention
from infra.components.bedrock import bedrock_statements, guardrail_statement, nag_wildcards
from infra.components.layer import architecture_for, runtime_for
from infra.components.queue import WorkQueue
from infra.components.storage import Storage
from infra.nag import acknowledge
from infra.registry import FunctionSpec, Need
from infra.settings import InfraSettings

REPO_ROOT = Path(__file__).resolve().parents[2]
METRICS_NAMESPACE = "AgentCore"
SERVICE_NAME = "agent-core"
LWA_ACCOUNT = "753240598075"
LWA_LAYER_NAME = {"arm64": "LambdaAdapterLayerArm64", "x86_64": "LambdaAdapterLayerX86"}
# Only the `functions` package ships as function code (agent_core and the dependencies are the layer).
FUNCTION_CODE_EXCLUDES = ["/*", "!/functions/", "__pycache__/", "*.pyc"]
# The IAM actions of each need (infra.registry.Need), per resource: the only place actions are named.
# No function scans, describes the table, describes a secret, or looks up the queue's URL or attributes.
TABLE_ACTIONS: dict[Need, tuple[str, ...]] = {
    Need.TABLE_QUERY: ("dynamodb:Query",),
    Need.TABLE_GET: ("dynamodb:GetItem",),
    Need.TABLE_READ: ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"),
    Need.TABLE_UPDATE: ("dynamodb:UpdateItem",),
    Need.TABLE_WRITE: ("dynamodb:PutItem", "dynamodb:UpdateItem"),
    Need.TABLE_DELETE: ("dynamodb:DeleteItem", "dynamodb:BatchWriteItem"),  # BatchWriteItem only deletes here
    # AWS authorises TransactWriteItems per item (PutItem / UpdateItem / DeleteItem of the other needs) and
    # knows no `dynamodb:TransactWriteItems` action, so this grants nothing in AWS; moto's IAM enforcement
    # checks the API's own name, and the deployed-emulation tests need it.
    Need.TABLE_TRANSACT: ("dynamodb:TransactWriteItems",),
}
# Object actions on `<bucket>/*`, bucket actions on the bucket. GetObject also authorises HEAD and the
# presigned GETs the data function hands out; ListBucket makes a missing key answer 404, not 403.
OBJECT_ACTIONS: dict[Need, tuple[str, ...]] = {
    Need.BUCKET_READ: ("s3:GetObject",),
    Need.BUCKET_WRITE: ("s3:PutObject",),
    Need.BUCKET_DELETE: ("s3:DeleteObject",),  # DeleteObjects is authorised per object by DeleteObject
}
BUCKET_ACTIONS: dict[Need, tuple[str, ...]] = {
    Need.BUCKET_READ: ("s3:ListBucket",),
    # Deleting a prefix lists it first. DeleteObject on the bucket ARN grants nothing in AWS (the action
    # applies to objects) but is what moto checks a DeleteObjects request against.
    Need.BUCKET_DELETE: ("s3:ListBucket", "s3:DeleteObject"),
}
QUEUE_ACTIONS: dict[Need, tuple[str, ...]] = {
    Need.QUEUE_SEND: ("sqs:SendMessage",),
    # AWS authorises SendMessageBatch as sqs:SendMessage and knows no `sqs:SendMessageBatch` action;
    # moto checks the API's own name (the deployed-emulation tests need it).
    Need.QUEUE_SEND_BATCH: ("sqs:SendMessageBatch",),
}
SECRET_ACTIONS = ("secretsmanager:GetSecretValue",)  # Powertools get_secret: GetSecretValue only
# What Lambda's SQS poller does with the consumer's execution role (AWSLambdaSQSQueueExecutionRole's
# queue actions); the worker's own code never calls the queue's attributes or URL.
CONSUME_ACTIONS = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")


def need_actions(needs: frozenset[Need]) -> dict[str, list[str]]:
    """The IAM actions of `needs`, by resource kind (table, object, bucket, queue, secret): sorted, unique."""
    kinds = {"table": TABLE_ACTIONS, "object": OBJECT_ACTIONS, "bucket": BUCKET_ACTIONS, "queue": QUEUE_ACTIONS}
    out = {kind: sorted({a for need in needs for a in mapping.get(need, ())}) for kind, mapping in kinds.items()}
    out["secret"] = list(SECRET_ACTIONS) if needs & {Need.LLM_SECRET, Need.DATA_TOKEN_SECRET} else []
    return {kind: actions for kind, actions in out.items() if actions}


def function_code() -> lambda_.Code:
    """The repository root minus everything but functions/ (handler `functions.<name>.handler.handler`)."""
    return lambda_.Code.from_asset(str(REPO_ROOT), exclude=FUNCTION_CODE_EXCLUDES, ignore_mode=cdk.IgnoreMode.GIT)


class AgentFunctions(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: InfraSettings,
        specs: Sequence[FunctionSpec],
        layer: lambda_.ILayerVersion,
        storage: Storage,
        llm_secret: secretsmanager.ISecret | None,
        data_token_secret: secretsmanager.ISecret | None,
        queue: WorkQueue | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.settings = settings
        self.storage = storage
        self.llm_secret = llm_secret
        self.data_token_secret = data_token_secret
        self.queue = queue
        self.functions: dict[str, lambda_.Function] = {}
        self.urls: dict[str, lambda_.FunctionUrl] = {}
        code = function_code()
        removal = removal_policy(settings)
        for spec in specs:
            self._add(spec, code, layer, removal)

    def _environment(self, spec: FunctionSpec) -> dict[str, str]:
        s = self.settings
        env = {
            "AGENT_STORAGE": "aws",
            "AGENT_CORS_ORIGINS": ",".join(s.cors_origins),
            "AGENT_MODEL": s.model,
            "AGENT_AUTH_MODE": s.auth_mode,
            "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
            "POWERTOOLS_LOG_LEVEL": s.log_level,
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
        }
        if s.auth_mode == "jwt":
            env |= {"AGENT_JWT_ISSUER": s.jwt_issuer, "AGENT_JWT_JWKS_URL": s.jwt_jwks_url}
            if s.jwt_audience:
                env["AGENT_JWT_AUDIENCE"] = s.jwt_audience
        if spec.uses_table:
            env["AGENT_TABLE_NAME"] = self.storage.table.table_name
        if spec.uses_bucket:
            env["AGENT_DATA_BUCKET"] = self.storage.bucket.bucket_name
        if spec.sends_jobs and self.queue is not None:
            env["AGENT_WORK_QUEUE_URL"] = self.queue.queue.queue_url
        if Need.LLM_INVOKE in spec.needs:
            env["AGENT_LLM_PROVIDER"] = s.llm_provider
            usage = {
                "AGENT_USAGE_DAILY_TOKEN_BUDGET": s.usage_daily_token_budget,
                "AGENT_USAGE_DAILY_COST_BUDGET_USD": s.usage_daily_cost_budget_usd,
                "AGENT_USAGE_REQUESTS_PER_MINUTE": s.usage_requests_per_minute,
            }
            env |= {name: str(value) for name, value in usage.items() if value}
            if s.tool_approval:  # the functions that run tools (the app checks each rule at start)
                env["AGENT_TOOL_APPROVAL"] = json.dumps(s.tool_approval, separators=(",", ":"), sort_keys=True)
            if s.llm_fallback:
                env["AGENT_LLM_FALLBACK"] = ",".join(s.llm_fallback)
            if s.guardrail_id:
                env |= {"AGENT_GUARDRAIL_ID": s.guardrail_id, "AGENT_GUARDRAIL_VERSION": s.guardrail_version}
            if s.guardrail_holdback_chars is not None:
                env["AGENT_GUARDRAIL_HOLDBACK_CHARS"] = str(s.guardrail_holdback_chars)
        if Need.LLM_SECRET in spec.needs and self.llm_secret is not None:
            env["AGENT_LLM_API_KEY_SECRET"] = self.llm_secret.secret_name
            if s.openai_base_url:
                env["OPENAI_BASE_URL"] = s.openai_base_url
        if Need.DATA_TOKEN_SECRET in spec.needs and self.data_token_secret is not None:
            env["AGENT_DATA_TOKEN_SECRET_NAME"] = self.data_token_secret.secret_name
        if spec.streaming:
            # The Lambda Web Adapter runs the handler script (uvicorn) and streams its HTTP response.
            env |= {"AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap", "AWS_LWA_INVOKE_MODE": "response_stream"}
        return env | dict(spec.environment)

    def _role(self, spec: FunctionSpec, log_group: logs.ILogGroup) -> iam.Role:
        """The execution role: writes to its own log group only (no AWSLambdaBasicExecutionRole)."""
        role = iam.Role(
            self,
            f"{spec.construct_id}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"agent-core {spec.name} function",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group.log_group_arn],
            )
        )
        return role

    def _grant(self, spec: FunctionSpec, fn: lambda_.Function, role: iam.Role) -> None:
        """Explicit statements with exactly the actions of the entry's needs (no CDK grant helpers)."""
        table, bucket = self.storage.table, self.storage.bucket
        actions = need_actions(spec.needs)
        if "table" in actions:
            role.add_to_policy(
                iam.PolicyStatement(actions=actions["table"], resources=[table.table_arn, f"{table.table_arn}/index/*"])
            )
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::<{_logical_ref(table)}.Arn>/index/*]",
                "Queries on the table's global secondary indexes (all defined in agent_core.store.schema); "
                "the wildcard covers only this table's indexes.",
            )
        if "object" in actions:
            role.add_to_policy(iam.PolicyStatement(actions=actions["object"], resources=[bucket.arn_for_objects("*")]))
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::<{_logical_ref(bucket)}.Arn>/*]",
                "Object keys are per chat and per user (data files, large snapshots, tmp/): the function reads "
                "and writes objects of this one bucket, and nothing else.",
            )
        if "bucket" in actions:
            role.add_to_policy(iam.PolicyStatement(actions=actions["bucket"], resources=[bucket.bucket_arn]))
        secrets = [
            secret
            for need, secret in ((Need.LLM_SECRET, self.llm_secret), (Need.DATA_TOKEN_SECRET, self.data_token_secret))
            if need in spec.needs and secret is not None
        ]
        for secret in secrets:  # not grant_read: it adds DescribeSecret, which Powertools never calls
            role.add_to_policy(iam.PolicyStatement(actions=list(SECRET_ACTIONS), resources=[secret.secret_arn]))
        if Need.LLM_INVOKE in spec.needs and self.settings.bedrock_models:
            for statement in bedrock_statements(self.settings.bedrock_models):
                role.add_to_policy(statement)
            for arn in nag_wildcards(self.settings.bedrock_models):
                acknowledge(
                    role,
                    f"AwsSolutions-IAM5[Resource::{arn}]",
                    "A cross-Region inference profile routes each request to the model in one of the Regions it "
                    "names: the role may invoke that one model in any Region, and only through this profile "
                    "(condition bedrock:InferenceProfileArn). No other model is granted.",
                )
        if Need.LLM_INVOKE in spec.needs and self.settings.guardrail_id:
            role.add_to_policy(guardrail_statement(self.settings.guardrail_id))
        if self.queue is not None and "queue" in actions:
            # not grant_send_messages: it adds GetQueueAttributes and GetQueueUrl, which no function calls
            role.add_to_policy(iam.PolicyStatement(actions=actions["queue"], resources=[self.queue.queue.queue_arn]))
        if spec.consumes_queue and self.queue is not None:
            role.add_to_policy(
                iam.PolicyStatement(actions=list(CONSUME_ACTIONS), resources=[self.queue.queue.queue_arn])
            )
            # An event source mapping of our own: SqsEventSource would add grant_consume_messages (with
            # ChangeMessageVisibility and GetQueueUrl, which the poller does not need).
            fn.add_event_source_mapping(
                "WorkQueueSource",
                event_source_arn=self.queue.queue.queue_arn,
                batch_size=10,
                report_batch_item_failures=True,
                # Bounded concurrency: the worker never floods the LLM provider or the table.
                max_concurrency=self.settings.worker_max_concurrency,
            )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray tracing (active): xray:PutTraceSegments and xray:PutTelemetryRecords support no "
            "resource-level permissions, so CDK grants them on '*'; no other statement uses '*'.",
        )

    def _add(
        self, spec: FunctionSpec, code: lambda_.Code, layer: lambda_.ILayerVersion, removal: cdk.RemovalPolicy
    ) -> None:
        s = self.settings
        cid = spec.construct_id
        log_group = logs.LogGroup(
            self,
            f"{cid}Logs",
            retention=retention(s),
            removal_policy=removal,
        )
        role = self._role(spec, log_group)
        layers = [layer]
        if spec.streaming:
            arn = (
                f"arn:{cdk.Aws.PARTITION}:lambda:{cdk.Aws.REGION}:{LWA_ACCOUNT}:layer:"
                f"{LWA_LAYER_NAME[s.architecture]}:{s.lwa_layer_version}"
            )
            layers.append(lambda_.LayerVersion.from_layer_version_arn(self, f"{cid}WebAdapter", arn))
        fn = lambda_.Function(
            self,
            cid,
            description=spec.description,
            runtime=runtime_for(s),
            architecture=architecture_for(s),
            handler=spec.handler,
            code=code,
            layers=layers,
            memory_size=spec.memory_mb,
            timeout=cdk.Duration.seconds(spec.timeout_s),
            environment=self._environment(spec),
            tracing=lambda_.Tracing.ACTIVE,
            log_group=log_group,
            role=role,
        )
        self._grant(spec, fn, role)
        acknowledge(
            fn,
            "AwsSolutions-L1",
            f"The runtime is pinned to python{s.python_runtime} (-c pythonRuntime) because the layer's wheels "
            "and bytecode are built for that exact version; it is changed together with the layer.",
        )
        if spec.schedule is not None:
            self._schedule(spec, fn)
        if spec.is_http:
            self.urls[spec.name] = fn.add_function_url(
                auth_type=lambda_.FunctionUrlAuthType.AWS_IAM
                if s.auth_mode == "iam"
                else lambda_.FunctionUrlAuthType.NONE,
                invoke_mode=lambda_.InvokeMode.RESPONSE_STREAM if spec.streaming else lambda_.InvokeMode.BUFFERED,
                cors=lambda_.FunctionUrlCorsOptions(
                    allowed_origins=list(s.cors_origins),
                    allowed_methods=[lambda_.HttpMethod.ALL],
                    allowed_headers=["authorization", "content-type", "x-request-id", "x-user-id", "last-event-id"],
                    max_age=cdk.Duration.hours(1),
                )
                if s.cors_origins
                else None,
            )
        self.functions[spec.name] = fn

    def _schedule(self, spec: FunctionSpec, fn: lambda_.Function) -> None:
        assert spec.schedule is not None
        sched = spec.schedule
        role = iam.Role(
            self,
            f"{spec.construct_id}ScheduleRole",
            assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com"),
            description=f"EventBridge Scheduler invoking agent-core {spec.name}",
        )
        scheduler.Schedule(
            self,
            f"{spec.construct_id}Schedule",
            description=f"agent-core {spec.name}",
            schedule=scheduler.ScheduleExpression.cron(
                minute=sched.minute, hour=sched.hour, time_zone=cdk.TimeZone.of(sched.time_zone)
            ),
            target=scheduler_targets.LambdaInvoke(
                fn,
                input=scheduler.ScheduleTargetInput.from_object(
                    {"scheduledTime": scheduler.ContextAttribute.scheduled_time}
                ),
                role=role,
                # A missed run is caught up by the next one (the jobs are idempotent): retry briefly.
                retry_attempts=2,
                max_event_age=cdk.Duration.hours(1),
            ),
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::<{_logical_ref(fn)}.Arn>:*]",
            "Scheduler's invoke grant covers the function and its versions/aliases (ARN:*) of this one "
            "function only; the schedule always invokes $LATEST.",
        )


def _logical_ref(construct: Construct) -> str:
    """The logical id cdk-nag prints for a resource's `Fn::GetAtt` (e.g. `StorageTable1234ABCD`)."""
    child = construct.node.default_child
    assert isinstance(child, cdk.CfnElement)
    return cdk.Stack.of(construct).get_logical_id(child)
