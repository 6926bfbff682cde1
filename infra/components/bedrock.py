"""The IAM of the Bedrock provider: invoke exactly the configured models, directly or through their profiles.

A model id (`amazon.nova-pro-v1:0`) is a foundation model of the stack's Region. An id with a geography
prefix (`us.`, `eu.`, `apac.`, `global.`, ...) is a cross-Region inference profile: the call is authorised on
the profile in the stack's Region and on the foundation model in whichever Region the profile routes it to,
so the model is granted in every Region (`*`; global profiles also name it without a Region) but only when
the request comes through that profile (`bedrock:InferenceProfileArn`). A full ARN (an application inference
profile, provisioned throughput) is granted as given.

A configured guardrail (`guardrailId`) adds `bedrock:ApplyGuardrail` on that one guardrail's ARN.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam

INVOKE_ACTIONS = ("bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream")
GUARDRAIL_ACTIONS = ("bedrock:ApplyGuardrail",)
# The geography prefixes of Bedrock's system-defined cross-Region inference profiles.
PROFILE_PREFIX = re.compile(r"^(us|us-gov|eu|apac|jp|au|ca|global)\.(.+)$")


def _arn(resource: str, region: str = cdk.Aws.REGION, account: str = "") -> str:
    return f"arn:{cdk.Aws.PARTITION}:bedrock:{region}:{account}:{resource}"


def profile_of(model: str) -> tuple[str, str] | None:
    """(geography, foundation model id) of a cross-Region inference profile id, else None."""
    match = PROFILE_PREFIX.match(model)
    return (match.group(1), match.group(2)) if match else None


def bedrock_statements(models: Sequence[str]) -> list[iam.PolicyStatement]:
    """Invoke statements for the models: one for the models and profiles, one per profile's foundation model."""
    direct: list[str] = []
    routed: list[iam.PolicyStatement] = []
    for model in models:
        if model.startswith("arn:"):
            direct.append(model)
            continue
        profile = profile_of(model)
        if profile is None:
            direct.append(_arn(f"foundation-model/{model}", account=""))
            continue
        geography, base = profile
        profile_arn = _arn(f"inference-profile/{model}", account=cdk.Aws.ACCOUNT_ID)
        direct.append(profile_arn)
        resources = [_arn(f"foundation-model/{base}", region="*")]
        if geography == "global":
            resources.append(_arn(f"foundation-model/{base}", region=""))
        routed.append(
            iam.PolicyStatement(
                actions=list(INVOKE_ACTIONS),
                resources=resources,
                conditions={"StringEquals": {"bedrock:InferenceProfileArn": profile_arn}},
            )
        )
    return [iam.PolicyStatement(actions=list(INVOKE_ACTIONS), resources=direct), *routed]


def guardrail_statement(identifier: str) -> iam.PolicyStatement:
    """ApplyGuardrail on exactly the configured guardrail (an id is a guardrail of the stack's account and Region)."""
    arn = identifier if identifier.startswith("arn:") else _arn(f"guardrail/{identifier}", account=cdk.Aws.ACCOUNT_ID)
    return iam.PolicyStatement(actions=list(GUARDRAIL_ACTIONS), resources=[arn])


def nag_wildcards(models: Sequence[str]) -> list[str]:
    """The resources cdk-nag reports as wildcards (the profiles' foundation models in every Region)."""
    out = []
    for model in models:
        if not model.startswith("arn:") and (profile := profile_of(model)) is not None:
            out.append(f"arn:<AWS::Partition>:bedrock:*::foundation-model/{profile[1]}")
    return out
