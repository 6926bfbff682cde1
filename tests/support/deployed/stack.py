"""The whole emulated deployment: build inputs, the local account, the LLM stub, the function processes.

`DeployedStack.start()` builds (or reuses) the runtime and the synthesized assembly, starts moto and the
recording proxy, creates the template's resources and roles, and puts the LLM key into its secret as an
operator does after `cdk deploy`. `function(name)` starts a registry function once (a template variant, e.g.
jwt mode, can be asked for) and keeps it for reuse; `report()` lists each function's init time and actions.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.bedrock_stub import BedrockStub
from tests.support.deployed import build
from tests.support.deployed.aws import LocalAccount, MotoServer
from tests.support.deployed.functions import FunctionDefinition, FunctionProcess, function_definitions
from tests.support.deployed.recorder import Call, RecordingProxy
from tests.support.openai_stub import OpenAiStub

LLM_API_KEY = "sk-emulated-deployment-key"
DEFAULT_VARIANT = "dev"
SUPPORTED_RUNTIMES = ("3.12", "3.13")  # infra.settings pythonRuntime


class UnsupportedRuntime(RuntimeError):
    """No interpreter of a runtime version the stack deploys is on this machine."""


@dataclass
class FunctionReport:
    name: str
    init_s: float
    actions: set[str]
    allowed: set[str]


USAGE_DAILY_TOKENS = 1_000_000
USAGE_REQUESTS_PER_MINUTE = 600
USAGE_DAILY_COST_USD = 100.0
# The `time` tool asks a person only for this zone: the tier's approval case calls it so.
APPROVAL_ZONE = "Antarctica/Troll"
TOOL_APPROVAL = {"time": {"when": {"arg": "timezone", "equals": APPROVAL_ZONE}, "reason": "the Troll station"}}


@dataclass
class DeployedStack:
    runtime: build.Runtime
    synthesis: build.Synthesis
    variants: dict[str, build.Synthesis]
    moto: MotoServer
    proxy: RecordingProxy
    account: LocalAccount
    llm: OpenAiStub
    log_dir: Path
    bedrock: BedrockStub = field(default_factory=lambda: BedrockStub().start())  # the Bedrock Runtime endpoint
    processes: dict[tuple[str, str], FunctionProcess] = field(default_factory=dict)
    deliberate_denials: set[tuple[str, str]] = field(default_factory=set)  # (access key, operation) a case caused
    init_times: dict[str, float] = field(default_factory=dict)

    @classmethod
    def start(cls, variants: dict[str, dict[str, Any]] | None = None) -> DeployedStack:
        """Build and start everything; `variants` maps a name to extra CDK context (e.g. authMode=jwt)."""
        runtime = build.runtime()
        if runtime.version not in SUPPORTED_RUNTIMES:
            raise UnsupportedRuntime(f"{runtime.note}: the stack deploys Python {'/'.join(SUPPORTED_RUNTIMES)} only")
        llm = OpenAiStub().start()
        outdir = build.BUILD_DIR / "cdk.out"
        base = {
            "architecture": build.ARCHITECTURE,
            "pythonRuntime": runtime.version,
            "openaiBaseUrl": llm.base_url,
            # Budgets every turn of the tier is admitted under (a conditional UpdateItem before the model call).
            "usageDailyTokenBudget": USAGE_DAILY_TOKENS,
            "usageRequestsPerMinute": USAGE_REQUESTS_PER_MINUTE,
            "usageDailyCostBudgetUsd": USAGE_DAILY_COST_USD,
            # One rule every case but the approval case leaves alone (tests/deployed/test_stream.py).
            "toolApproval": json.dumps(TOOL_APPROVAL),
        }
        synthesis = build.synthesize(base, outdir)
        synthesized = {DEFAULT_VARIANT: synthesis}
        for name, context in (variants or {}).items():
            synthesized[name] = build.synthesize({**base, **context}, outdir)  # same assets: no rebuild
        build.prune_assets(outdir, list(synthesized.values()))
        log_dir = build.BUILD_DIR / "logs"
        shutil.rmtree(log_dir, ignore_errors=True)
        log_dir.mkdir(parents=True)
        moto_server = Path(sys.executable).with_name("moto_server")
        moto = MotoServer(moto_server, log_dir / "moto.log")
        proxy = RecordingProxy(moto.port)
        account = LocalAccount(synthesis, moto, proxy).create()
        secret = next(
            logical
            for logical, r in synthesis.template["Resources"].items()
            if r["Type"] == "AWS::SecretsManager::Secret" and logical.startswith("LlmApiKey")
        )
        account.client("secretsmanager").put_secret_value(SecretId=account.physical[secret], SecretString=LLM_API_KEY)
        return cls(runtime, synthesis, synthesized, moto, proxy, account, llm, log_dir)

    def definition(self, name: str, variant: str = DEFAULT_VARIANT) -> FunctionDefinition:
        return function_definitions(self.variants[variant])[name]

    def function(self, name: str, variant: str = DEFAULT_VARIANT) -> FunctionProcess:
        """The started function (started on first use, then reused: warm invocations)."""
        key = (name, variant)
        if key not in self.processes:
            process = self.launch(name, variant)
            self.processes[key] = process
            init = process.wait_ready()
            self.init_times.setdefault(name, init)
        return self.processes[key]

    def launch(self, name: str, variant: str = DEFAULT_VARIANT) -> FunctionProcess:
        """A new process of the function (not cached): cold starts for measuring."""
        synthesis = self.variants[variant]
        endpoints = {"AWS_ENDPOINT_URL_BEDROCK_RUNTIME": self.bedrock.endpoint_url}
        return FunctionProcess(
            self.definition(name, variant), synthesis, self.account, self.runtime, self.log_dir, endpoints
        )

    def logical_id(self, construct_path: str) -> str:
        """The logical id CDK gave the construct path (e.g. `WorkQueue` -> `WorkQueueAD162499`)."""
        (found,) = [k for k in self.account.physical if re.fullmatch(f"{construct_path}[0-9A-F]{{8}}", k)]
        return found

    def resource(self, construct_path: str) -> str:
        """The local name (the URL for a queue) of a template resource, by its construct path."""
        return self.account.physical[self.logical_id(construct_path)]

    def arn(self, construct_path: str) -> str:
        return self.account.resolver.attributes[(self.logical_id(construct_path), "Arn")]

    def receive_all(self) -> list[dict[str, Any]]:
        """Every message the work queue holds now (received, so out of sight for its visibility timeout)."""
        sqs = self.account.client("sqs")
        url = self.resource("WorkQueue")
        got: list[dict[str, Any]] = []
        while True:
            batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]).get(
                "Messages", []
            )
            if not batch:
                return got
            got += batch

    def report(self) -> list[FunctionReport]:
        by_key = self.proxy.actions_by_key()
        actions: dict[str, set[str]] = {}
        for (name, _variant), process in self.processes.items():
            actions.setdefault(name, set()).update(by_key.get(process.credentials.access_key, set()))
        return [
            FunctionReport(
                name,
                self.init_times.get(name, float("nan")),
                actions.get(name, set()),
                self.account.allowed_actions(self.definition(name).role_logical_id),
            )
            for name in sorted(actions)
        ]

    @contextmanager
    def denying(self, name: str, operation: str) -> Iterator[None]:
        """The function's role is denied `operation` (e.g. sqs:SendMessageBatch) while the block runs."""
        process = self.function(name)
        self.deliberate_denials.add((process.credentials.access_key, operation))
        with self.account.denying(process.definition.role_logical_id, operation):
            yield

    def unexpected_denials(self) -> list[Call]:
        return [c for c in self.proxy.denied() if (c.access_key, c.operation) not in self.deliberate_denials]

    def stop(self) -> None:
        for process in self.processes.values():
            process.stop()
        self.proxy.stop()
        self.moto.stop()
        self.llm.stop()
        self.bedrock.stop()
