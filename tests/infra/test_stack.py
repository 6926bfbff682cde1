"""The CDK stack, synthesized once per variant (asset bundling skipped): shape, security, cdk-nag, cfn-lint."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks

from agent_core.store import schema
from infra.app import build_app
from infra.components.functions import FUNCTION_CODE_EXCLUDES, REPO_ROOT
from infra.registry import FUNCTIONS, FunctionSpec, Need, Route, Schedule, function_directories
from infra.settings import InfraSettings, SettingsError
from infra.stack import AgentCoreStack

SKIP_BUNDLING = {"aws:cdk:bundling-stacks": []}
PROD_JWT = {
    "stage": "prod",
    "authMode": "jwt",
    "jwtIssuer": "https://issuer.example.com/",
    "jwtAudience": "agent-core",
    "jwtJwksUrl": "https://issuer.example.com/.well-known/jwks.json",
    "corsOrigins": "https://app.example.com,https://admin.example.com",
}
PROD_IAM = {"stage": "prod", "authMode": "iam", "architecture": "x86_64", "corsOrigins": ["https://app.example.com"]}
# Functions still to come, to prove the registry grows by one entry each: those not in FUNCTIONS yet
# (the worker and the scheduled jobs are real entries now, so the grown variant synthesizes them as such).
_PLANNED = (
    FunctionSpec(name="worker", description="jobs", timeout_s=600, consumes_queue=True, needs=frozenset(Need)),
    FunctionSpec(
        name="daily_summary",
        description="hourly",
        timeout_s=120,
        needs=frozenset({Need.TABLE_QUERY, Need.QUEUE_SEND, Need.QUEUE_SEND_BATCH}),
        schedule=Schedule(minute="30", hour="*", time_zone="Etc/UTC"),
    ),
)
FUTURE = tuple(spec for spec in _PLANNED if spec.name not in {s.name for s in FUNCTIONS})
# cfn-lint warnings the templates are known to raise; each is justified in docs/infrastructure.md.
KNOWN_WARNINGS = {"W3005"}
# W3037 (unknown IAM action) is expected for exactly these: the API names moto's IAM enforcement checks
# where AWS authorises the call through other actions (infra.components.functions TABLE/QUEUE_ACTIONS).
EMULATOR_ACTIONS = {"transactwriteitems", "sendmessagebatch"}


@dataclass
class Synth:
    app: cdk.App
    stack: AgentCoreStack
    template: Template

    @property
    def json(self) -> dict[str, Any]:
        return self.template.to_json()

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.json["Resources"].items() if v["Type"] == type_}


def _app(context: dict[str, Any] | None = None) -> cdk.App:
    return cdk.App(context={**SKIP_BUNDLING, **(context or {})}, builtin_cloud_formation_validation=False)


def _synth(context: dict[str, Any] | None = None, specs: tuple[FunctionSpec, ...] | None = None) -> Synth:
    app = _app(context)
    if specs is None:
        app, stack = build_app(app, nag=False)
    else:
        settings = InfraSettings.from_context(app.node)
        stack = AgentCoreStack(app, settings.stack_name, settings=settings, specs=specs)
    return Synth(app, stack, Template.from_stack(stack))


@pytest.fixture(scope="module")
def dev() -> Synth:
    return _synth()


@pytest.fixture(scope="module")
def prod_jwt() -> Synth:
    return _synth(PROD_JWT)


@pytest.fixture(scope="module")
def grown() -> Synth:
    """Production with IAM auth and the registry grown by the functions still to come."""
    return _synth(PROD_IAM, FUNCTIONS + FUTURE)


def _fn(synth: Synth, name: str) -> tuple[str, dict[str, Any]]:
    handler = next(s for s in (*FUNCTIONS, *FUTURE) if s.name == name).handler
    found = [
        (k, v) for k, v in synth.resources("AWS::Lambda::Function").items() if v["Properties"]["Handler"] == handler
    ]
    assert len(found) == 1, f"one function with handler {handler}"
    return found[0]


def _ref(logical_id: str) -> dict[str, Any]:
    return {"Ref": logical_id}


def _arn(logical_id: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def _only(synth: Synth, type_: str) -> tuple[str, dict[str, Any]]:
    items = list(synth.resources(type_).items())
    assert len(items) == 1, f"exactly one {type_}"
    return items[0]


# --- the registry ---------------------------------------------------------------------------------


def test_every_function_directory_has_a_stack_function(dev: Synth) -> None:
    """A new functions/<name>/ (handler.py or run.sh) fails this until infra/registry.py has its entry."""
    defined = {spec.name for spec in FUNCTIONS}
    missing = sorted(set(function_directories()) - defined)
    assert not missing, f"functions/ without a FunctionSpec in infra/registry.py FUNCTIONS: {missing}"
    handlers = {r["Properties"]["Handler"] for r in dev.resources("AWS::Lambda::Function").values()}
    for name in function_directories():
        spec = next(s for s in FUNCTIONS if s.name == name)
        assert spec.handler in handlers, f"the stack defines no Lambda function for functions/{name}/"


def test_every_registry_entry_has_its_code() -> None:
    for spec in FUNCTIONS:
        assert spec.entry_file.is_file(), f"{spec.name}: {spec.entry_file} does not exist"
        if spec.streaming:
            assert spec.entry_file.stat().st_mode & 0o111, f"{spec.entry_file} must be executable"


def test_route_paths_and_methods_are_unique() -> None:
    seen: set[tuple[str, str]] = set()
    for spec in FUNCTIONS:
        for route in spec.routes:
            for method in route.methods:
                assert (route.path, method) not in seen, f"{method} {route.path} is routed twice"
                seen.add((route.path, method))


def test_function_code_ships_only_the_functions_package(tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path))
    staging = cdk.AssetStaging(
        cdk.Stack(app, "S"),
        "Code",
        source_path=str(REPO_ROOT),
        exclude=FUNCTION_CODE_EXCLUDES,
        ignore_mode=cdk.IgnoreMode.GIT,
    )
    staged = Path(staging.absolute_staged_path)
    assert [p.name for p in staged.iterdir()] == ["functions"]
    files = {p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file()}
    assert "functions/chat/handler.py" in files
    assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc")]


# --- functions ------------------------------------------------------------------------------------


def test_chat_function(dev: Synth) -> None:
    _, fn = _fn(dev, "chat")
    props = fn["Properties"]
    layer_id, _ = _only(dev, "AWS::Lambda::LayerVersion")
    assert props["Handler"] == "functions.chat.handler.handler"
    assert props["Runtime"] == "python3.12"
    assert props["Architectures"] == ["arm64"]
    assert props["MemorySize"] == 1024
    assert props["Timeout"] == 29
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert props["Layers"] == [_ref(layer_id)]
    env = props["Environment"]["Variables"]
    table_id, _ = _only(dev, "AWS::DynamoDB::Table")
    bucket_id, _ = _only(dev, "AWS::S3::Bucket")
    assert env["AGENT_STORAGE"] == "aws"
    assert env["AGENT_TABLE_NAME"] == _ref(table_id)
    assert env["AGENT_DATA_BUCKET"] == _ref(bucket_id)
    llm_secret_id = next(k for k in dev.resources("AWS::SecretsManager::Secret") if k.startswith("LlmApiKey"))
    assert llm_secret_id in json.dumps(env["AGENT_LLM_API_KEY_SECRET"])  # the secret's name, parsed from its ARN
    assert env["AGENT_DATA_TOKEN_SECRET_NAME"] != env["AGENT_LLM_API_KEY_SECRET"]
    assert env["AGENT_AUTH_MODE"] == "none"
    assert env["AGENT_MODEL"] == "gpt-4.1-mini"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "AgentCore"
    assert {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_LOG_LEVEL"} <= env.keys()
    assert "OPENAI_BASE_URL" not in env


def test_layer_matches_runtime_and_architecture(grown: Synth) -> None:
    _, layer = _only(grown, "AWS::Lambda::LayerVersion")
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.12"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["x86_64"]
    for fn in grown.resources("AWS::Lambda::Function").values():
        if fn["Properties"].get("Runtime", "").startswith("python"):
            assert fn["Properties"]["Architectures"] == ["x86_64"]


def test_jwt_settings_reach_the_functions(prod_jwt: Synth) -> None:
    env = _fn(prod_jwt, "chat")[1]["Properties"]["Environment"]["Variables"]
    assert env["AGENT_AUTH_MODE"] == "jwt"
    assert env["AGENT_JWT_ISSUER"] == PROD_JWT["jwtIssuer"]
    assert env["AGENT_JWT_AUDIENCE"] == PROD_JWT["jwtAudience"]
    assert env["AGENT_JWT_JWKS_URL"] == PROD_JWT["jwtJwksUrl"]


def test_function_log_groups_have_retention(dev: Synth) -> None:
    groups = dev.resources("AWS::Logs::LogGroup")
    for fn in dev.resources("AWS::Lambda::Function").values():
        if "LoggingConfig" in fn["Properties"]:
            group_id = fn["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
            assert groups[group_id]["Properties"]["RetentionInDays"] == 30
    assert all(g["Properties"]["RetentionInDays"] == 30 for g in groups.values())


def test_stream_function_runs_behind_the_web_adapter(dev: Synth) -> None:
    fn_id, fn = _fn(dev, "stream")
    props = fn["Properties"]
    assert props["Handler"] == "functions/stream/run.sh"
    env = props["Environment"]["Variables"]
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert env["AWS_LWA_INVOKE_MODE"] == "response_stream"
    adapter = json.dumps(props["Layers"][1])
    assert ":753240598075:layer:LambdaAdapterLayerArm64:" in adapter
    urls = [
        u for u in dev.resources("AWS::Lambda::Url").values() if u["Properties"]["TargetFunctionArn"] == _arn(fn_id)
    ]
    assert [u["Properties"]["InvokeMode"] for u in urls] == ["RESPONSE_STREAM"]


# --- storage --------------------------------------------------------------------------------------


def test_table_is_built_from_the_schema_module(dev: Synth) -> None:
    _, table = _only(dev, "AWS::DynamoDB::Table")
    props = table["Properties"]
    expected = schema.create_table_kwargs("ignored")
    assert props["BillingMode"] == expected["BillingMode"] == "PAY_PER_REQUEST"
    assert props["KeySchema"] == expected["KeySchema"]
    assert sorted(props["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == sorted(
        expected["AttributeDefinitions"], key=lambda a: a["AttributeName"]
    )
    by_name = lambda indexes: sorted(indexes, key=lambda i: i["IndexName"])  # noqa: E731
    assert by_name(props["GlobalSecondaryIndexes"]) == by_name(expected["GlobalSecondaryIndexes"])
    assert {i["IndexName"] for i in props["GlobalSecondaryIndexes"]} == {i.name for i in schema.INDEXES}


def test_table_ttl_pitr_encryption(dev: Synth) -> None:
    props = _only(dev, "AWS::DynamoDB::Table")[1]["Properties"]
    assert props["TimeToLiveSpecification"] == {"AttributeName": schema.TTL_ATTRIBUTE, "Enabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"] == {"SSEEnabled": True}


def test_dev_data_is_disposable_and_prod_data_is_kept(dev: Synth, prod_jwt: Synth) -> None:
    _, dev_table = _only(dev, "AWS::DynamoDB::Table")
    _, prod_table = _only(prod_jwt, "AWS::DynamoDB::Table")
    assert dev_table["DeletionPolicy"] == "Delete"
    assert dev_table["Properties"]["DeletionProtectionEnabled"] is False
    assert prod_table["DeletionPolicy"] == "Retain"
    assert prod_table["Properties"]["DeletionProtectionEnabled"] is True
    assert _only(prod_jwt, "AWS::S3::Bucket")[1]["DeletionPolicy"] == "Retain"
    assert not prod_jwt.resources("Custom::S3AutoDeleteObjects")


def test_data_bucket(dev: Synth) -> None:
    bucket_id, bucket = _only(dev, "AWS::S3::Bucket")
    props = bucket["Properties"]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
    ]
    rules = props["LifecycleConfiguration"]["Rules"]
    assert any(r["Prefix"] == "tmp/" and r["ExpirationInDays"] >= 1 and r["Status"] == "Enabled" for r in rules)
    dev.template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "Bucket": _ref(bucket_id),
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                )
            },
        },
    )


# --- front doors ----------------------------------------------------------------------------------


def _resource_paths(synth: Synth) -> dict[str, str]:
    """ApiGateway::Resource logical id -> full path."""
    resources = synth.resources("AWS::ApiGateway::Resource")
    paths: dict[str, str] = {}

    def path_of(logical_id: str) -> str:
        if logical_id not in paths:
            props = resources[logical_id]["Properties"]
            parent = props["ParentId"]
            prefix = path_of(parent["Ref"]) if "Ref" in parent else ""
            paths[logical_id] = f"{prefix}/{props['PathPart']}"
        return paths[logical_id]

    for logical_id in resources:
        path_of(logical_id)
    return paths


def _methods(synth: Synth) -> dict[tuple[str, str], dict[str, Any]]:
    paths = _resource_paths(synth)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for method in synth.resources("AWS::ApiGateway::Method").values():
        props = method["Properties"]
        resource = props["ResourceId"]
        path = paths[resource["Ref"]] if "Ref" in resource else "/"
        out[(path, props["HttpMethod"])] = props
    return out


@pytest.mark.parametrize("spec", [s for s in FUNCTIONS if s.routes], ids=lambda s: s.name)
def test_rest_routes_proxy_to_their_function(dev: Synth, spec: FunctionSpec) -> None:
    fn_id, _ = _fn(dev, spec.name)
    methods = _methods(dev)
    for route in spec.routes:
        for verb in route.methods:
            props = methods.get((route.path, verb))
            assert props is not None, f"{verb} {route.path} missing from the REST API"
            integration = props["Integration"]
            assert integration["Type"] == "AWS_PROXY"
            assert _arn(fn_id) in json.loads(json.dumps(integration["Uri"]))["Fn::Join"][1]
            if spec.streaming:
                assert integration["ResponseTransferMode"] == "STREAM"
                assert "response-streaming-invocations" in json.dumps(integration["Uri"])
            else:
                assert integration.get("ResponseTransferMode", "BUFFERED") == "BUFFERED"
                assert integration["TimeoutInMillis"] == 29000


def test_chat_routes_of_the_readme_api_table(dev: Synth) -> None:
    methods = _methods(dev)
    for path, verbs in {
        "/api/v1/conversations": ("GET", "POST"),
        "/api/v1/conversations/{proxy+}": ("GET", "POST", "DELETE"),
        "/api/ap/chats": ("GET",),
        "/api/ap/chat": ("GET",),
        "/api/ap/chat/{chatId}/end": ("POST",),
        "/api/ap/agents": ("GET",),
        "/api/ap/profile": ("GET", "DELETE"),
        "/api/ap/usage": ("GET",),
    }.items():
        for verb in verbs:
            assert (path, verb) in methods


def test_method_authorization_follows_auth_mode(dev: Synth, grown: Synth) -> None:
    assert {p["AuthorizationType"] for p in _methods(dev).values()} == {"NONE"}
    grown_auth = {(path, verb): p["AuthorizationType"] for (path, verb), p in _methods(grown).items()}
    assert {a for (_, verb), a in grown_auth.items() if verb != "OPTIONS"} == {"AWS_IAM"}
    assert {a for (_, verb), a in grown_auth.items() if verb == "OPTIONS"} == {"NONE"}  # CORS preflight


def test_stage_throttling_access_logs_and_usage_plan(dev: Synth) -> None:
    _, stage = _only(dev, "AWS::ApiGateway::Stage")
    props = stage["Properties"]
    assert props["StageName"] == "dev"
    assert props["TracingEnabled"] is True
    assert props["AccessLogSetting"]["DestinationArn"]
    settings = props["MethodSettings"][0]
    assert settings["ThrottlingRateLimit"] == 20
    assert settings["ThrottlingBurstLimit"] == 40
    _, plan = _only(dev, "AWS::ApiGateway::UsagePlan")
    assert plan["Properties"]["Throttle"] == {"RateLimit": 20, "BurstLimit": 40}
    _, api = _only(dev, "AWS::ApiGateway::RestApi")
    assert api["Properties"]["EndpointConfiguration"] == {"Types": ["REGIONAL"]}


def test_cors_from_settings(dev: Synth, prod_jwt: Synth) -> None:
    assert not [m for (_, verb), m in _methods(dev).items() if verb == "OPTIONS"]
    assert all("Cors" not in u["Properties"] for u in dev.resources("AWS::Lambda::Url").values())
    preflight = [m for (_, verb), m in _methods(prod_jwt).items() if verb == "OPTIONS"]
    assert preflight
    # A browser resuming a dropped stream sends Last-Event-ID (the playground on another origin)
    assert all("Last-Event-ID" in json.dumps(m) for m in preflight)
    for url in prod_jwt.resources("AWS::Lambda::Url").values():
        assert url["Properties"]["Cors"]["AllowOrigins"] == ["https://app.example.com", "https://admin.example.com"]
        assert "last-event-id" in url["Properties"]["Cors"]["AllowHeaders"]


def test_function_urls_follow_auth_mode(dev: Synth, prod_jwt: Synth, grown: Synth) -> None:
    http_functions = {s.name for s in FUNCTIONS if s.routes}
    for synth, auth in ((dev, "NONE"), (prod_jwt, "NONE"), (grown, "AWS_IAM")):
        urls = synth.resources("AWS::Lambda::Url")
        assert len(urls) == len(http_functions)
        assert {u["Properties"]["AuthType"] for u in urls.values()} == {auth}
    chat_id, _ = _fn(dev, "chat")
    dev.template.has_resource_properties(
        "AWS::Lambda::Url", {"TargetFunctionArn": _arn(chat_id), "AuthType": "NONE", "InvokeMode": "BUFFERED"}
    )


def test_outputs(dev: Synth) -> None:
    outputs = dev.json["Outputs"]
    expected = {"RestApiUrl", "TableName", "DataBucketName", "LlmApiKeySecretName", "ChatFunctionUrl"}
    assert expected <= outputs.keys()
    assert {f"{s.construct_id}FunctionUrl" for s in FUNCTIONS if s.routes} <= outputs.keys()
    _, chat = _fn(dev, "chat")
    env = chat["Properties"]["Environment"]["Variables"]
    assert outputs["LlmApiKeySecretName"]["Value"] == env["AGENT_LLM_API_KEY_SECRET"]


# --- IAM ------------------------------------------------------------------------------------------


def _statements(synth: Synth) -> Iterator[tuple[str, dict[str, Any]]]:
    for logical_id, policy in synth.resources("AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            yield logical_id, statement
    for logical_id, role in synth.resources("AWS::IAM::Role").items():
        for inline in role["Properties"].get("Policies", []):
            for statement in inline["PolicyDocument"]["Statement"]:
                yield logical_id, statement


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@pytest.mark.parametrize("variant", ["dev", "grown"])
def test_no_wildcard_actions(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    for logical_id, statement in _statements(synth):
        for action in _as_list(statement["Action"]):
            assert action != "*" and not action.endswith(":*"), f"{logical_id}: wildcard action {action}"
        if statement.get("Resource") == "*":
            assert all(a.startswith("xray:") for a in _as_list(statement["Action"])), (
                f"{logical_id}: Resource '*' outside the X-Ray statement: {statement}"
            )


@pytest.mark.parametrize("variant", ["dev", "grown"])
def test_table_statements_are_scoped_to_the_table_and_its_indexes(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    table_id, _ = _only(synth, "AWS::DynamoDB::Table")
    table_statements = [
        s for _, s in _statements(synth) if any(a.startswith("dynamodb:") for a in _as_list(s["Action"]))
    ]
    assert table_statements
    index_arn = {"Fn::Join": ["", [_arn(table_id), "/index/*"]]}
    for statement in table_statements:
        assert statement["Resource"] == [_arn(table_id), index_arn]
        assert "dynamodb:Scan" not in statement["Action"]


def test_secret_reads_are_scoped_to_the_secret(dev: Synth) -> None:
    secrets = set(dev.resources("AWS::SecretsManager::Secret"))
    for _, statement in _statements(dev):
        if any(a.startswith("secretsmanager:") for a in _as_list(statement["Action"])):
            assert statement["Resource"]["Ref"] in secrets


# --- settings -------------------------------------------------------------------------------------


@pytest.mark.parametrize("stage", ["prod", "staging"])
def test_auth_mode_none_is_refused_outside_dev(stage: str) -> None:
    with pytest.raises(SettingsError, match="authMode 'none' is refused"):
        InfraSettings.from_mapping({"stage": stage})
    with pytest.raises(SettingsError, match="authMode 'none' is refused"):
        build_app(_app({"stage": stage, "authMode": "none"}), nag=False)
    assert InfraSettings.from_mapping({"stage": "dev", "authMode": "none"}).auth_mode == "none"


def test_jwt_mode_needs_issuer_and_jwks() -> None:
    with pytest.raises(SettingsError, match="jwtIssuer, jwtJwksUrl"):
        InfraSettings.from_mapping({"stage": "prod", "authMode": "jwt"})


def test_settings_from_cli_strings_and_cdk_json() -> None:
    settings = InfraSettings.from_mapping(
        {"throttlingRateLimit": "50", "throttlingBurstLimit": "100", "corsOrigins": "https://a, https://b"}
    )
    assert settings.throttling_rate_limit == 50.0
    assert settings.throttling_burst_limit == 100
    assert settings.cors_origins == ("https://a", "https://b")
    with pytest.raises(SettingsError, match="logRetentionDays"):
        InfraSettings.from_mapping({"logRetentionDays": "31"})
    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    ours = {k: v for k, v in context.items() if k in InfraSettings.context_keys()}
    assert InfraSettings.from_mapping(ours) == InfraSettings()


# --- the registry grows one entry at a time -------------------------------------------------------


def test_future_functions_each_need_one_entry(grown: Synth) -> None:
    worker_id, worker = _fn(grown, "worker")
    queue_ids = list(grown.resources("AWS::SQS::Queue"))
    assert len(queue_ids) == 2  # the work queue and its dead-letter queue
    grown.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {"FunctionName": _ref(worker_id), "FunctionResponseTypes": ["ReportBatchItemFailures"]},
    )
    assert "AGENT_WORK_QUEUE_URL" in worker["Properties"]["Environment"]["Variables"]
    summary_id, _ = _fn(grown, "daily_summary")
    grown.template.has_resource_properties(
        "AWS::Scheduler::Schedule",
        {
            "ScheduleExpression": "cron(30 * * * ? *)",
            "ScheduleExpressionTimezone": "Etc/UTC",
            "Target": Match.object_like(
                {
                    "Arn": _arn(summary_id),
                    "Input": json.dumps({"scheduledTime": "<aws.scheduler.scheduled-time>"}, separators=(",", ":")),
                }
            ),
        },
    )
    alarms = grown.resources("AWS::CloudWatch::Alarm")
    # errors + throttles each, API 5xx, dead letters, usage denials and spend
    assert len(alarms) == 2 * len(FUNCTIONS + FUTURE) + 4


def test_job_functions_consume_the_queue_and_run_on_schedules(dev: Synth) -> None:
    worker_id, worker = _fn(dev, "worker")
    dev.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {"FunctionName": _ref(worker_id), "BatchSize": 10, "FunctionResponseTypes": ["ReportBatchItemFailures"]},
    )
    assert worker["Properties"]["Timeout"] == 300
    for name in ("worker", "idle_sessions", "daily_summary", "chat", "stream"):
        assert "AGENT_WORK_QUEUE_URL" in _fn(dev, name)[1]["Properties"]["Environment"]["Variables"], name
    expressions = {}
    for schedule in dev.resources("AWS::Scheduler::Schedule").values():
        target = schedule["Properties"]["Target"]["Arn"]["Fn::GetAtt"][0]
        expressions[target] = (
            schedule["Properties"]["ScheduleExpression"],
            schedule["Properties"]["ScheduleExpressionTimezone"],
        )
    assert expressions == {
        _fn(dev, "idle_sessions")[0]: ("cron(0/5 * * * ? *)", "Etc/UTC"),
        _fn(dev, "daily_summary")[0]: ("cron(30 * * * ? *)", "Etc/UTC"),
    }


def test_registry_rejects_buffered_routes_over_29_seconds() -> None:
    with pytest.raises(ValueError, match="29 s"):
        FunctionSpec(name="slow", description="x", timeout_s=60, routes=(Route("/x", ("GET",)),))


# --- monitoring -----------------------------------------------------------------------------------


def test_alarms_and_dashboard(dev: Synth) -> None:
    alarms = dev.resources("AWS::CloudWatch::Alarm").values()
    metric_names = {(a["Properties"].get("Namespace"), a["Properties"].get("MetricName")) for a in alarms}
    assert {("AWS/Lambda", "Errors"), ("AWS/Lambda", "Throttles"), ("AWS/ApiGateway", "5XXError")} <= metric_names
    chat_id, _ = _fn(dev, "chat")
    chat_alarms = [
        a for a in alarms if {"Name": "FunctionName", "Value": _ref(chat_id)} in a["Properties"].get("Dimensions", [])
    ]
    assert {a["Properties"]["MetricName"] for a in chat_alarms} == {"Errors", "Throttles"}
    _, dashboard = _only(dev, "AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in ("TimeToFirstToken", "PromptTokens", "CompletionTokens", "ToolCalls", "EstimatedCostMicroUsd"):
        assert metric in body
    assert "AgentCore" in body


def test_usage_alarms_watch_refused_turns_and_the_spend(dev: Synth) -> None:
    alarms = {
        a["Properties"]["AlarmDescription"]: a["Properties"] for a in dev.resources("AWS::CloudWatch::Alarm").values()
    }
    [denials] = [p for d, p in alarms.items() if d.startswith("usage: 20+ turns refused")]
    assert denials["Threshold"] == 20
    assert {m.get("MetricStat", {}).get("Metric", {}).get("MetricName") for m in denials["Metrics"]} >= {
        "BudgetDenials",
        "RateLimitDenials",
    }
    [spend] = [p for d, p in alarms.items() if d.startswith("usage: estimated spend")]
    [stat] = [m["MetricStat"] for m in spend["Metrics"]]
    assert (stat["Metric"]["MetricName"], stat["Metric"]["Namespace"]) == ("EstimatedCostMicroUsd", "AgentCore")
    assert (stat["Period"], stat["Stat"]) == (3600, "Sum")
    assert spend["Threshold"] == 10_000_000


def test_usage_budgets_reach_the_llm_functions_only_when_set(dev: Synth) -> None:
    for name in ("chat", "stream", "worker"):
        assert "AGENT_USAGE_DAILY_TOKEN_BUDGET" not in _fn(dev, name)[1]["Properties"]["Environment"]["Variables"]
    budgeted = _synth({"usageDailyTokenBudget": 50000, "usageRequestsPerMinute": 12})
    for name in ("chat", "stream", "worker"):
        variables = _fn(budgeted, name)[1]["Properties"]["Environment"]["Variables"]
        assert variables["AGENT_USAGE_DAILY_TOKEN_BUDGET"] == "50000"
        assert variables["AGENT_USAGE_REQUESTS_PER_MINUTE"] == "12"
        assert "AGENT_USAGE_DAILY_COST_BUDGET_USD" not in variables
    assert "AGENT_USAGE_DAILY_TOKEN_BUDGET" not in _fn(budgeted, "submit")[1]["Properties"]["Environment"]["Variables"]


def test_tool_approval_reaches_the_functions_that_run_tools_only_when_set(dev: Synth) -> None:
    for name in ("chat", "stream", "worker", "submit"):
        assert "AGENT_TOOL_APPROVAL" not in _fn(dev, name)[1]["Properties"]["Environment"]["Variables"]
    policy = {"http_get": {"when": {"arg": "url", "hostNotIn": ["example.com"]}}, "save_file": "always"}
    gated = _synth({"toolApproval": json.dumps(policy)})  # as `-c toolApproval='{...}'` gives it
    for name in ("chat", "stream", "worker"):
        variables = _fn(gated, name)[1]["Properties"]["Environment"]["Variables"]
        assert json.loads(variables["AGENT_TOOL_APPROVAL"]) == policy
    assert "AGENT_TOOL_APPROVAL" not in _fn(gated, "submit")[1]["Properties"]["Environment"]["Variables"]
    with pytest.raises(Exception, match="toolApproval"):
        _synth({"toolApproval": '{"save_file": "sometimes"}'})


# --- cdk-nag and cfn-lint -------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["dev", "prod_jwt", "grown"])
def test_cdk_nag_has_no_unacknowledged_findings(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    report = AwsSolutionsChecks().validate_scope(synth.stack)
    findings = [
        f"{v.rule_name}: {v.description}" + "".join(f" @{r.resource_logical_id}" for r in v.violating_resources)
        for v in report.violations
    ]
    assert not findings
    assert report.success


def test_synth_with_the_nag_plugin_passes(tmp_path: Path) -> None:
    """What `cdk synth` runs: the AwsSolutions plugin on the app; a finding fails synthesis."""
    app = cdk.App(outdir=str(tmp_path), context=SKIP_BUNDLING, builtin_cloud_formation_validation=False)
    app, _ = build_app(app, nag=True)
    app.synth()  # raises ValidationFailed on any unacknowledged finding
    report = json.loads((tmp_path / "validation-report.json").read_text())
    assert not [r for r in report.get("pluginReports", []) if r.get("conclusions") or r.get("violations")]


def test_cfn_lint_finds_no_errors(dev: Synth, grown: Synth, tmp_path: Path) -> None:
    paths = []
    for name, synth in (("dev", dev), ("grown", grown)):
        path = tmp_path / f"{name}.template.json"
        path.write_text(json.dumps(synth.json))
        paths.append(str(path))
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    command = [str(cfn_lint)] if cfn_lint.exists() else [sys.executable, "-m", "cfnlint"]
    result = subprocess.run([*command, "--format", "parseable", *paths], capture_output=True, text=True, timeout=300)
    assert result.returncode & 2 == 0, f"cfn-lint errors:\n{result.stdout}{result.stderr}"
    rules = {
        line.split(":")[5]
        for line in result.stdout.splitlines()
        if line.count(":") >= 6
        and not (line.split(":")[5] == "W3037" and line.split(":")[6].split("'")[1] in EMULATOR_ACTIONS)
    }
    unexplained = {rule for rule in rules if rule.startswith("W")} - KNOWN_WARNINGS
    assert not unexplained, f"new cfn-lint warnings (fix or justify in docs/infrastructure.md):\n{result.stdout}"


# --- the environment the stack writes parses as Settings --------------------------------------------


def _literal(value: Any) -> str:
    """A template value as the function sees it: intrinsics (Ref, GetAtt, Join) become a stand-in string."""
    return value if isinstance(value, str) else "resolved-at-deploy"


@pytest.mark.parametrize("variant", ["dev", "prod_jwt", "grown"])
def test_every_function_environment_parses_as_settings(
    variant: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_core.config import Settings

    synth: Synth = request.getfixturevalue(variant)
    aliases = {str(field.alias) for field in Settings.model_fields.values()}
    ours = {spec.handler for spec in (*FUNCTIONS, *FUTURE)}
    functions = {
        k: v for k, v in synth.resources("AWS::Lambda::Function").items() if v["Properties"]["Handler"] in ours
    }
    assert len(functions) >= len(FUNCTIONS)
    for logical_id, fn in functions.items():
        variables = fn["Properties"]["Environment"]["Variables"]
        for alias in aliases:
            monkeypatch.delenv(alias, raising=False)
        for key, value in variables.items():
            monkeypatch.setenv(key, _literal(value))
        settings = Settings()  # raised SettingsError on AGENT_CORS_ORIGINS="" before
        assert settings.storage == "aws", logical_id
        cors = variables.get("AGENT_CORS_ORIGINS", "")
        assert settings.cors_origins == [o for o in _literal(cors).split(",") if o], logical_id


def test_no_function_is_given_dev_only_features(dev: Synth, prod_jwt: Synth) -> None:
    """Even the CDK stage named `dev` deploys functions without AGENT_STAGE=dev or the clock override."""
    for synth in (dev, prod_jwt):
        for function in synth.resources("AWS::Lambda::Function").values():
            env = function["Properties"].get("Environment", {}).get("Variables", {})
            assert env.get("AGENT_STAGE", "prod") != "dev"
            assert "AGENT_ALLOW_CLOCK_OVERRIDE" not in env
