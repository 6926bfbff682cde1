"""The local AWS account: a standalone moto server (IAM enforced) behind a recording proxy (`recorder.py`).

- `MotoServer`: `moto_server` in its own process on loopback, started with `INITIAL_NO_AUTH_ACTION_COUNT=3`:
  the first three calls create an administrator; every later call must be signed by a principal whose
  policies allow it. The functions' `AWS_ENDPOINT_URL` is the recording proxy in front of it.
- `LocalAccount`: the template's table, bucket, queues and secrets created in moto from their own properties,
  one IAM role per function holding exactly the template's `AWS::IAM::Policy` statements attached to it,
  and the `Resolver` that maps the template's references to these resources.

moto authorises DynamoDB and Secrets Manager calls by action only (it checks them against resource `*`):
their statements are installed with `Resource: *`, so the action is enforced there; SQS and S3 statements keep
their resolved ARNs and moto enforces both.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import string
import subprocess
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

from tests.support.deployed.build import Synthesis
from tests.support.deployed.recorder import BATCH_ACTIONS, RecordingProxy, iam_actions
from tests.support.deployed.template import ACCOUNT, REGION, Resolver
from tests.support.wait import NeverHappened, poll_until

# moto checks these services' actions against resource "*" only (no resource ARN is computed for them).
ACTION_ONLY_SERVICES = ("dynamodb:", "secretsmanager:", "logs:", "xray:")
# moto checks transactions and batches as their own action names: installed policies that grant the per-item
# action also grant the operation (the recorded per-item actions are still checked against the template).
MOTO_OPERATION_GRANTS = {
    "dynamodb:TransactWriteItems": (
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
    ),
    "dynamodb:TransactGetItems": ("dynamodb:GetItem",),
    **{batch: (single,) for batch, single in BATCH_ACTIONS.items()},
}
ADMIN_POLICY = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class MotoServer:
    """`moto_server` in its own process; the first `no_auth_calls` AWS calls skip authentication."""

    def __init__(self, executable: Path, log_path: Path, no_auth_calls: int = 3) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT=str(no_auth_calls))
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            [str(executable), "-H", "127.0.0.1", "-p", str(self.port)], env=env, stdout=self._log, stderr=self._log
        )
        try:
            poll_until(self._answers_or_exited, "moto_server answers", bound_s=60, interval_s=0.1)
        except NeverHappened:
            raise RuntimeError(f"moto_server did not start; see {log_path}") from None
        if self.process.poll() is not None:
            raise RuntimeError(f"moto_server did not start; see {log_path}")

    def _answers_or_exited(self) -> bool:
        if self.process.poll() is not None:
            return True
        try:
            urllib.request.urlopen(f"{self.url}/moto-api/", timeout=2).close()
        except OSError:
            return False
        return True

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()


@dataclass
class RoleCredentials:
    access_key: str
    secret_key: str
    session_token: str

    def environment(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_SESSION_TOKEN": self.session_token,
        }


PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"


def secret_alphabet(spec: dict[str, Any]) -> str:
    """The characters Secrets Manager's GenerateSecretString may use under `spec`."""
    alphabet = string.ascii_letters + string.digits + ("" if spec.get("ExcludePunctuation") else PUNCTUATION)
    return "".join(c for c in alphabet if c not in spec.get("ExcludeCharacters", ""))


def generated_secret(spec: dict[str, Any], first: str = "") -> str:
    """A value as GenerateSecretString would make it (length, characters); `first` if the spec allows it."""
    alphabet = secret_alphabet(spec)
    length = int(spec.get("PasswordLength", 32))
    head = first if first and first in alphabet else secrets.choice(alphabet)
    return head + "".join(secrets.choice(alphabet) for _ in range(length - 1))


@dataclass
class LocalAccount:
    """The template's resources in moto, its function roles, and the resolver for its references."""

    synthesis: Synthesis
    moto: MotoServer
    proxy: RecordingProxy
    resolver: Resolver = field(init=False)
    admin: boto3.session.Session = field(init=False)
    policies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # role logical id -> statements
    role_arns: dict[str, str] = field(default_factory=dict)
    physical: dict[str, str] = field(default_factory=dict)  # logical id -> name

    def __post_init__(self) -> None:
        stack = self.synthesis.template.get("Description", "AgentCore").split(" ")[0]
        self.resolver = Resolver(stack_name=stack)
        bootstrap = boto3.client(
            "iam",
            endpoint_url=self.moto.url,
            region_name=REGION,
            aws_access_key_id="bootstrap",
            aws_secret_access_key="bootstrap",
        )
        bootstrap.create_user(UserName="emulation-admin")
        bootstrap.put_user_policy(
            UserName="emulation-admin", PolicyName="admin", PolicyDocument=json.dumps(ADMIN_POLICY)
        )
        key = bootstrap.create_access_key(UserName="emulation-admin")["AccessKey"]
        self.admin = boto3.session.Session(
            aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"], region_name=REGION
        )

    def client(self, service: str) -> Any:
        """An administrator's client, straight to moto (not recorded)."""
        return self.admin.client(service, endpoint_url=self.moto.url)  # type: ignore[call-overload]

    def _name(self, logical_id: str, limit: int = 80) -> str:
        return f"{self.resolver.stack_name}-{logical_id}"[:limit]

    def create(self) -> LocalAccount:
        resources = self.synthesis.template["Resources"]
        by_type: dict[str, list[str]] = defaultdict(list)
        for logical, resource in resources.items():
            by_type[resource["Type"]].append(logical)
        for logical in by_type["AWS::Logs::LogGroup"]:
            name = f"/aws/lambda/{self._name(logical)}"
            self.resolver.refs[logical] = name
            self.resolver.attributes[(logical, "Arn")] = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{name}:*"
        for logical in by_type["AWS::DynamoDB::Table"]:
            self._table(logical, resources[logical]["Properties"])
        for logical in by_type["AWS::S3::Bucket"]:
            name = self._name(logical, 63).lower()
            self.client("s3").create_bucket(Bucket=name)
            self.physical[logical] = name
            self.resolver.refs[logical] = name
            self.resolver.attributes[(logical, "Arn")] = f"arn:aws:s3:::{name}"
        queues = sorted(by_type["AWS::SQS::Queue"], key=lambda q: "RedrivePolicy" in resources[q]["Properties"])
        for logical in queues:
            self._queue(logical, resources[logical]["Properties"])
        for logical in by_type["AWS::SecretsManager::Secret"]:
            self._secret(logical, resources[logical]["Properties"])
        for logical in by_type["AWS::Lambda::Function"]:
            name = self._name(logical, 64)
            self.physical[logical] = name
            self.resolver.refs[logical] = name
            self.resolver.attributes[(logical, "Arn")] = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
        for logical in by_type["AWS::IAM::Role"]:
            self._role(logical)
        for logical in by_type["AWS::IAM::Policy"]:
            self._policy(resources[logical]["Properties"])
        return self

    def _table(self, logical: str, props: dict[str, Any]) -> None:
        name = self._name(logical)
        ddb = self.client("dynamodb")
        args: dict[str, Any] = {
            "TableName": name,
            "KeySchema": props["KeySchema"],
            "AttributeDefinitions": props["AttributeDefinitions"],
            "BillingMode": props.get("BillingMode", "PROVISIONED"),
        }
        if props.get("GlobalSecondaryIndexes"):
            args["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"]
        ddb.create_table(**args)
        ttl = props.get("TimeToLiveSpecification")
        if ttl:
            ddb.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)
        self.physical[logical] = name
        self.resolver.refs[logical] = name
        self.resolver.attributes[(logical, "Arn")] = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"

    def _queue(self, logical: str, props: dict[str, Any]) -> None:
        name = self._name(logical)
        attributes: dict[str, str] = {}
        for prop in ("VisibilityTimeout", "MessageRetentionPeriod", "DelaySeconds", "ReceiveMessageWaitTimeSeconds"):
            if prop in props:
                attributes[prop] = str(props[prop])
        if "RedrivePolicy" in props:
            attributes["RedrivePolicy"] = json.dumps(self.resolver.resolve(props["RedrivePolicy"]))
        url = self.client("sqs").create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        self.physical[logical] = url
        self.resolver.refs[logical] = url
        self.resolver.attributes[(logical, "Arn")] = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"
        self.resolver.attributes[(logical, "QueueName")] = name

    def _secret(self, logical: str, props: dict[str, Any]) -> None:
        # CloudFormation names an unnamed secret `<logical id>-<random>`; the ARN adds `-<6 chars>`.
        name = f"{logical}-{secrets.token_hex(6)}"
        value = generated_secret(props.get("GenerateSecretString") or {})
        arn = self.client("secretsmanager").create_secret(Name=name, SecretString=value)["ARN"]
        self.physical[logical] = name
        self.resolver.refs[logical] = arn

    def _role(self, logical: str) -> None:
        name = self._name(logical, 64)
        trust = {  # Lambda assumes the role for the function; here the emulation does, as the administrator.
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
        }
        arn = self.client("iam").create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        self.role_arns[logical] = arn
        self.physical[logical] = name
        self.resolver.refs[logical] = name
        self.resolver.attributes[(logical, "Arn")] = arn

    def _policy(self, props: dict[str, Any]) -> None:
        document = self.resolver.resolve(props["PolicyDocument"])
        for role_ref in props.get("Roles", []):
            role_logical = role_ref["Ref"]
            self.policies.setdefault(role_logical, []).extend(document["Statement"])
            enforced = {"Version": "2012-10-17", "Statement": [_enforceable(s) for s in document["Statement"]]}
            self.client("iam").put_role_policy(
                RoleName=self.physical[role_logical],
                PolicyName=props["PolicyName"],
                PolicyDocument=json.dumps(enforced),
            )

    def assume(self, role_logical: str, session: str) -> RoleCredentials:
        """Credentials of the role, as Lambda hands them to the function (a role session)."""
        creds = self.client("sts").assume_role(RoleArn=self.role_arns[role_logical], RoleSessionName=session[:64])
        c = creds["Credentials"]
        return RoleCredentials(c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"])

    @contextmanager
    def denying(self, role_logical: str, operation: str) -> Iterator[None]:
        """An explicit Deny of `operation` on the role while the block runs (a failing dependency, on purpose)."""
        iam = self.client("iam")
        name = self.physical[role_logical]
        actions = sorted({operation, *iam_actions(operation, b"")}) if operation in BATCH_ACTIONS else [operation]
        deny = {"Version": "2012-10-17", "Statement": [{"Effect": "Deny", "Action": actions, "Resource": "*"}]}
        iam.put_role_policy(RoleName=name, PolicyName="emulation-deny", PolicyDocument=json.dumps(deny))
        try:
            yield
        finally:
            iam.delete_role_policy(RoleName=name, PolicyName="emulation-deny")

    def allowed_actions(self, role_logical: str) -> set[str]:
        found: set[str] = set()
        for statement in self.policies.get(role_logical, []):
            if statement.get("Effect") == "Allow":
                actions = statement["Action"]
                found.update([actions] if isinstance(actions, str) else actions)
        return found


def _enforceable(statement: dict[str, Any]) -> dict[str, Any]:
    """The statement as moto can enforce it (see the module docstring)."""
    actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
    extra = [op for op, granted_by in MOTO_OPERATION_GRANTS.items() if set(granted_by) & set(actions)]
    enforced = {**statement, "Action": actions + extra}
    if all(a.startswith(ACTION_ONLY_SERVICES) for a in actions):
        enforced["Resource"] = "*"
    elif "s3:DeleteObject" in actions:
        # AWS authorises DeleteObjects per key (s3:DeleteObject on bucket/key); moto checks it on the bucket.
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        enforced["Resource"] = resources + [r.removesuffix("/*") for r in resources if r.endswith("/*")]
    return enforced
