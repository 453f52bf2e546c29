"""The one place that builds boto3 S3 clients, and the s3:// URI parser.

Credentials and the endpoint come from the usual AWS sources (environment, profile); an
S3-compatible store is selected with `AWS_ENDPOINT_URL` or `--s3-endpoint-url`. Everything else
in the package receives a client: tests inject one pointed at a local moto server.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

S3_SCHEME = "s3://"


@dataclass(frozen=True)
class S3Uri:
    bucket: str
    prefix: str  # no leading or trailing slash; "" means the bucket root

    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def __str__(self) -> str:
        return f"{S3_SCHEME}{self.bucket}/{self.prefix}".rstrip("/")


def is_s3_uri(value: str) -> bool:
    return value.startswith(S3_SCHEME)


def parse_s3_uri(value: str) -> S3Uri:
    if not is_s3_uri(value):
        raise ValueError(f"{value!r} is not an s3:// URI (expected s3://bucket/prefix)")
    bucket, _, prefix = value[len(S3_SCHEME) :].partition("/")
    if not bucket:
        raise ValueError(f"{value!r} has no bucket name (expected s3://bucket/prefix)")
    return S3Uri(bucket=bucket, prefix=prefix.strip("/"))


def make_s3_client(endpoint_url: str | None = None) -> Any:
    """Build the S3 client. boto3 is imported here so local audits never pay for it."""
    import boto3
    from botocore.config import Config

    endpoint = (
        endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    )
    # Bounded retries: an archive run against an unreachable store should fail in seconds, and
    # the archive itself is resumable, so there is no need to retry for minutes.
    config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=10)
    return boto3.client("s3", endpoint_url=endpoint, config=config)
