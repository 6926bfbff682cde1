"""Alarms (every function's errors and throttles, the REST API's 5xx, the dead-letter queue, turns refused by the
usage budgets, the estimated spend) and a dashboard."""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components import pascal
from infra.components.functions import METRICS_NAMESPACE, SERVICE_NAME
from infra.settings import InfraSettings

PERIOD = cdk.Duration.minutes(5)
HOUR = cdk.Duration.hours(1)


def app_metric(name: str, statistic: str, label: str) -> cw.Metric:
    """A metric the app emits through Powertools Metrics (namespace AgentCore, dimension service)."""
    return cw.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": SERVICE_NAME},
        statistic=statistic,
        period=PERIOD,
        label=label,
    )


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: InfraSettings,
        functions: Mapping[str, lambda_.Function],
        api: apigw.RestApi,
        dead_letters: sqs.IQueue | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: list[cw.Alarm] = []
        for name, fn in functions.items():
            cid = pascal(name)
            self._alarm(f"{cid}Errors", fn.metric_errors(period=PERIOD, statistic="Sum"), f"{name}: invocation errors")
            self._alarm(f"{cid}Throttles", fn.metric_throttles(period=PERIOD, statistic="Sum"), f"{name}: throttled")
        self._alarm("Api5xx", api.metric_server_error(period=PERIOD, statistic="Sum"), "REST API: 5xx answers")
        # The usage ledger and budgets (docs/operations.md has the runbooks).
        denials = cw.MathExpression(
            expression="budget + rate",
            using_metrics={
                "budget": app_metric("BudgetDenials", "Sum", "budget"),
                "rate": app_metric("RateLimitDenials", "Sum", "rate"),
            },
            label="turns refused",
            period=PERIOD,
        )
        self._alarm(
            "UsageDenials",
            denials,
            f"usage: {settings.budget_denials_alarm}+ turns refused (429) in 5 minutes",
            threshold=settings.budget_denials_alarm,
        )
        spend = app_metric("EstimatedCostMicroUsd", "Sum", "estimated spend (micro-USD)").with_(period=HOUR)
        self._alarm(
            "UsageSpend",
            spend,
            f"usage: estimated spend over {settings.spend_alarm_usd_per_hour} USD in an hour",
            threshold=round(settings.spend_alarm_usd_per_hour * 1_000_000),
        )
        if dead_letters is not None:
            self._alarm(
                "DeadLetters",
                dead_letters.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
                "work queue: jobs in the dead-letter queue",
            )

        tool_calls = cw.MathExpression(
            expression=f"SEARCH('{{{METRICS_NAMESPACE},status}} MetricName=\"ToolCalls\"', 'Sum', 300)",
            label="",
            period=PERIOD,
        )
        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=f"agent-core-{settings.stage}")
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Time to first token (ms)",
                left=[app_metric("TimeToFirstToken", stat, stat) for stat in ("p50", "p90", "p99")],
                width=8,
            ),
            cw.GraphWidget(
                title="Tokens",
                left=[
                    app_metric("PromptTokens", "Sum", "prompt"),
                    app_metric("CompletionTokens", "Sum", "completion"),
                ],
                width=8,
            ),
            cw.GraphWidget(title="Tool calls not ok, by status", left=[tool_calls], width=8),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(title="Estimated spend (micro-USD per hour)", left=[spend], width=12),
            cw.GraphWidget(
                title="Turns refused (429)",
                left=[app_metric("BudgetDenials", "Sum", "budget"), app_metric("RateLimitDenials", "Sum", "rate")],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Function invocations and errors",
                left=[
                    fn.metric_invocations(period=PERIOD, label=f"{name} invocations") for name, fn in functions.items()
                ],
                right=[fn.metric_errors(period=PERIOD, label=f"{name} errors") for name, fn in functions.items()],
                width=12,
            ),
            cw.GraphWidget(
                title="REST API",
                left=[api.metric_count(period=PERIOD), api.metric_client_error(period=PERIOD)],
                right=[api.metric_server_error(period=PERIOD), api.metric_latency(period=PERIOD, statistic="p90")],
                width=12,
            ),
        )
        self.dashboard.add_widgets(cw.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24))

    def _alarm(self, construct_id: str, metric: cw.IMetric, description: str, threshold: float = 1) -> None:
        self.alarms.append(
            cw.Alarm(
                self,
                construct_id,
                metric=metric,
                threshold=threshold,
                evaluation_periods=1,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                alarm_description=description,
            )
        )
