"""The stack's building blocks, one construct per concern, and the helpers they share."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_logs as logs

from infra.settings import InfraSettings

_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS,
    2557: logs.RetentionDays.SEVEN_YEARS,
    2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


def retention(settings: InfraSettings) -> logs.RetentionDays:
    return _RETENTION[settings.log_retention_days]


def removal_policy(settings: InfraSettings) -> cdk.RemovalPolicy:
    """Dev stacks clean up after themselves; every other stage keeps its data and logs."""
    return cdk.RemovalPolicy.DESTROY if settings.is_dev else cdk.RemovalPolicy.RETAIN


def pascal(name: str) -> str:
    """`daily_summary` -> `DailySummary`: construct ids and output names."""
    return "".join(part.capitalize() for part in name.split("_"))
