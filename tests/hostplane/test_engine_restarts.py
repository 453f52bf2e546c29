"""The engine restart's faults (hostside/dockerd_restart.py), for real: the tests' own second
dockerd, started the ways an operator's engine may have been started, restarted by the
daemon_config step as it restarts a host's engine when the stack gives no restart command (the
dockerd serving the step's socket, stopped and started again with its own command line).

Each fault ends with the engine answering; where the step fails, daemon.json is byte for byte
what it was before. The one exception is held too: an engine the stack's own restart command
stops and cannot start again is named by that command, in the step's one-line failure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.seam.step import render_step
from hostside.dockerd_restart import STOP_TIMEOUT_S, Dockerd
from tests.conftest import ROOT, ScriptResult
from tests.hostplane.conftest import BASE_CONFIG, HERE, TINY_IMAGE, SecondEngine, isolated_engine
from tests.hostplane.steps import step_command
from tests.hostplane.test_daemon_config import inputs_for, snapshot

pytestmark = pytest.mark.real

MERGED_POOLS = [{"Base": "172.18.0.0/15", "Size": 24}]
# A pool given on the engine's command line: dockerd refuses a daemon.json that sets it too.
FLAG_POOL = "base=10.99.0.0/16,size=24"


@pytest.fixture
def engine(test_engine: SecondEngine) -> Iterator[SecondEngine]:
    test_engine.reset()
    try:
        yield test_engine
    finally:
        test_engine.standard()


def running(engine: SecondEngine) -> Dockerd:
    return Dockerd.read(engine.pid())


def create(engine: SecondEngine, **over: Any) -> ScriptResult:
    """The step as a stack with no restart command runs it: the running dockerd is restarted."""
    return engine.step("create", inputs_for(engine, restart_command="", proof_networks=2, **over))


def delete(engine: SecondEngine) -> ScriptResult:
    return engine.step("delete", inputs_for(engine, restart_command="", proof_networks=2))


def a_checkout(tmp_path: Path) -> Path:
    """A folder with the engine's binary in bin/ (a link, as a release folder holds one)."""
    checkout = tmp_path / "checkout"
    (checkout / "bin").mkdir(parents=True)
    (checkout / "bin" / "dockerd").symlink_to(shutil.which("dockerd") or "/usr/sbin/dockerd")
    return checkout


def test_working_directory_deleted(engine: SecondEngine, tmp_path: Path) -> None:
    """The issue's CI failure: dockerd started from a clone, the clone deleted since."""
    checkout = a_checkout(tmp_path)
    engine.start_as(TE_CWD=str(checkout))
    shutil.rmtree(checkout)
    before = engine.pid()

    res = create(engine)
    assert res.returncode == 0, res.stderr
    assert f"its working directory {checkout} is gone: starting it from /" in res.stderr
    now = running(engine)
    assert now.pid != before and now.cwd == "/"
    assert engine.pools() == MERGED_POOLS

    # The destroy's restart, the engine's working directory gone again.
    engine.start_as(TE_CWD=str(a_checkout(tmp_path)))
    shutil.rmtree(checkout)
    gone = delete(engine)
    assert gone.returncode == 0, gone.stderr
    assert engine.config.read_text() == BASE_CONFIG and engine.pools() == []
    assert running(engine).cwd == "/"


def test_log_file_deleted(engine: SecondEngine) -> None:
    log = engine.dir / "dockerd.log"
    assert running(engine).log == str(log)
    log.unlink()

    res = create(engine)
    assert res.returncode == 0, res.stderr
    assert f"its log {log} was deleted: it logs there again" in res.stderr
    assert engine.pools() == MERGED_POOLS
    now = running(engine)
    assert now.log == str(log) and "API listen on" in log.read_text()


def test_binary_named_by_a_relative_path(engine: SecondEngine, tmp_path: Path) -> None:
    """`bin/dockerd` from a release folder that is gone since: the binary /proc names runs, with
    the command line as it was."""
    checkout = a_checkout(tmp_path)
    engine.start_as(TE_CWD=str(checkout), TE_BIN="bin/dockerd")
    before = running(engine)
    assert before.argv[0] == "bin/dockerd"
    shutil.rmtree(checkout)

    res = create(engine)
    assert res.returncode == 0, res.stderr
    now = running(engine)
    assert now.argv == before.argv and now.exe == before.exe and now.cwd == "/"
    assert engine.pools() == MERGED_POOLS


def test_pools_on_the_engines_command_line_are_refused_before_anything(
    engine: SecondEngine,
) -> None:
    """An engine given its pools on its command line would refuse a daemon.json that sets them
    too: the step refuses first, naming the flag and the key, and changes nothing (the engine is
    not restarted, daemon.json is byte for byte what it was, no backup is made)."""
    engine.start_as(TE_ARGS=f"--default-address-pool {FLAG_POOL}")
    before = snapshot(engine)

    res = create(engine)
    assert res.returncode != 0
    assert res.reason == (
        f"daemon_config: dockerd (pid {before['pid']}) is started with --default-address-pool, "
        f"and {engine.config} would set default-address-pools too: dockerd refuses a setting "
        "given both ways; remove --default-address-pool from how the engine is started")
    assert snapshot(engine) == before


def test_a_bip_on_the_engines_command_line_is_not_pinned_again(engine: SecondEngine) -> None:
    """--bip on the engine's command line places docker0 already: the merged file leaves `bip`
    out (dockerd would refuse it given both ways), docker0 stays where the flag puts it through
    the create and the destroy, and the destroy puts the original file back."""
    # The tests' base config places docker0 itself: this engine's flag does, its file does not.
    engine.config.write_text('{\n  "labels": ["benchstack.test=1"]\n}\n')
    engine.start_as(TE_ARGS="--bip 10.98.0.1/24")
    before = engine.config.read_bytes()
    try:
        res = create(engine)
        assert res.returncode == 0, res.stderr
        assert "bip" not in json.loads(engine.config.read_text())
        assert engine.pools() == MERGED_POOLS and engine.docker0() == "10.98.0.1/24"
        assert "--bip" in running(engine).argv
        res = delete(engine)
        assert res.returncode == 0, res.stderr
        assert engine.config.read_bytes() == before and engine.docker0() == "10.98.0.1/24"
    finally:
        # The engine keeps docker0's address in its own store: a fresh one for the next test.
        engine.pristine()


def blind_copy(tmp_path: Path) -> str:
    """The host code with the step's check of the engine's command line taken out: what a
    refusal the step cannot foresee looks like to it."""
    for package in ("hostside", "contracts"):
        shutil.copytree(ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    module = tmp_path / "hostside" / "daemon_json.py"
    text = module.read_text()
    assert "\nFLAGS_OF_KEY = {" in text
    module.write_text(text.replace("\nFLAGS_OF_KEY = {", "\nFLAGS_OF_KEY: dict = {}\n_ = {", 1))
    return str(tmp_path)


def test_daemon_json_the_new_engine_refuses(engine: SecondEngine, tmp_path: Path) -> None:
    """A new engine that refuses the merged daemon.json at start, for a reason the step's own
    checks did not see (here the pools on its command line, with that check taken out of a copy
    of the host code): the original config comes back and the engine's original command line
    starts from / on it."""
    engine.start_as(TE_ARGS=f"--default-address-pool {FLAG_POOL}")
    flag_pools = engine.pools()
    assert flag_pools == [{"Base": "10.99.0.0/16", "Size": 24}]
    before = engine.config.read_bytes()

    command = render_step("daemon_config", "create",
                          inputs_for(engine, restart_command="", proof_networks=2),
                          blind_copy(tmp_path))
    proc = subprocess.run(["nsenter", f"--net=/run/netns/{engine.ns}", "sh", "-c", command],
                          capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    res = ScriptResult(proc.returncode, proc.stdout, proc.stderr)
    assert res.returncode != 0
    assert "dockerd exited at start (code 1): " in res.reason
    assert "specified both as a flag and in the configuration file" in res.reason
    assert "with the merged config; original restored" in res.reason
    assert "starting the engine again with its original command line" in res.stderr
    assert engine.config.read_bytes() == before
    assert engine.pools() == flag_pools
    now = running(engine)
    assert now.cwd == "/" and "--default-address-pool" in now.argv


def test_a_check_failing_after_the_restart_starts_the_original_again(
    engine: SecondEngine,
) -> None:
    """The new engine runs but the step fails after (here: the file written is not the one the
    engine reads): the engine it started is stopped, and the original command line starts from
    / on the original file."""
    other = engine.dir / "other-daemon.json"
    other.write_text(BASE_CONFIG)
    before, pid = other.read_bytes(), engine.pid()
    res = create(engine, daemon_json=str(other))
    assert res.returncode != 0
    assert "is docker.daemon_json the file this engine reads? original restored" in res.reason
    assert "starting the engine again with its original command line" in res.stderr
    assert other.read_bytes() == before and engine.config.read_text() == BASE_CONFIG
    now = running(engine)
    assert now.pid != pid and now.cwd == "/" and engine.pools() == []


def test_old_process_slow_to_stop(engine: SecondEngine) -> None:
    """A running container whose stop takes longer than the least stop wait: the engine gets as
    long as its own shutdown takes, and is neither killed nor given up on."""
    engine.docker("run", "-d", "--name", "bste-slow", "--network", "none", "--stop-timeout",
                  str(STOP_TIMEOUT_S + 10), TINY_IMAGE, "/bin/sleep", "600")
    started = time.monotonic()
    res = create(engine, allow_restart_with_running_containers=True)
    took = time.monotonic() - started
    assert res.returncode == 0, res.stderr
    assert took > STOP_TIMEOUT_S, f"the engine stopped in {took:.0f}s: not the slow case"
    assert "killing it" not in res.stderr
    assert engine.pools() == MERGED_POOLS


def test_binary_gone_is_refused_before_anything(engine: SecondEngine, tmp_path: Path) -> None:
    """An engine whose binary is gone could not be started again: nothing is stopped."""
    checkout = tmp_path / "checkout"
    (checkout / "bin").mkdir(parents=True)
    shutil.copy2(shutil.which("dockerd") or "/usr/sbin/dockerd", checkout / "bin" / "dockerd")
    engine.start_as(TE_CWD=str(checkout), TE_BIN="bin/dockerd")
    shutil.rmtree(checkout)
    before = snapshot(engine)

    res = create(engine)
    assert res.returncode != 0
    assert f"runs {checkout}/bin/dockerd, which is gone: it could not be started again" in (
        res.reason)
    assert snapshot(engine) == before


def test_restart_command_that_stops_the_engine_and_fails_is_named(engine: SecondEngine) -> None:
    """The stack's own restart command stops the engine and fails, twice: the one line names
    it as what starts the engine again, and daemon.json is the original."""
    command = f"{engine.stop_cmd}; false"
    before = engine.config.read_bytes()
    res = engine.step("create", inputs_for(engine, restart_command=command, proof_networks=2))
    assert res.returncode != 0
    assert res.reason.endswith(f"start it with '{command}'"), res.reason
    assert "original restored" in res.reason
    assert engine.config.read_bytes() == before
    assert engine.docker("info", check=False).returncode != 0


def test_failed_restart_of_a_destroy_puts_its_config_back(engine: SecondEngine,
                                                          tmp_path: Path) -> None:
    """The destroy's restart fails once: daemon.json and the record are as before the destroy,
    and the engine answers on them (the destroy can run again)."""
    res = create(engine)
    assert res.returncode == 0, res.stderr
    record = engine.dir / "daemon.json.benchstack.json"
    merged, kept = engine.config.read_bytes(), record.read_bytes()
    marker = tmp_path / "failed-once"
    once = f"if [ -e {marker} ]; then {engine.restart_cmd}; else touch {marker}; false; fi"

    gone = engine.step("delete", inputs_for(engine, restart_command=once))
    assert gone.returncode != 0
    assert "put back as it was before this delete" in gone.reason
    assert engine.config.read_bytes() == merged and record.read_bytes() == kept
    assert engine.pools() == MERGED_POOLS

    again = delete(engine)
    assert again.returncode == 0, again.stderr
    assert engine.config.read_text() == BASE_CONFIG and engine.pools() == []


def test_the_issues_sequence_where_it_is_the_only_dockerd(docker_engine: None,
                                                          tmp_path: Path) -> None:
    """The failure of issue 38 as it happened: the host's only dockerd started from a clone, the
    clone deleted, then the stack's create and destroy (no restart command: the engine is the
    one dockerd of its PID namespace, as a CI machine's is). Both pass, the engine answers after
    each, started from / since, and daemon.json is the original at the end."""
    checkout = tmp_path / "first-clone"
    checkout.mkdir()
    with isolated_engine() as engine:
        inputs = inputs_for(engine, restart_command="", proof_networks=2)
        proc = subprocess.run(
            ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "bash",
             str(HERE / "only_dockerd.sh"), str(checkout),
             step_command("daemon_config", "create", inputs),
             step_command("daemon_config", "delete", inputs)],
            env=engine.env, capture_output=True, text=True, timeout=600,
        )
        got = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
        assert proc.returncode == 0 and "step_exit_2" in got, proc.stderr
        assert (got["step_exit_1"], got["answers_1"]) == ("0", "yes"), proc.stderr
        assert f"its working directory {checkout} is gone: starting it from /" in proc.stderr
        assert json.loads(got["pools_1"]) == MERGED_POOLS and got["cwd_1"] == "/"
        assert (got["step_exit_2"], got["answers_2"]) == ("0", "yes"), proc.stderr
        assert not json.loads(got["pools_2"]) and got["cwd_2"] == "/"
        assert engine.config.read_text() == BASE_CONFIG
