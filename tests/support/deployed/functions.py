"""A template function started as Lambda starts it: a fresh process on its own Runtime API.

The environment is exactly the template's `Environment.Variables` (intrinsics resolved to the local account)
plus what Lambda itself sets (the reserved variables, the role's session credentials). The one addition is
`AWS_ENDPOINT_URL`, which points boto3 at the local account. `sys.path` holds the function code asset (the
working directory, `LAMBDA_TASK_ROOT`), the layer (`/opt/python` on Lambda) and the runtime's own packages
(awslambdaric, boto3). A function whose handler is a script behind `AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap`
(the Lambda Web Adapter's wrapper) runs under the adapter emulation in `web_adapter.py`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.deployed.aws import LocalAccount, free_port
from tests.support.deployed.build import Runtime, Synthesis
from tests.support.deployed.runtime_api import FunctionError, RuntimeApi
from tests.support.deployed.template import REGION

WEB_ADAPTER_WRAPPER = "/opt/bootstrap"
WEB_ADAPTER = Path(__file__).with_name("web_adapter.py")
# Variables Lambda sets itself; a function's configuration cannot set them.
RESERVED = (
    "_HANDLER",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_EXECUTION_ENV",
    "AWS_LAMBDA_FUNCTION_NAME",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
    "AWS_LAMBDA_FUNCTION_VERSION",
    "AWS_LAMBDA_INITIALIZATION_TYPE",
    "AWS_LAMBDA_LOG_GROUP_NAME",
    "AWS_LAMBDA_LOG_STREAM_NAME",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_LAMBDA_RUNTIME_API",
    "LAMBDA_TASK_ROOT",
    "LAMBDA_RUNTIME_DIR",
)


@dataclass(frozen=True)
class FunctionDefinition:
    """One `AWS::Lambda::Function` of the template, named by its registry name (`chat`, `stream`, ...)."""

    name: str
    logical_id: str
    properties: dict[str, Any]

    @property
    def handler(self) -> str:
        return str(self.properties["Handler"])

    @property
    def variables(self) -> dict[str, Any]:
        return dict((self.properties.get("Environment") or {}).get("Variables") or {})

    @property
    def role_logical_id(self) -> str:
        return str(self.properties["Role"]["Fn::GetAtt"][0])


def function_definitions(synthesis: Synthesis) -> dict[str, FunctionDefinition]:
    """The registry's functions in the template: handler `functions.<name>.handler.handler` or `functions/<name>/...`."""
    found: dict[str, FunctionDefinition] = {}
    for logical, resource in synthesis.resources("AWS::Lambda::Function").items():
        handler = resource["Properties"]["Handler"]
        if not handler.startswith("functions"):
            continue  # CDK's own providers (S3 auto-delete)
        name = handler.replace("/", ".").split(".")[1]
        found[name] = FunctionDefinition(name, logical, resource["Properties"])
    return found


class FunctionProcess:
    """A started function: `invoke` / `invoke_streaming` through its Runtime API; `init_s` its init time."""

    def __init__(
        self,
        definition: FunctionDefinition,
        synthesis: Synthesis,
        account: LocalAccount,
        runtime: Runtime,
        log_dir: Path,
        endpoints: dict[str, str] | None = None,
    ) -> None:
        self.definition = definition
        self.endpoints = dict(endpoints or {})  # boto3 endpoint variables of services outside moto (Bedrock)
        props = definition.properties
        self.function_name = account.physical[definition.logical_id]
        self.api = RuntimeApi(account.resolver.attributes[(definition.logical_id, "Arn")], int(props.get("Timeout", 3)))
        self.credentials = account.assume(definition.role_logical_id, self.function_name)
        self.task_root = synthesis.asset_path(definition.logical_id)
        layer_ids = [ref["Ref"] for ref in props.get("Layers", []) if isinstance(ref, dict) and "Ref" in ref]
        self.layer_dirs = [synthesis.asset_path(layer) / "python" for layer in layer_ids]
        self.environment = self._environment(account, runtime)
        self.log_path = log_dir / f"{definition.name}-{time.time_ns()}.log"
        self._log = self.log_path.open("wb")
        self.started_at = time.monotonic()
        if self.environment.get("AWS_LAMBDA_EXEC_WRAPPER") == WEB_ADAPTER_WRAPPER:
            command = [sys.executable, str(WEB_ADAPTER)]
        else:
            command = [str(runtime.python), "-m", "awslambdaric", definition.handler]
        # Its own process group: the Web Adapter's app server (run.sh -> uvicorn) goes with it on stop.
        self.process = subprocess.Popen(
            command,
            cwd=self.task_root,
            env=self.environment,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _environment(self, account: LocalAccount, runtime: Runtime) -> dict[str, str]:
        props = self.definition.properties
        variables = {k: str(v) for k, v in account.resolver.resolve(self.definition.variables).items()}
        clash = sorted(set(variables) & set(RESERVED))
        if clash:
            raise AssertionError(f"{self.definition.name}: the template sets reserved variables {clash}")
        version = runtime.version
        reserved = {
            "_HANDLER": self.definition.handler,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_EXECUTION_ENV": f"AWS_Lambda_python{version}",
            "AWS_LAMBDA_FUNCTION_NAME": self.function_name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(props.get("MemorySize", 128)),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{self.function_name}",
            "AWS_LAMBDA_LOG_STREAM_NAME": time.strftime("%Y/%m/%d/[$LATEST]") + "0" * 32,
            "AWS_LAMBDA_RUNTIME_API": self.api.address,
            "LAMBDA_TASK_ROOT": str(self.task_root),
            "LAMBDA_RUNTIME_DIR": str(runtime.bin_dir.parent),
            "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
            "AWS_XRAY_DAEMON_ADDRESS": f"127.0.0.1:{free_port()}",
            "TZ": ":UTC",
            "LANG": "en_US.UTF-8",
            "PATH": f"{runtime.bin_dir}:/usr/local/bin:/usr/bin:/bin",
            # Lambda puts /opt/python (the layers) on sys.path; here the layer lives in the assembly.
            "PYTHONPATH": ":".join(str(d) for d in self.layer_dirs),
            **self.credentials.environment(),
        }
        if variables.get("AWS_LAMBDA_EXEC_WRAPPER") == WEB_ADAPTER_WRAPPER:
            # The sandbox has its own network; here the app's port must not collide with anything else.
            reserved["PORT"] = str(free_port())
        return {**variables, **reserved, "AWS_ENDPOINT_URL": account.proxy.url, **self.endpoints}

    def wait_ready(self, timeout: float = 90) -> float:
        """Wait for the end of init (the first `next`); the init time in seconds. Raises on an init error."""
        while not self.api.ready.wait(0.1):
            if self.process.poll() is not None:
                raise FunctionError("process exited during init", {"errorMessage": self.log_tail()})
            if time.monotonic() - self.started_at > timeout:
                raise TimeoutError(f"{self.definition.name} not ready in {timeout} s:\n{self.log_tail()}")
        if self.api.init_error is not None:
            raise FunctionError("init error", self.api.init_error)
        assert self.api.ready_at is not None
        return self.api.ready_at - self.started_at

    def invoke(self, event: Any, timeout: float = 60) -> Any:
        return self.api.invoke(event, timeout)

    def invoke_streaming(self, event: Any, timeout: float = 60) -> Any:
        return self.api.invoke_streaming(event, timeout)

    def log_tail(self, lines: int = 60) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def crash(self) -> None:
        """The instance dies as a crashed sandbox does, mid-invocation: SIGKILL to all its processes (the
        adapter, run.sh, uvicorn), no shutdown, no flush. `stop` then closes its Runtime API."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """Stop the function's process group (the process and anything it started)."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=10)
                if sig == signal.SIGTERM:
                    os.killpg(self.process.pid, signal.SIGKILL)  # children that outlived their parent
            except subprocess.TimeoutExpired:
                continue
            except ProcessLookupError:
                pass
            break
        self.api.stop()
        self._log.close()
