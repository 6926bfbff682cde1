"""S3 adapter for the BlobStore port: boto3 in a worker thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from agent_core.config import Settings
from agent_core.store.aws_client import ThreadedAwsClient, boto_client
from agent_core.store.blob import Blob, BlobInfo
from agent_core.store.disposition import content_disposition

_MISSING = frozenset({"404", "NoSuchKey", "NotFound"})
_DEFAULT_TYPE = "application/octet-stream"


def make_s3_client(settings: Settings) -> Any:
    """An S3 client for S3BlobStore: SigV4, so presigned URLs carry X-Amz-Expires."""
    return boto_client(settings, "s3", signature_version="s3v4")


def _missing(exc: ClientError) -> bool:
    """Whether a ClientError means "no such object"."""
    return str(exc.response.get("Error", {}).get("Code", "")) in _MISSING


class S3BlobStore(ThreadedAwsClient):
    """The BlobStore port on one S3 (or moto) bucket."""

    def __init__(self, bucket: str, client_factory: Callable[[], Any]) -> None:
        self.bucket = bucket
        super().__init__(client_factory)

    async def put(self, key: str, body: bytes, content_type: str) -> None:
        await self._call("put_object", Bucket=self.bucket, Key=key, Body=body, ContentType=content_type)

    async def head(self, key: str) -> BlobInfo | None:
        try:
            response = await self._call("head_object", Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if _missing(exc):
                return None
            raise
        return BlobInfo(key, int(response.get("ContentLength", 0)), response.get("ContentType") or _DEFAULT_TYPE)

    async def get(self, key: str) -> Blob | None:
        try:
            response = await self._call("get_object", Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if _missing(exc):
                return None
            raise
        stream = response["Body"]
        try:
            body = await asyncio.to_thread(stream.read)
        finally:
            stream.close()
        return Blob(key, body, response.get("ContentType") or _DEFAULT_TYPE)

    async def presign_get(self, key: str, expires_s: int, *, download_name: str | None = None) -> str:
        params: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if download_name is not None:
            params["ResponseContentDisposition"] = content_disposition(download_name, attachment=True)
        url: str = await self._call("generate_presigned_url", "get_object", Params=params, ExpiresIn=expires_s)
        return url

    async def delete_prefix(self, prefix: str) -> None:
        if not prefix:
            raise ValueError("refusing to delete an empty prefix (the whole bucket)")
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "MaxKeys": 1000}
            if token:
                kwargs["ContinuationToken"] = token
            page = await self._call("list_objects_v2", **kwargs)
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                result = await self._call("delete_objects", Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})
                if result.get("Errors"):
                    raise RuntimeError(f"S3 refused to delete {len(result['Errors'])} objects under {prefix!r}")
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return
