"""Across the whole tier: every function starts from the template; every variable the CDK app writes is one a
case runs with; every AWS call was allowed and within the function's template policy."""

from __future__ import annotations

import fnmatch
import json
import subprocess
from pathlib import Path

from infra.registry import FUNCTIONS
from tests.infra.test_permissions import EXPECTED
from tests.support.deployed.aws import generated_secret
from tests.support.deployed.functions import FunctionDefinition, function_definitions
from tests.support.deployed.stack import LLM_API_KEY, DeployedStack
from tests.support.lambda_events import rest_v1_event

# Each variable the CDK app writes into a function, and the function (of the template variant) whose cases
# run with it. A variable missing here fails `test_every_template_variable_is_exercised`.
EXERCISED: dict[str, tuple[str, str, str]] = {
    "AGENT_STORAGE": ("dev", "chat", "every case: aws storage on the moto account"),
    "AGENT_USAGE_DAILY_TOKEN_BUDGET": (
        "dev",
        "chat",
        "test_usage_shows_the_callers_runs_under_the_budgets_the_template_sets",
    ),
    "AGENT_USAGE_DAILY_COST_BUDGET_USD": (
        "dev",
        "chat",
        "test_usage_shows_the_callers_runs_under_the_budgets_the_template_sets",
    ),
    "AGENT_USAGE_REQUESTS_PER_MINUTE": (
        "dev",
        "chat",
        "test_usage_shows_the_callers_runs_under_the_budgets_the_template_sets",
    ),
    "AGENT_TOOL_APPROVAL": (
        "dev",
        "stream",
        "test_an_approval_answered_through_the_submit_function_resumes_the_run",
    ),
    "AGENT_CORS_ORIGINS": ("jwt", "submit", "empty in dev (every function); two origins in the jwt variant"),
    "AGENT_MODEL": ("dev", "chat", "test_chat_turn_with_a_tool_call_uses_the_secret_key_and_the_template_model"),
    "AGENT_AUTH_MODE": ("iam", "stream", "none in dev; jwt (submit) and iam (stream) variants"),
    "POWERTOOLS_SERVICE_NAME": ("dev", "chat", "structured logs and metrics of every function"),
    "POWERTOOLS_LOG_LEVEL": ("dev", "chat", "structured logs of every function"),
    "POWERTOOLS_METRICS_NAMESPACE": ("dev", "chat", "metrics of every function"),
    "AGENT_TABLE_NAME": ("dev", "submit", "the store of every function"),
    "AGENT_DATA_BUCKET": ("dev", "data", "data files, save_file, presigned links"),
    "AGENT_WORK_QUEUE_URL": (
        "dev",
        "submit",
        "idle_sessions, daily_summary, worker enqueue; submit queues a stopped run's continuation "
        "(test_a_run_whose_instance_died_waiting_on_an_approval_goes_on_through_submit_and_the_worker)",
    ),
    "AGENT_LLM_API_KEY_SECRET": ("dev", "chat", "the key sent to the LLM comes from this secret"),
    "OPENAI_BASE_URL": ("dev", "stream", "the loopback LLM"),
    "AGENT_LLM_PROVIDER": ("dev", "chat", "openai in dev: the loopback OpenAI-compatible LLM"),
    "AGENT_LLM_FALLBACK": ("fallback", "chat", "test_access_denied_on_bedrock_falls_back_to_the_openai_model"),
    "AGENT_GUARDRAIL_ID": (
        "guardrail",
        "chat",
        "test_the_chat_function_masks_the_message_and_the_answer_through_bedrock",
    ),
    "AGENT_GUARDRAIL_VERSION": ("guardrail", "chat", "the same case: the version in ApplyGuardrail's path"),
    "AGENT_GUARDRAIL_HOLDBACK_CHARS": ("guardrail", "chat", "the same case: the answer checked in several pieces"),
    "AGENT_DATA_TOKEN_SECRET_NAME": ("dev", "data", "signed links made by chat, verified by data"),
    "AWS_LAMBDA_EXEC_WRAPPER": ("dev", "stream", "the Web Adapter emulation starts run.sh"),
    "AWS_LWA_INVOKE_MODE": ("dev", "stream", "responses streamed through the Runtime API"),
    "AGENT_JWT_ISSUER": ("jwt", "submit", "test_jwt_mode_verifies_tokens_with_the_templates_issuer_audience_and_jwks"),
    "AGENT_JWT_AUDIENCE": ("jwt", "submit", "a token for another audience is refused"),
    "AGENT_JWT_JWKS_URL": ("jwt", "submit", "the signing key is fetched from the loopback JWKS"),
}
# Never needed by any function: the stack grants none of them (no IAM wider than the code needs).
NEVER_CALLED = {"dynamodb:DescribeTable", "secretsmanager:DescribeSecret", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
# Lambda's SQS poller uses the consumer's execution role (its code never calls these).
QUEUE_POLLER = {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
RUNTIME_ONLY = ("logs:", "xray:")  # Lambda's own log delivery and the X-Ray daemon, never the function's code


def test_every_registry_function_starts_from_the_template(stack: DeployedStack) -> None:
    for spec in FUNCTIONS:
        process = stack.function(spec.name)
        assert process.process.poll() is None, process.log_tail()
    assert set(stack.init_times) >= {spec.name for spec in FUNCTIONS}


def test_every_template_variable_is_exercised(stack: DeployedStack) -> None:
    written = {
        var: (variant, name)
        for variant in stack.variants
        for name, definition in _definitions(stack, variant).items()
        for var in definition.variables
    }
    assert sorted(set(written) - set(EXERCISED)) == [], "variables no deployed case runs with"
    assert sorted(set(EXERCISED) - set(written)) == [], "no template writes these any more"
    for var, (variant, name, _case) in EXERCISED.items():
        assert var in stack.definition(name, variant).variables, (var, variant, name)
        stack.function(name, variant)  # it starts with it (its cases serve with it)


def _definitions(stack: DeployedStack, variant: str) -> dict[str, FunctionDefinition]:
    return function_definitions(stack.variants[variant])


def test_no_aws_call_was_denied(stack: DeployedStack) -> None:
    assert stack.unexpected_denials() == []


def _allowed(action: str, granted: set[str]) -> bool:
    return any(fnmatch.fnmatchcase(action, pattern) for pattern in granted)


def test_every_function_called_only_actions_its_template_policy_grants(stack: DeployedStack) -> None:
    rows = stack.report()
    assert rows, "no function ran"
    for row in rows:
        outside = sorted(a for a in row.actions if not _allowed(a, row.allowed))
        assert outside == [], (row.name, outside)


def test_policies_grant_only_what_the_functions_call(stack: DeployedStack) -> None:
    wide: dict[str, list[str]] = {}
    for spec in FUNCTIONS:
        allowed = {
            a
            for a in stack.account.allowed_actions(stack.definition(spec.name).role_logical_id)
            if not a.startswith(RUNTIME_ONLY) and not (spec.consumes_queue and a in QUEUE_POLLER)
        }
        extra = (allowed & NEVER_CALLED) | (allowed - EXPECTED[spec.name])
        if extra:
            wide[spec.name] = sorted(extra)
    assert wide == {}


def test_a_function_process_sees_only_the_asset_the_layer_and_the_runtime(stack: DeployedStack) -> None:
    # The chat function's interpreter, environment and working directory, asked for its import path.
    process = stack.function("chat")
    probe = "import json, sys; print(json.dumps(sys.path))"
    out = subprocess.run(
        [str(stack.runtime.python), "-c", probe],
        cwd=process.task_root,
        env=process.environment,
        capture_output=True,
        text=True,
        check=True,
    )
    paths = [Path(p).resolve() for p in json.loads(out.stdout) if p]
    base = Path(
        subprocess.run(
            [str(stack.runtime.python), "-c", "import sys; print(sys.base_prefix)"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    ).resolve()
    roots = [
        process.task_root.resolve(),
        *(d.resolve() for d in process.layer_dirs),
        stack.runtime.python.parent.parent.resolve(),
        base / "lib",
    ]
    stray = [str(p) for p in paths if not any(p == r or p.is_relative_to(r) for r in roots)]
    assert stray == []
    assert process.layer_dirs[0].resolve() in paths
    runtime_packages = {p.name for p in (stack.runtime.python.parent.parent / "lib").glob("python*/site-packages/*")}
    assert {"awslambdaric", "boto3"} <= runtime_packages and "agent_core" not in runtime_packages


def test_before_the_key_is_set_the_placeholder_is_what_reaches_the_provider(stack: DeployedStack) -> None:
    # Given the LLM secret still holding a placeholder the template's generator can make (one starting with '{')
    logical = stack.logical_id("LlmApiKey")
    spec = stack.synthesis.template["Resources"][logical]["Properties"].get("GenerateSecretString") or {}
    placeholder = generated_secret(spec, first="{")
    secrets = stack.account.client("secretsmanager")
    secrets.put_secret_value(SecretId=stack.account.physical[logical], SecretString=placeholder)
    chat = stack.launch("chat")  # a fresh process: none has the placeholder cached
    try:
        chat.wait_ready()
        before = len(stack.llm.requests)
        created = chat.invoke(
            rest_v1_event("POST", "/api/v1/conversations", {"title": "fresh"}, {"X-User-Id": "frank"})
        )
        cid = json.loads(created["body"])["conversationId"]
        chat.invoke(
            rest_v1_event("POST", f"/api/v1/conversations/{cid}/chat", {"message": "hi"}, {"X-User-Id": "frank"})
        )
        # Then the provider saw the placeholder as the key (and would refuse it), not a JSON parse in the function
        assert stack.llm.authorizations[before:] == [f"Bearer {placeholder}"]
    finally:
        chat.stop()
        secrets.put_secret_value(SecretId=stack.account.physical[logical], SecretString=LLM_API_KEY)
