"""The model_check and model_stage steps for real, as the seam runs them: checkpoints on disk, a
moto S3 API on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from tests.conftest import ScriptResult
from tests.serving.conftest import UNUSED_VENVS, free_port, run_step, stop, wait_listening

pytestmark = [pytest.mark.real, pytest.mark.no_docker]

SHARDS = {"model-00001-of-00003.safetensors": 3000, "model-00002-of-00003.safetensors": 2000,
          "model-00003-of-00003.safetensors": 1000}


def make_checkpoint(root: Path, *, total_size: int | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps({"architectures": ["Qwen3NextForCausalLM"]}))
    (root / "tokenizer_config.json").write_text("{}")
    (root / "tokenizer.json").write_text("{}")
    weight_map = {}
    for i, (name, size) in enumerate(SHARDS.items()):
        (root / name).write_bytes(os.urandom(size))
        weight_map[f"layers.{i}.weight"] = name
        weight_map[f"layers.{i}.bias"] = name
    index = {"metadata": {"total_size": total_size or sum(SHARDS.values()) - 100},
             "weight_map": weight_map}
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    return root


def model_check(model: Path, user: str | None = None) -> ScriptResult:
    return run_step("model_check", {"model_path": str(model), "user": user})


def test_complete_checkpoint_passes(tmp_path: Path) -> None:
    model = make_checkpoint(tmp_path / "Qwen3.8-27B")
    result = model_check(model, "1000:1000")
    assert result.returncode == 0, result.stderr
    assert result.outputs["shards"] == 3
    assert result.outputs["bytes"] == sum(SHARDS.values())
    assert result.outputs["model_path"] == str(model)


def test_missing_shard_and_tokenizer_are_all_named(tmp_path: Path) -> None:
    model = make_checkpoint(tmp_path / "m")
    (model / "model-00002-of-00003.safetensors").unlink()
    (model / "tokenizer.json").unlink()
    result = model_check(model)
    assert result.returncode == 1
    assert "1 of 3 shard(s) missing: model-00002-of-00003.safetensors" in result.reason
    assert "no tokenizer" in result.reason
    assert str(model) in result.reason


def test_truncated_download_is_caught(tmp_path: Path) -> None:
    model = make_checkpoint(tmp_path / "m", total_size=sum(SHARDS.values()) + 1)
    result = model_check(model)
    assert result.returncode == 1
    assert "cut short" in result.reason


def test_shard_unreadable_by_the_container_user(tmp_path: Path) -> None:
    model = make_checkpoint(tmp_path / "m")
    tmp_path.chmod(0o755)
    model.chmod(0o755)
    (model / "model-00003-of-00003.safetensors").chmod(0o600)  # root-owned, owner-only
    result = model_check(model, "1000:1000")
    assert result.returncode == 1
    assert "not readable by 1000:1000" in result.reason
    assert "model-00003-of-00003.safetensors" in result.reason


def test_missing_directory(tmp_path: Path) -> None:
    result = model_check(tmp_path / "nope")
    assert result.returncode == 1
    assert "is not a directory" in result.reason


@pytest.fixture
def s3() -> Iterator[str]:
    """Our own moto S3 API on a loopback port (never a shared one)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening("127.0.0.1", port, proc, timeout=30)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


CREDS = {"aws_access_key_id": "stage-test", "aws_secret_access_key": "stage-test-secret"}


def model_stage(s3: str, uri: str, model: Path) -> ScriptResult:
    """The step as SGLangWorker declares it, the credentials on its standard input; this python
    has boto3 (model.stage_python)."""
    inputs = {"s3_uri": uri, "model_path": str(model), "region": "us-east-1",
              "endpoint_url": s3, "python": sys.executable, "venvs_dir": UNUSED_VENVS,
              "pip_args": []}
    return run_step("model_stage", inputs, secrets=CREDS)


def test_stage_from_s3_then_check_and_resume(s3: str, tmp_path: Path) -> None:
    source = make_checkpoint(tmp_path / "source")
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1", **CREDS)
    client.create_bucket(Bucket="models")
    for path in source.iterdir():
        client.upload_file(str(path), "models", f"qwen/Qwen3.8-27B/{path.name}")
    client.put_object(Bucket="models", Key="qwen/Qwen3.8-27B-other/config.json", Body=b"{}")

    target = tmp_path / "staged" / "Qwen3.8-27B"
    first = model_stage(s3, "s3://models/qwen/Qwen3.8-27B", target)
    assert first.returncode == 0, first.stderr
    n = len(list(source.iterdir()))  # the other model's object under a similar prefix is not
    assert first.outputs["objects"] == n and first.outputs["downloaded"] == n
    assert sorted(p.name for p in target.iterdir()) == sorted(p.name for p in source.iterdir())
    for path in source.iterdir():
        assert (target / path.name).read_bytes() == path.read_bytes()
    assert model_check(target).returncode == 0

    # A lost shard (an interrupted copy) is fetched again; the rest is skipped.
    (target / "model-00002-of-00003.safetensors").unlink()
    again = model_stage(s3, "s3://models/qwen/Qwen3.8-27B", target)
    assert again.returncode == 0, again.stderr
    assert again.outputs["downloaded"] == 1 and again.outputs["skipped"] == n - 1
    assert not list(target.glob(".*.part"))


def test_stage_empty_prefix_fails_naming_the_uri(s3: str, tmp_path: Path) -> None:
    boto3.client("s3", endpoint_url=s3, aws_access_key_id="x", aws_secret_access_key="y",
                 region_name="us-east-1").create_bucket(Bucket="models")
    result = model_stage(s3, "s3://models/absent", tmp_path / "m")
    assert result.returncode == 1
    assert "no objects under s3://models/absent" in result.reason
    assert not (tmp_path / "m").exists()
