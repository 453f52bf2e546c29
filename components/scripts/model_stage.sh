#!/usr/bin/env bash
# Stages a model checkpoint from S3 (or any S3 API) into MODEL_PATH on this host, with boto3.
# Idempotent: objects already present with the same size are skipped, so a re-run after an
# interruption resumes instead of re-downloading tens of GB. Each object is written to a
# `.part` file and renamed when complete; a failure removes the `.part` file it was writing
# (completed objects stay: they are whole, and the re-run skips them).
#
# Inputs (environment):
#   S3_URI                 s3://bucket/prefix of the checkpoint (required)
#   MODEL_PATH             the directory to fill (required)
#   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY   credentials (default: boto3's own chain)
#   AWS_DEFAULT_REGION     (default: us-east-1)
#   S3_ENDPOINT_URL        a non-AWS S3 API (default: unset)
#   STAGE_PYTHON           a python3 that already imports boto3; skips the venv (default: unset)
#   STAGE_VENV             the cached venv (default: $HOME/.cache/benchstack/stage-boto3-$BOTO3_VERSION)
#   BOTO3_VERSION          (default: 1.44.8)
#   STAGE_PIP_ARGS         extra `pip install` arguments, e.g. an index mirror (default: unset)
# Output: {"model_path", "objects", "downloaded", "skipped", "bytes"} on the last stdout line.
set -euo pipefail

die() { printf 'model_stage: %s\n' "$*" >&2; exit 1; }
log() { printf '[model_stage] %s\n' "$*" >&2; }
: "${BENCHSTACK_CODE:?BENCHSTACK_CODE is empty: run this through the host seam, which ships the host code}"
# shellcheck source=lib/pinned_venv.sh
source "$BENCHSTACK_CODE/scripts/lib/pinned_venv.sh"

[[ "${S3_URI:-}" == s3://?* ]] || die "S3_URI=${S3_URI:-} is not s3://bucket/prefix: fix model.s3_uri"
[[ -n "${MODEL_PATH:-}" ]] || die "MODEL_PATH is empty: set it to the checkpoint directory"
BOTO3_VERSION=${BOTO3_VERSION:-1.44.8}
STAGE_VENV=${STAGE_VENV:-$HOME/.cache/benchstack/stage-boto3-$BOTO3_VERSION}
export AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-us-east-1}

if [[ -n "${STAGE_PYTHON:-}" ]]; then
  "$STAGE_PYTHON" -c 'import boto3' 2>/dev/null \
    || die "STAGE_PYTHON=$STAGE_PYTHON cannot import boto3: unset it to use the staging venv"
  python=$STAGE_PYTHON
else
  python=$(pinned_venv "$STAGE_VENV" boto3 "boto3==$BOTO3_VERSION" 600 STAGE_PIP_ARGS \
    "${STAGE_PIP_ARGS:-}")
fi

log "staging $S3_URI into $MODEL_PATH"
S3_URI=$S3_URI MODEL_PATH=$MODEL_PATH "$python" - <<'PY'
import json, os, sys
from pathlib import Path, PurePosixPath

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

uri = os.environ["S3_URI"]
bucket, _, prefix = uri[len("s3://"):].partition("/")
prefix = prefix.strip("/")
root = Path(os.environ["MODEL_PATH"])

def fail(message):
    print(f"model_stage: {message}", file=sys.stderr)
    sys.exit(1)

client = boto3.client(
    "s3",
    endpoint_url=os.environ.get("S3_ENDPOINT_URL") or None,
    # Standard retry mode backs off on throttling and resets: large checkpoints hit both.
    config=Config(retries={"max_attempts": 10, "mode": "standard"}, connect_timeout=10,
                  read_timeout=120),
)
objects = []
try:
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=f"{prefix}/" if prefix else ""
    ):
        objects.extend(page.get("Contents", []))
except (BotoCoreError, ClientError) as exc:
    fail(f"cannot list {uri}: {exc}; check the credentials and model.s3_uri")
objects = [o for o in objects if not o["Key"].endswith("/")]
if not objects:
    fail(f"no objects under {uri}: check model.s3_uri")

root.mkdir(parents=True, exist_ok=True)
downloaded = skipped = total = 0
for obj in objects:
    rel = PurePosixPath(obj["Key"]).relative_to(prefix) if prefix else PurePosixPath(obj["Key"])
    if ".." in rel.parts:
        fail(f"object key {obj['Key']!r} escapes the model directory")
    target = root / rel
    total += obj["Size"]
    if target.is_file() and target.stat().st_size == obj["Size"]:
        skipped += 1
        continue
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(f".{target.name}.part")
    print(f"[model_stage] {obj['Key']} ({obj['Size']} bytes)", file=sys.stderr, flush=True)
    try:
        client.download_file(bucket, obj["Key"], str(part))
        if part.stat().st_size != obj["Size"]:
            raise OSError(f"got {part.stat().st_size} bytes, expected {obj['Size']}")
        part.replace(target)
    except (BotoCoreError, ClientError, OSError) as exc:
        part.unlink(missing_ok=True)
        fail(f"download of s3://{bucket}/{obj['Key']} failed: {exc}; re-run to resume")
    downloaded += 1

print(json.dumps({"model_path": str(root), "objects": len(objects), "downloaded": downloaded,
                  "skipped": skipped, "bytes": total}))
PY
