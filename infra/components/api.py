"""The REST API: every route of every registry entry, proxied to its function (buffered or streamed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.components import removal_policy, retention
from infra.nag import acknowledge
from infra.registry import FunctionSpec
from infra.settings import InfraSettings

CORS_HEADERS = [
    "Authorization",
    "Content-Type",
    "X-Request-Id",
    "X-User-Id",
    "X-Timezone",
    "Last-Event-ID",  # a browser resuming a dropped stream (docs/protocol.md, "Resume")
    "X-Amz-Date",
    "X-Amz-Security-Token",
]
# Every media type is binary to the REST API: a buffered Lambda proxy response with isBase64Encoded (a PNG
# from the data function, any non-text file) is decoded for the client only when the request's *first*
# Accept type matches a binary media type, and browsers put image/avif, image/webp or text/html first.
# Text answers (isBase64Encoded false) pass through unchanged; request bodies reach the functions
# base64-encoded (Mangum and the Web Adapter decode them). See docs/infrastructure.md "Binary responses".
BINARY_MEDIA_TYPES = ["*/*"]
# API Gateway names the log group of a stage's execution logs itself; it creates it, without retention,
# on the first log line unless it exists already.
EXECUTION_LOG_GROUP = "API-Gateway-Execution-Logs_{api_id}/{stage}"


class RestFrontDoor(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: InfraSettings,
        specs: Sequence[FunctionSpec],
        functions: Mapping[str, lambda_.IFunction],
    ) -> None:
        super().__init__(scope, construct_id)
        s = self.settings = settings
        removal = removal_policy(settings)
        self.access_logs = logs.LogGroup(self, "AccessLogs", retention=retention(s), removal_policy=removal)
        authorization = apigw.AuthorizationType.IAM if s.auth_mode == "iam" else apigw.AuthorizationType.NONE
        self.api = apigw.RestApi(
            self,
            "Api",
            rest_api_name=f"agent-core-{s.stage}",
            description="agent-core: chat, streaming and data routes",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            binary_media_types=BINARY_MEDIA_TYPES,
            cloud_watch_role=True,
            deploy_options=apigw.StageOptions(
                stage_name=s.stage,
                throttling_rate_limit=s.throttling_rate_limit,
                throttling_burst_limit=s.throttling_burst_limit,
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                metrics_enabled=True,
                tracing_enabled=True,
            ),
            default_method_options=apigw.MethodOptions(authorization_type=authorization),
            default_cors_preflight_options=apigw.CorsOptions(
                allow_origins=list(s.cors_origins),
                allow_methods=apigw.Cors.ALL_METHODS,
                allow_headers=CORS_HEADERS,
                max_age=cdk.Duration.hours(1),
            )
            if s.cors_origins
            else None,
        )
        # The stack has its own RestApiUrl output; drop the one RestApi adds by itself.
        self.api.node.try_remove_child("Endpoint")
        # Execution logs (loggingLevel ERROR) go to a group API Gateway names after the API and stage: create
        # it first, with the stack's retention, so API Gateway writes into it instead of creating its own.
        self.execution_logs = logs.LogGroup(
            self,
            "ExecutionLogs",
            log_group_name=EXECUTION_LOG_GROUP.format(api_id=self.api.rest_api_id, stage=s.stage),
            retention=retention(s),
            removal_policy=removal,
        )
        self.api.deployment_stage.node.add_dependency(self.execution_logs)
        self.methods: list[apigw.Method] = []
        for spec in specs:
            if spec.routes:
                self._add_routes(spec, functions[spec.name])
        self.usage_plan = self.api.add_usage_plan(
            "UsagePlan",
            name=f"agent-core-{s.stage}",
            description="Default throttle for the stage (per-client limits need API keys)",
            throttle=apigw.ThrottleSettings(rate_limit=s.throttling_rate_limit, burst_limit=s.throttling_burst_limit),
            api_stages=[apigw.UsagePlanPerApiStage(api=self.api, stage=self.api.deployment_stage)],
        )
        self._text_preflight()
        self._acknowledge()

    def _text_preflight(self) -> None:
        """CORS preflight (mock integrations) as text: with binary media type */* API Gateway treats the
        OPTIONS request as binary and cannot apply the mock's request template (500) otherwise."""
        for method in self.api.methods:
            if method.http_method == "OPTIONS":
                cfn = method.node.default_child
                assert isinstance(cfn, apigw.CfnMethod)
                cfn.add_property_override("Integration.ContentHandling", "CONVERT_TO_TEXT")

    def _add_routes(self, spec: FunctionSpec, fn: lambda_.IFunction) -> None:
        integration = apigw.LambdaIntegration(
            fn,
            proxy=True,
            allow_test_invoke=False,
            response_transfer_mode=apigw.ResponseTransferMode.STREAM if spec.streaming else None,
            # Buffered integrations stop at 29 s; a streamed response may run up to 15 minutes.
            timeout=cdk.Duration.seconds(min(spec.timeout_s, 900) if spec.streaming else 29),
        )
        for route in spec.routes:
            resource = self.api.root.resource_for_path(route.path)
            for method in route.methods:
                self.methods.append(resource.add_method(method, integration))

    def _acknowledge(self) -> None:
        s = self.settings
        acknowledge(
            self.api,
            "AwsSolutions-APIG2",
            "Request bodies are validated by the functions (pydantic models behind one error mapper that "
            "answers the documented error shape); gateway validation would answer a different shape.",
        )
        acknowledge(
            self.api,
            "AwsSolutions-APIG3",
            "No WAF web ACL by default: the stage is throttled (rate and burst settings and a usage plan) and "
            "every route authenticates; attach an account-level WAF where the organisation has one.",
        )
        acknowledge(
            self.api,
            "AwsSolutions-COG4",
            "No Cognito user pool: identity is a JWT from any OIDC issuer verified in the function against the "
            "issuer's JWKS (authMode jwt), or SigV4 via IAM authorization (authMode iam).",
        )
        if s.auth_mode != "iam":
            acknowledge(
                self.api,
                "AwsSolutions-APIG4",
                f"authMode '{s.auth_mode}': the gateway passes requests through and the function authenticates "
                "every route (JWT signature, issuer and audience against the JWKS; 'none' only in the dev stage).",
            )
        acknowledge(
            self.api,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]",
            "The account-level API Gateway logging role needs AWS's push-to-CloudWatch managed policy; it is "
            "assumable only by apigateway.amazonaws.com.",
        )
