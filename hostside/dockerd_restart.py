"""Restart this host's Docker engine the way it is run here (run as root, by daemon_config.py).

DockerDaemonConfig must restart the engine for `default-address-pools` to take effect (dockerd
does not reload them on SIGHUP). How depends on what supervises it:

- systemd runs the docker unit: `systemctl restart docker`;
- else one dockerd runs (containers, CI machines, a dockerd started by hand or by an init
  script): it is stopped with SIGTERM and started again with its own command line, environment
  and working directory, its output appended where it went before (its log file, else
  /dev/null), in a session of its own so it outlives this process. An init script is not
  trusted with it: the package's /etc/init.d/docker exists on machines where something else
  started the engine, and its restart then fails halfway;
- else (no dockerd runs) `/etc/init.d/docker`: `service docker restart`.

`plan()` says how it would restart and changes nothing; `restart()` restarts, or raises
RestartError with the one line the user reads. It returns once the old process is gone and the
new one started; the caller waits for the engine to answer (`docker info`).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .step import HostError

STOP_TIMEOUT_S = 60


class RestartError(HostError):
    """Why the engine could not be restarted: the one line the user reads."""


@dataclass(frozen=True)
class Dockerd:
    """A running dockerd as /proc shows it."""

    pid: int
    argv: list[str]
    env: dict[str, str]
    cwd: str
    log: str

    @classmethod
    def read(cls, pid: int) -> Dockerd:
        proc = Path(f"/proc/{pid}")
        argv = [a.decode() for a in (proc / "cmdline").read_bytes().split(b"\0") if a]
        env = dict(
            item.decode(errors="replace").partition("=")[::2]
            for item in (proc / "environ").read_bytes().split(b"\0")
            if b"=" in item
        )
        out = os.readlink(proc / "fd" / "1") if (proc / "fd" / "1").exists() else ""
        log = out if out.startswith("/") and Path(out).is_file() else os.devnull
        return cls(pid=pid, argv=argv, env=env, cwd=os.readlink(proc / "cwd"), log=log)


def running_dockerd(proc: Path = Path("/proc")) -> list[int]:
    """The dockerd processes of this host: those in this process's own PID namespace. An engine
    inside a container (a host of a multi-host rehearsal, Docker-in-Docker) shows in /proc too,
    but it is that container's, not this host's."""
    own = _pid_namespace(proc / "self")
    pids = []
    for comm in proc.glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "dockerd" and _pid_namespace(comm.parent) == own:
                pids.append(int(comm.parent.name))
        except OSError:
            continue
    return sorted(pids)


def _pid_namespace(process: Path) -> str | None:
    try:
        return os.readlink(process / "ns" / "pid")
    except OSError:
        return None


def systemd_runs_docker() -> bool:
    if not Path("/run/systemd/system").is_dir() or shutil.which("systemctl") is None:
        return False
    proc = subprocess.run(["systemctl", "is-active", "--quiet", "docker.service"])
    return proc.returncode == 0


def plan() -> str:
    """How the engine is restarted here: "systemd", "process <pid>" or "init.d"."""
    if systemd_runs_docker():
        return "systemd"
    pids = running_dockerd()
    if len(pids) == 1:
        return f"process {pids[0]}"
    if not pids:
        if Path("/etc/init.d/docker").is_file() and os.access("/etc/init.d/docker", os.X_OK):
            return "init.d"
        raise RestartError(
            "no dockerd runs here and neither systemd nor /etc/init.d/docker manages one: start "
            "the engine, or set docker.restart_command"
        )
    raise RestartError(
        f"{len(pids)} dockerd processes run here ({', '.join(map(str, pids))}): which one to "
        "restart is ambiguous; set docker.restart_command"
    )


def restart_process(pid: int) -> int:
    """Stop dockerd `pid` and start it again as it was started; the new PID."""
    old = Dockerd.read(pid)
    if not old.argv:
        raise RestartError(f"dockerd (pid {pid}) has no readable command line")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            raise RestartError(
                f"dockerd (pid {pid}) did not stop within {STOP_TIMEOUT_S}s of SIGTERM"
            )
        time.sleep(0.2)
    with open(old.log, "ab") as log:
        started = subprocess.Popen(
            old.argv, env=old.env, cwd=old.cwd, stdin=subprocess.DEVNULL, stdout=log,
            stderr=log, start_new_session=True,
        )
    return started.pid


def restart() -> str:
    how = plan()
    if how == "systemd":
        command = ["systemctl", "restart", "docker"]
    elif how == "init.d":
        command = ["service", "docker", "restart"]
    else:
        pid = int(how.split()[1])
        return f"restarted dockerd (pid {pid} -> {restart_process(pid)})"
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RestartError(f"'{' '.join(command)}' failed (exit {proc.returncode}): {reason}")
    return f"restarted with '{' '.join(command)}'"

