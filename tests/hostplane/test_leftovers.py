"""The leftovers stage of tests/run.sh (tests/env/leftovers.py), for real: what an interrupted run
leaves outside the Docker engine, its folders deleted since (the run's clone or temp folder
gone), is found and removed. Each test removes only what it planted: other tests of this run
hold engines and bridges of their own meanwhile."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from components.config import ProxyConfig
from components.proxy_bridge import step_inputs
from tests.conftest import PROXY
from tests.env import leftovers
from tests.hostplane.conftest import BASE_CONFIG, ENGINE_HELPER, SecondEngine, free_port
from tests.hostplane.steps import run_step
from tests.hostplane.test_daemon_config import inputs_for

pytestmark = pytest.mark.real


def listening(port: int) -> bool:
    return bool(subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True,
                               text=True).stdout.strip())


def test_an_interrupted_runs_second_engine_is_found_and_removed(docker_engine: None) -> None:
    """The host-plane tests' engine, its namespace and folders, as a killed run leaves them."""
    ns = f"bste-{uuid.uuid4().hex[:8]}"
    te_dir = Path(tempfile.mkdtemp(prefix="bste-engine-"))
    run_dir = Path(tempfile.mkdtemp(prefix="bste.", dir="/run"))
    engine = SecondEngine(ns=ns, dir=te_dir, run_dir=run_dir)
    engine.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TE_NS": ns, "TE_DIR": str(te_dir),
                  "TE_RUN": str(run_dir), "DOCKER_HOST": engine.socket}
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        (te_dir / "daemon.json").write_text(BASE_CONFIG)
        engine.helper("start")
        engine.wait_ready()
        pid = engine.pid()
        assert pid in leftovers.second_engines()
        assert ns in leftovers.engine_namespaces()
        assert {str(te_dir), str(run_dir)} <= set(leftovers.engine_folders())

        leftovers.stop_processes([pid])
        leftovers.remove_engine_state([ns], [str(te_dir), str(run_dir)])
        assert pid not in leftovers.second_engines() and not leftovers.running(pid)
        assert ns not in leftovers.engine_namespaces()
        assert not te_dir.exists() and not run_dir.exists()
        mounts = Path("/proc/mounts").read_text()
        assert str(te_dir) not in mounts and str(run_dir) not in mounts
    finally:
        subprocess.run(["bash", str(ENGINE_HELPER), "stop"], env=engine.env, check=False)
        subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
        shutil.rmtree(te_dir, ignore_errors=True)
        shutil.rmtree(run_dir, ignore_errors=True)


def test_a_proxy_bridge_whose_state_folder_is_gone_is_found_and_stopped(
    docker_engine: None, tmp_path: Path,
) -> None:
    """A local stack's bridge that no destroy stopped (its workspace gone with its run): it still
    holds the bridge port the next run's stack needs, until the stage stops it."""
    port = free_port("0.0.0.0")
    state = tmp_path / "workspace" / "proxy"
    inputs = {**step_inputs(ProxyConfig(upstream=PROXY, bridge_port=port), str(state), "start",
                            None), "name": f"bste-bridge-{uuid.uuid4().hex[:8]}"}
    up = run_step("proxy_bridge", "create", inputs, timeout=120)
    assert up.returncode == 0, up.stderr
    loop = int((state / f"{inputs['name']}.pid").read_text())
    socat = int((state / f"{inputs['name']}.pid.socat").read_text())
    shutil.rmtree(tmp_path / "workspace")
    try:
        assert loop in leftovers.bridge_loops()
        leftovers.stop_processes([loop])
        assert loop not in leftovers.bridge_loops()
        # The loop stops its socat as it goes.
        deadline = time.monotonic() + 10
        while listening(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not listening(port)
    finally:
        leftovers.stop_processes([loop, socat])


def test_a_stacks_daemon_json_that_no_destroy_put_back_is_undone(test_engine: SecondEngine) -> None:
    """An interrupted run's merged daemon.json (its destroy never ran): found by its record and
    put back by the step's own delete to what was there before benchstack, the engine answering
    on it. Left in place, the next stack's up took the record's "before" for its own and its
    destroy removed the daemon.json that run had found (CI, 2026-12-05)."""
    test_engine.reset()
    created = test_engine.step("create", inputs_for(test_engine))
    assert created.returncode == 0, created.stderr
    record = f"{test_engine.config}.benchstack.json"
    assert leftovers.installed_configs(str(test_engine.config)) == [record]
    assert test_engine.config.read_text() != BASE_CONFIG

    why = leftovers.undo_config(record, docker_host=test_engine.socket,
                                restart_command=test_engine.restart_cmd,
                                wrap=["nsenter", f"--net=/run/netns/{test_engine.ns}"])
    assert why is None
    assert test_engine.config.read_text() == BASE_CONFIG
    assert leftovers.installed_configs(str(test_engine.config)) == []
    assert test_engine.docker("info", "--format", "{{.ID}}").stdout.strip()
    assert test_engine.pools() != [{"Base": "172.18.0.0/15", "Size": 24}]


def test_a_record_that_is_not_json_is_named_not_undone(tmp_path: Path) -> None:
    record = tmp_path / "daemon.json.benchstack.json"
    record.write_text("{not json")
    (tmp_path / "daemon.json").write_text("{}")
    why = leftovers.undo_config(str(record))
    assert why is not None and str(record) in why
    assert (tmp_path / "daemon.json").read_text() == "{}"
