"""Each function's IAM: exactly the actions of its registry needs, on its own resources (docs/infrastructure.md)."""

from __future__ import annotations

from typing import Any

import pytest

from infra.registry import FUNCTIONS, FunctionSpec, Need
from infra.settings import InfraSettings
from tests.infra.test_stack import PROD_IAM, Synth, _arn, _fn, _only, _ref, _synth

LOGS = {"logs:CreateLogStream", "logs:PutLogEvents"}
XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
CONVERSATIONS = {
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:TransactWriteItems",
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:ListBucket",
    "sqs:SendMessage",
    "secretsmanager:GetSecretValue",
}
# The table of docs/infrastructure.md "IAM", one row per function (logs and X-Ray apart).
EXPECTED: dict[str, set[str]] = {
    "chat": CONVERSATIONS,
    "stream": CONVERSATIONS,
    "submit": {"dynamodb:UpdateItem", "dynamodb:GetItem", "sqs:SendMessage"},
    "data": {
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:Query",
        "s3:GetObject",
        "s3:ListBucket",
        "secretsmanager:GetSecretValue",
    },
    "worker": {
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:Query",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:TransactWriteItems",
        "s3:GetObject",
        "s3:PutObject",
        "s3:ListBucket",
        "sqs:SendMessage",
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "secretsmanager:GetSecretValue",
    },
    "idle_sessions": {
        "dynamodb:Query",
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
        "dynamodb:TransactWriteItems",
        "sqs:SendMessage",
        "sqs:SendMessageBatch",
    },
    "daily_summary": {"dynamodb:Query", "sqs:SendMessage", "sqs:SendMessageBatch"},
}
# Actions CDK's grant helpers used to add that no function (nor Lambda's SQS poller) calls.
NEVER = {
    "dynamodb:DescribeTable",
    "dynamodb:ConditionCheckItem",
    "dynamodb:Scan",
    "secretsmanager:DescribeSecret",
    "sqs:GetQueueUrl",
    "sqs:ChangeMessageVisibility",
}


@pytest.fixture(scope="module")
def dev() -> Synth:
    return _synth()


@pytest.fixture(scope="module")
def prod_iam() -> Synth:
    return _synth(PROD_IAM)


def _role_statements(synth: Synth, name: str) -> list[dict[str, Any]]:
    """Every statement of the policies attached to the function's execution role."""
    _, fn = _fn(synth, name)
    role_id = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    role = synth.json["Resources"][role_id]
    assert not role["Properties"].get("ManagedPolicyArns"), f"{name}: no managed policies"
    return [
        statement
        for policy in synth.resources("AWS::IAM::Policy").values()
        if _ref(role_id) in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


def _resources(statement: dict[str, Any]) -> list[Any]:
    resource = statement["Resource"]
    return resource if isinstance(resource, list) else [resource]


def role_actions(synth: Synth, name: str) -> set[str]:
    return {a for s in _role_statements(synth, name) if s["Effect"] == "Allow" for a in _actions(s)}


@pytest.mark.parametrize("variant", ["dev", "prod_iam"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_function_gets_exactly_its_actions(variant: str, name: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    assert role_actions(synth, name) == EXPECTED[name] | LOGS | XRAY


def test_the_table_covers_every_registered_function() -> None:
    assert set(EXPECTED) == {spec.name for spec in FUNCTIONS}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_no_function_gets_describe_or_queue_lookup_actions(dev: Synth, name: str) -> None:
    assert not role_actions(dev, name) & NEVER


def test_each_statement_is_scoped_to_its_resource(dev: Synth) -> None:
    table_id, _ = _only(dev, "AWS::DynamoDB::Table")
    bucket_id, _ = _only(dev, "AWS::S3::Bucket")
    queues = {k for k, v in dev.resources("AWS::SQS::Queue").items() if "RedrivePolicy" in v["Properties"]}
    assert len(queues) == 1
    (queue_id,) = queues
    secrets = set(dev.resources("AWS::SecretsManager::Secret"))
    objects = {"Fn::Join": ["", [_arn(bucket_id), "/*"]]}
    for spec in FUNCTIONS:
        for statement in _role_statements(dev, spec.name):
            services = {a.split(":")[0] for a in _actions(statement)}
            assert len(services) == 1, f"{spec.name}: one service per statement: {statement}"
            service = services.pop()
            resources = _resources(statement)
            if service == "dynamodb":
                assert resources == [_arn(table_id), {"Fn::Join": ["", [_arn(table_id), "/index/*"]]}]
            elif service == "s3" and resources == [objects]:
                assert set(_actions(statement)) <= {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}
            elif service == "s3":
                assert resources == [_arn(bucket_id)], spec.name
                assert set(_actions(statement)) <= {"s3:ListBucket", "s3:DeleteObject"}
            elif service == "sqs":
                assert resources == [_arn(queue_id)], spec.name  # the work queue, never the dead letters
            elif service == "secretsmanager":
                assert len(resources) == 1 and resources[0]["Ref"] in secrets
                assert _actions(statement) == ["secretsmanager:GetSecretValue"]


def test_each_function_reads_only_the_secrets_it_needs(dev: Synth) -> None:
    llm_id = next(k for k in dev.resources("AWS::SecretsManager::Secret") if k.startswith("LlmApiKey"))
    token_id = next(k for k in dev.resources("AWS::SecretsManager::Secret") if k.startswith("DataTokenKey"))
    for spec in FUNCTIONS:
        read = {
            s["Resource"]["Ref"]
            for s in _role_statements(dev, spec.name)
            if _actions(s) == ["secretsmanager:GetSecretValue"]
        }
        wanted = {llm_id} if Need.LLM_SECRET in spec.needs else set()
        wanted |= {token_id} if Need.DATA_TOKEN_SECRET in spec.needs else set()
        assert read == wanted, spec.name


def test_environment_follows_the_needs(dev: Synth) -> None:
    expected = {
        "submit": {"AGENT_TABLE_NAME", "AGENT_WORK_QUEUE_URL"},
        "data": {"AGENT_TABLE_NAME", "AGENT_DATA_BUCKET", "AGENT_DATA_TOKEN_SECRET_NAME"},
        "idle_sessions": {"AGENT_TABLE_NAME", "AGENT_WORK_QUEUE_URL"},
        "daily_summary": {"AGENT_TABLE_NAME", "AGENT_WORK_QUEUE_URL"},
    }
    resource_variables = {
        "AGENT_TABLE_NAME",
        "AGENT_DATA_BUCKET",
        "AGENT_WORK_QUEUE_URL",
        "AGENT_LLM_API_KEY_SECRET",
        "AGENT_DATA_TOKEN_SECRET_NAME",
    }
    for name, wanted in expected.items():
        variables = _fn(dev, name)[1]["Properties"]["Environment"]["Variables"]
        assert variables.keys() & resource_variables == wanted, name


def test_the_worker_polls_its_queue_with_bounded_concurrency(dev: Synth, prod_iam: Synth) -> None:
    for synth, settings in ((dev, InfraSettings()), (prod_iam, InfraSettings.from_mapping(PROD_IAM))):
        worker_id, _ = _fn(synth, "worker")
        mappings = list(synth.resources("AWS::Lambda::EventSourceMapping").values())
        assert len(mappings) == 1
        props = mappings[0]["Properties"]
        assert props["FunctionName"] == _ref(worker_id)
        assert props["BatchSize"] == 10
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert props["ScalingConfig"] == {"MaximumConcurrency": settings.worker_max_concurrency}


def test_a_transacting_or_batching_need_requires_the_actions_aws_authorises_it_by() -> None:
    with pytest.raises(ValueError, match="TABLE_TRANSACT is authorised through TABLE_UPDATE or TABLE_WRITE"):
        FunctionSpec(name="x", description="x", needs=frozenset({Need.TABLE_READ, Need.TABLE_TRANSACT}))
    with pytest.raises(ValueError, match="QUEUE_SEND_BATCH is authorised through QUEUE_SEND"):
        FunctionSpec(name="x", description="x", needs=frozenset({Need.QUEUE_SEND_BATCH}))
    FunctionSpec(name="x", description="x", needs=frozenset({Need.TABLE_UPDATE, Need.TABLE_TRANSACT}))
