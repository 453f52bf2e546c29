"""Fixtures for the audit tests: generated jobs, a local moto S3 server, and the real CLI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.audit.audit_jobgen import seed_final_run, write_job
from tests.conftest import ROOT

SEED_JOB_NAME = "qwen38-terminus2-tb21-full89-c25-a20-agent6x-20260830-234431"
SEED_ADJUDICATIONS = ROOT / "audit" / "adjudications.seed.yaml"


@pytest.fixture(scope="session")
def seed_job(tmp_path_factory) -> Path:
    """The seed's final run as a job dir of 89 trials (read-only for the tests)."""
    return write_job(tmp_path_factory.mktemp("seed"), SEED_JOB_NAME, seed_final_run())


@dataclass(frozen=True)
class CliResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def reason(self) -> str:
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        return lines[-1] if lines else ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_env(tmp_path_factory) -> dict[str, str]:
    """A moto S3 server on a free loopback port; the env that points boto3 at it."""
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    moto = Path(sys.executable).with_name("moto_server")
    if not moto.exists():
        pytest.fail(f"moto_server not found next to {sys.executable}: pip install 'moto[server]'")
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(port)],
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(endpoint, timeout=1.0, trust_env=False)
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"moto server did not start on {endpoint}: {log.read_text()}")
                time.sleep(0.2)
        yield {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def s3_client(s3_env, monkeypatch):
    """A boto3 client on the moto server (made by the package's own factory)."""
    for key, value in s3_env.items():
        monkeypatch.setenv(key, value)
    from audit.read.s3 import make_s3_client

    return make_s3_client()


@pytest.fixture
def bucket(s3_client) -> str:
    name = f"audit-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=name)
    yield name
    paginator = s3_client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=name):
        keys = [{"Key": obj["Key"]} for obj in page.get("Contents", [])]
        if keys:
            s3_client.delete_objects(Bucket=name, Delete={"Objects": keys, "Quiet": True})
    s3_client.delete_bucket(Bucket=name)


@pytest.fixture
def run_cli():
    """Run the real CLI (`python -m audit ...`) in a subprocess."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> CliResult:
        full_env = {**os.environ, **(env or {})}
        full_env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT), full_env.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep)
        proc = subprocess.run(
            [sys.executable, "-m", "audit", *args],
            capture_output=True,
            text=True,
            env=full_env,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            cwd=str(ROOT),
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    return run
