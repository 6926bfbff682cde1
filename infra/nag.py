"""cdk-nag (AwsSolutions) wiring and the one helper every acknowledgement goes through."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

RULE_PACK = "AwsSolutions"


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding (`AwsSolutions-XX` or `AwsSolutions-IAM5[Resource::...]`) on a subtree."""
    if len(reason) < 40:
        raise ValueError(f"acknowledging {rule} needs a specific reason, not {reason!r}")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule, reason=reason))


def add_checks(app: cdk.App) -> None:
    """Run the AwsSolutions pack on every template after synthesis (cdk-nag 3: a validation plugin)."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
