"""The boto3 half of the `model_stage` step: a checkpoint copied from S3 (or any S3 API) into a
directory on this host. Run by model_stage.py with the python of a venv that has boto3 (it needs
more than the standard library); it imports nothing from the project (nor from the package).

Its spec is one JSON object on standard input (the credentials are in it: never an argument,
which `ps` shows): s3_uri, model_path, region, endpoint_url, aws_access_key_id and
aws_secret_access_key (null: boto3's own chain). Idempotent: objects already present with the
same size are skipped, so a re-run after an interruption resumes instead of re-downloading tens
of GB. Each object is written to a `.part` file and renamed when complete; a failure removes the
`.part` file it was writing (completed objects stay: they are whole, and the re-run skips them).

Progress goes to stderr; the result is one JSON object on the last stdout line (model_path,
objects, downloaded, skipped, bytes); a failure is one line, `model_stage: reason`, exit 1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError


class StageError(Exception):
    """Why the copy failed: the one line the user reads."""


def stage(spec: dict[str, Any]) -> dict[str, Any]:
    uri = str(spec["s3_uri"])
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    prefix = prefix.strip("/")
    root = Path(spec["model_path"])
    client = boto3.client(
        "s3",
        endpoint_url=spec["endpoint_url"] or None,
        region_name=spec["region"],
        aws_access_key_id=spec["aws_access_key_id"] or None,
        aws_secret_access_key=spec["aws_secret_access_key"] or None,
        # Standard retry mode backs off on throttling and resets: large checkpoints hit both.
        config=Config(retries={"max_attempts": 10, "mode": "standard"}, connect_timeout=10,
                      read_timeout=120),
    )
    objects: list[dict[str, Any]] = []
    try:
        for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=f"{prefix}/" if prefix else ""
        ):
            objects.extend(page.get("Contents", []))
    except (BotoCoreError, ClientError) as exc:
        raise StageError(
            f"cannot list {uri}: {exc}; check the credentials and model.s3_uri") from None
    objects = [o for o in objects if not o["Key"].endswith("/")]
    if not objects:
        raise StageError(f"no objects under {uri}: check model.s3_uri")

    root.mkdir(parents=True, exist_ok=True)
    downloaded = skipped = total = 0
    for obj in objects:
        key, size = obj["Key"], obj["Size"]
        rel = PurePosixPath(key).relative_to(prefix) if prefix else PurePosixPath(key)
        if ".." in rel.parts:
            raise StageError(f"object key {key!r} escapes the model directory")
        target = root / rel
        total += size
        if target.is_file() and target.stat().st_size == size:
            skipped += 1
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(f".{target.name}.part")
        print(f"[model_stage] {key} ({size} bytes)", file=sys.stderr, flush=True)
        try:
            client.download_file(bucket, key, str(part))
            if part.stat().st_size != size:
                raise OSError(f"got {part.stat().st_size} bytes, expected {size}")
            part.replace(target)
        except (BotoCoreError, ClientError, OSError) as exc:
            part.unlink(missing_ok=True)
            raise StageError(
                f"download of s3://{bucket}/{key} failed: {exc}; re-run to resume") from None
        downloaded += 1
    return {"model_path": str(root), "objects": len(objects), "downloaded": downloaded,
            "skipped": skipped, "bytes": total}


def main() -> int:
    try:
        result = stage(json.loads(sys.stdin.read()))
    except StageError as exc:
        print(f"model_stage: {exc}", file=sys.stderr, flush=True)
        return 1
    print(json.dumps(result, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
