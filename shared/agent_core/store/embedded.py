"""Embedded storage for local runs: moto in-process, the table and bucket created at start."""

from __future__ import annotations

import logging
import threading
from typing import Any

from agent_core.config import Settings
from agent_core.store.schema import TTL_ATTRIBUTE, create_table_kwargs

_lock = threading.Lock()
_mock: Any = None


def start_embedded_aws() -> None:
    """Start moto's in-process AWS once per process (installed by `make install`, not in the layer)."""
    global _mock
    with _lock:
        if _mock is not None:
            return
        try:
            from moto import mock_aws
        except ImportError as exc:  # pragma: no cover - the message is the point
            raise RuntimeError("embedded storage needs moto: run `make install`, or set AGENT_STORAGE=aws") from exc
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        _mock = mock_aws()
        _mock.start()


def ensure_resources(settings: Settings, dynamodb: Any, s3: Any) -> None:
    """Create the table (with TTL) and the data bucket if they do not exist yet."""
    existing = dynamodb.list_tables().get("TableNames", [])
    if settings.table_name not in existing:
        dynamodb.create_table(**create_table_kwargs(settings.table_name))
        dynamodb.update_time_to_live(
            TableName=settings.table_name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
        )
    buckets = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    if settings.data_bucket not in buckets:
        kwargs: dict[str, Any] = {"Bucket": settings.data_bucket}
        if settings.aws_region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": settings.aws_region}
        s3.create_bucket(**kwargs)
