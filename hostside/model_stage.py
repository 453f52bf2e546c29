"""A model checkpoint staged from S3 (or any S3 API) into the model directory on this host
(SGLangWorker's `-model-stage`), with boto3: s3_fetch.py, run with `python` (a python that
imports boto3, from the config) or with the staging venv, built once under `venvs_dir`.

create: copies every object under `s3_uri` into `model_path`, skipping those already there
whole (a re-run resumes); outputs model_path, objects, downloaded, skipped, bytes. The
credentials (null: boto3's own chain) are secrets: they come on standard input and go on to
s3_fetch.py the same way.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .pinned_venv import python_with, run_program
from .step import HostError, log, verb

if TYPE_CHECKING:
    # Not imported: run as a program by the venv's python (it needs boto3). Named here so that
    # the step's code digest (host.module_closure) covers it.
    from . import s3_fetch  # noqa: F401

NAME = "model_stage"
# The boto3 the staging venv pins (the project's own: the one s3_fetch.py is tested with).
BOTO3_VERSION = "1.44.8"
VENV_NAME = f"stage-boto3-{BOTO3_VERSION}"
PIP_TIMEOUT_S = 600


@dataclass(frozen=True)
class Inputs:
    s3_uri: str
    model_path: str
    region: str
    endpoint_url: str | None
    python: str | None
    venvs_dir: str
    pip_args: list[str]
    aws_access_key_id: str | None
    aws_secret_access_key: str | None


@verb(Inputs)
def create(inputs: Inputs) -> None:
    if not inputs.s3_uri.startswith("s3://") or len(inputs.s3_uri) <= len("s3://"):
        raise HostError(f"{inputs.s3_uri!r} is not s3://bucket/prefix: fix model.s3_uri")
    python = python_with(
        "boto3", inputs.python, key="model.stage_python",
        venv=Path(inputs.venvs_dir) / VENV_NAME, requirement=f"boto3=={BOTO3_VERSION}",
        pip_timeout_s=PIP_TIMEOUT_S, pip_args=inputs.pip_args, step=NAME,
    )
    log(NAME, f"staging {inputs.s3_uri} into {inputs.model_path}")
    spec = {k: v for k, v in asdict(inputs).items()
            if k not in ("python", "venvs_dir", "pip_args")}
    code = run_program(python, "s3_fetch.py", stdin=json.dumps(spec))
    if code != 0:
        # s3_fetch.py said why on its last stderr line: that is the step's reason.
        raise SystemExit(code)
