"""Real Lambda event shapes: API Gateway REST (payload v1) and HTTP API / Function URL (payload v2)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass
class FakeLambdaContext:
    function_name: str = "agent-core-chat"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:agent-core-chat"
    aws_request_id: str = "c6af9ac6-7b61-11e6-9a41-93e812345678"
    function_version: str = "$LATEST"
    log_group_name: str = "/aws/lambda/agent-core-chat"
    log_stream_name: str = "2026/11/22/[$LATEST]abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return 28000


def rest_v1_event(
    method: str, path: str, body: Any = None, headers: dict[str, str] | None = None, query: dict[str, str] | None = None
) -> dict[str, Any]:
    """An API Gateway REST API Lambda proxy event (payload format 1.0)."""
    hdrs = {"Host": "abc123.execute-api.us-east-1.amazonaws.com", "Content-Type": "application/json", **(headers or {})}
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": hdrs,
        "multiValueHeaders": {k: [v] for k, v in hdrs.items()},
        "queryStringParameters": query,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourceId": "123456",
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "extendedRequestId": "c6af9ac6-7b61",
            "requestTime": "22/Nov/2026:09:00:00 +0000",
            "path": f"/prod{path}",
            "accountId": "123456789012",
            "protocol": "HTTP/1.1",
            "stage": "prod",
            "domainPrefix": "abc123",
            "requestTimeEpoch": 1795338000000,
            "requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
            "identity": {"sourceIp": "203.0.113.7", "userAgent": "curl/8.0", "userArn": None, "caller": None},
            "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
            "apiId": "abc123",
        },
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
    }


def http_v2_event(
    method: str, path: str, body: Any = None, headers: dict[str, str] | None = None, query: str = ""
) -> dict[str, Any]:
    """An HTTP API / Lambda Function URL event (payload format 2.0)."""
    hdrs = {"host": "abcdefg.lambda-url.us-east-1.on.aws", "content-type": "application/json", **(headers or {})}
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": hdrs,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abcdefg",
            "domainName": "abcdefg.lambda-url.us-east-1.on.aws",
            "domainPrefix": "abcdefg",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": "curl/8.0",
            },
            "requestId": "id-2",
            "routeKey": "$default",
            "stage": "$default",
            "time": "22/Nov/2026:09:00:00 +0000",
            "timeEpoch": 1795338000000,
        },
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
    }


def sqs_record(
    body: str, message_id: str, queue_arn: str, receipt: str = "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a=="
) -> dict[str, Any]:
    """One record of the event Lambda's SQS event source sends (a message as received from `queue_arn`)."""
    return {
        "messageId": message_id,
        "receiptHandle": receipt,
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "1767889800000",
            "SenderId": "AIDAIENQZJOLO23YVJ4VO",
            "ApproximateFirstReceiveTimestamp": "1767889800010",
        },
        "messageAttributes": {},
        "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": queue_arn.split(":")[3],
    }


def sqs_event(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    """The SQS event built from messages as `ReceiveMessage` returned them (Body, MessageId, ReceiptHandle, ...)."""
    records = []
    for message in messages:
        record = sqs_record(message["Body"], message["MessageId"], queue_arn, message["ReceiptHandle"])
        record["attributes"] = message.get("Attributes") or record["attributes"]
        record["md5OfBody"] = message.get("MD5OfBody", record["md5OfBody"])
        records.append(record)
    return {"Records": records}
