"""The engine reads back the worker's and router's container settings unchanged.

pulumi-docker diffs what it declared against what the engine reports on refresh; a value the
engine rewrites (a tag -> an image id, "bridge" -> "default", "container:<name>" -> an id) is a
perpetual diff. This creates containers with the components' exact values on the real engine
and reads them back, which is why the components need no ignore_changes. (`--gpus all` is the
one value not checked: this engine has no NVIDIA runtime.)
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from components import router as router_mod
from components import serving as serving_mod
from components import sglang_worker as worker_mod
from components.config import RouterConfig, ServingConfig
from tests.conftest import docker

pytestmark = pytest.mark.real


def create_and_inspect(args: list[str], image: str, command: list[str]) -> dict:
    name = f"benchstack-test-readback-{uuid.uuid4().hex[:10]}"
    try:
        docker("create", "--name", name, *args, image, *command)
        return json.loads(docker("inspect", name).stdout)[0]
    finally:
        docker("rm", "-f", name, check=False)


def test_worker_settings_read_back_unchanged(canary_image: str, tmp_path: Path) -> None:
    model = tmp_path / "Qwen3.8-27B"
    model.mkdir()
    image_id = docker("image", "inspect", "--format", "{{.Id}}", canary_image).stdout.strip()
    memlock = ServingConfig.model_fields["memlock"].default
    ulimits = {"memlock": memlock, "stack": worker_mod.STACK_BYTES}
    args = ["--network", "host", "--ipc", "host", "--user", "1000:1000",
            "--stop-timeout", str(worker_mod.WORKER_STOP_TIMEOUT_S),
            "--volume", f"{model}:/models/Qwen3.8-27B:ro", "--log-driver", serving_mod.LOG_DRIVER]
    for key, value in serving_mod.LOG_OPTS.items():
        args += ["--log-opt", f"{key}={value}"]
    for key, value in ulimits.items():
        args += ["--ulimit", f"{key}={value}:{value}"]
    for env in worker_mod.CONTAINER_ENV:
        args += ["--env", env]
    info = create_and_inspect(args, image_id, ["sglang", "serve", "--tp-size", "4"])
    host = info["HostConfig"]
    assert host["NetworkMode"] == "host"
    assert host["IpcMode"] == "host"
    assert {u["Name"]: (u["Soft"], u["Hard"]) for u in host["Ulimits"]} == {
        "memlock": (-1, -1), "stack": (67108864, 67108864)}
    assert host["Binds"] == [f"{model}:/models/Qwen3.8-27B:ro"]
    assert host["LogConfig"] == {"Type": "json-file",
                                 "Config": {"max-size": "100m", "max-file": "10"}}
    assert info["Config"]["User"] == "1000:1000"
    assert info["Config"]["StopTimeout"] == 30
    assert info["Config"]["Cmd"] == ["sglang", "serve", "--tp-size", "4"]
    assert set(worker_mod.CONTAINER_ENV) <= set(info["Config"]["Env"])
    # Referenced by id, the image reads back as the same id: no tag-vs-id diff.
    assert info["Image"] == image_id


def test_router_settings_read_back_unchanged(canary_image: str) -> None:
    image_id = docker("image", "inspect", "--format", "{{.Id}}", canary_image).stdout.strip()
    nofile = RouterConfig.model_fields["nofile"].default
    info = create_and_inspect(
        ["--network", "host", "--ulimit", f"nofile={nofile}:{nofile}", "--user", "1000:1000",
         "--env", "HOME=/tmp", "--stop-timeout", str(router_mod.ROUTER_STOP_TIMEOUT_S)],
        image_id, ["python3", "-m", "sglang_router.launch_router"],
    )
    assert info["HostConfig"]["NetworkMode"] == "host"
    assert info["HostConfig"]["Ulimits"] == [{"Name": "nofile", "Soft": 65536, "Hard": 65536}]
    assert info["Config"]["StopTimeout"] == 180
    assert info["Image"] == image_id
