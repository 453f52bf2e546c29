"""hostside/dockerd_restart.py with no Docker engine: what /proc says of a process whose folder,
log or binary is gone since, the socket a process serves, how long a stopping engine gets, and
the stop of a process that ignores SIGTERM (real processes, none of them an engine: the engine's
own faults are tests/hostplane/test_engine_restarts.py)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostside import dockerd_restart as dr


def execed(proc: subprocess.Popen) -> subprocess.Popen:
    """`proc` once its command line shows: Popen returns (vfork) before the kernel has set it."""
    deadline = time.monotonic() + 10
    while not Path(f"/proc/{proc.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline, "the process never showed its command line"
        time.sleep(0.01)
    return proc


def test_a_stopping_engine_gets_as_long_as_its_own_shutdown_takes() -> None:
    assert dr.stop_bound([], None) == dr.STOP_TIMEOUT_S
    assert dr.stop_bound([10, 10], None) == dr.STOP_TIMEOUT_S
    # A container that takes 70 s to stop: the engine waits 75 s for it; then the margin.
    assert dr.stop_bound([10, 70], None) == 70 + dr.SHUTDOWN_GRACE_S + dr.MARGIN_S
    assert dr.stop_bound([], 120) == 120 + dr.MARGIN_S


def test_what_proc_says_of_a_process_whose_folder_and_log_are_gone(tmp_path: Path) -> None:
    folder = tmp_path / "clone"
    (folder / "bin").mkdir(parents=True)
    sleep = shutil.which("sleep") or "/bin/sleep"
    (folder / "bin" / "sleep").symlink_to(sleep)
    log = tmp_path / "logs" / "out.log"
    log.parent.mkdir()
    with open(log, "ab") as out:
        proc = execed(subprocess.Popen(["bin/sleep", "60"], cwd=folder, stdout=out, stderr=out,
                                       env={"PATH": "/usr/bin:/bin", "MARK": "x=y"}))
    try:
        shutil.rmtree(folder)
        log.unlink()
        seen = dr.Dockerd.read(proc.pid)
        assert seen.argv == ["bin/sleep", "60"]
        assert seen.env == {"PATH": "/usr/bin:/bin", "MARK": "x=y"}
        assert (seen.cwd, seen.log) == (str(folder), str(log))
        assert seen.exe == os.path.realpath(sleep) and seen.binary() == seen.exe
        assert seen.unrestartable() is None
        # From / (its folder is gone), the binary /proc names stands for the relative one.
        assert seen.start_line() == f"cd / && {seen.exe} 60"
    finally:
        proc.kill()
        proc.wait()


def test_a_process_whose_binary_is_gone_is_not_restartable(tmp_path: Path) -> None:
    copy = tmp_path / "sleep"
    shutil.copy2(shutil.which("sleep") or "/bin/sleep", copy)
    proc = execed(subprocess.Popen([str(copy), "60"], stdout=subprocess.DEVNULL))
    try:
        copy.unlink()
        why = dr.Dockerd.read(proc.pid).unrestartable()
        assert why == (f"dockerd (pid {proc.pid}) runs {copy}, which is gone: it could not be "
                       "started again; restart it from a binary that exists, or set "
                       "docker.restart_command")
    finally:
        proc.kill()
        proc.wait()


def test_the_socket_a_process_serves(tmp_path: Path) -> None:
    path = tmp_path / "engine.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    try:
        assert dr.serves(os.getpid(), str(path))
        assert not dr.serves(os.getpid(), str(tmp_path / "other.sock"))
        assert dr.socket_path("") == "/var/run/docker.sock"
        assert dr.socket_path(f"unix://{path}") == str(path)
        assert dr.socket_path("tcp://127.0.0.1:2375") is None
    finally:
        server.close()


def test_a_process_that_ignores_sigterm_is_killed_past_its_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Hung past its bound: SIGKILL, and gone (a child of ours stays a zombie: gone too)."""
    ignores = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
               "print('ready', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", ignores], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    # Gone after the SIGKILL: stop() raises where it is not within KILL_WAIT_S (its own bound,
    # not a stopwatch here).
    dr.stop(proc.pid, 1)
    assert proc.wait(timeout=5) == -9
    assert f"dockerd (pid {proc.pid}) still runs 1s after SIGTERM: killing it" in (
        capsys.readouterr().err)


def test_a_start_that_exits_says_why_with_its_last_log_line(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("an earlier engine's line\n")
    fake = dr.Dockerd(pid=1, argv=[sys.executable, "-c", "print('refused: bad key'); exit(1)"],
                      env=dict(os.environ), cwd=str(tmp_path), exe=sys.executable, log=str(log))
    started = dr.launch(fake, "/")
    started.popen.wait(timeout=30)
    assert started.exited() == "dockerd exited at start (code 1): refused: bad key"


def test_an_engines_own_fork_is_not_a_second_engine(tmp_path: Path) -> None:
    """A dockerd forks itself to run a helper and, until the fork execs, /proc names it dockerd:
    it is that engine's, not a second one (a second would make the restart ambiguous, and the
    tests' engine_left_running check cry restart). Real processes named dockerd, one the
    other's child."""
    named = tmp_path / "dockerd"
    shutil.copy2(shutil.which("bash") or "/bin/bash", named)
    # `; true`: the child bash stays itself (a last command alone would be exec'ed in its place).
    outer = subprocess.Popen([str(named), "-c", f"{named} -c 'sleep 60; true' & wait"],
                             stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        children: list[int] = []
        while not children:
            assert time.monotonic() < deadline, "the fork never started"
            time.sleep(0.05)
            listed = Path(f"/proc/{outer.pid}/task/{outer.pid}/children").read_text().split()
            children = [int(p) for p in listed
                        if Path(f"/proc/{p}/comm").read_text().strip() == "dockerd"]
        found = dr.running_dockerd()
        assert outer.pid in found and children[0] not in found, (found, children)
    finally:
        for child in children:
            subprocess.run(["pkill", "-9", "-P", str(child)], check=False)  # its sleep
        subprocess.run(["pkill", "-9", "-P", str(outer.pid)], check=False)
        outer.kill()
        outer.wait()
