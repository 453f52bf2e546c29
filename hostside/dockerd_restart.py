"""Restart this host's Docker engine, and never leave it stopped (run as root, by daemon_config.py).

DockerDaemonConfig must restart the engine for `default-address-pools` to take effect (dockerd
does not reload them on SIGHUP). How depends on what runs it:

- the stack's `restart_command`, where it gives one (run with bash);
- systemd runs the docker unit: `systemctl restart docker`;
- else the dockerd that serves the step's Docker socket (the only dockerd of this host, where
  none is found serving it): stopped with SIGTERM and started again with its own command line
  (its binary as /proc names it, so a relative path still resolves), environment and working
  directory, its output appended to its log file, in a session of its own so it outlives this
  process. An init script is not trusted with it: the package's /etc/init.d/docker exists on
  machines where something else started the engine, and its restart then fails halfway;
- else (no dockerd runs) `service docker restart`.

Never stopped by us: `Restarts` remembers how the engine ran before the step first stopped it.
Its working directory gone, or a start there failing, the engine is started from `/`; its log
file deleted, the log is made again where it was. Once the caller has put the original
daemon.json back (the new engine refused the merged one, or a later check failed),
`Restarts.recover()` starts the engine's original command line from `/` on it, and where even
that does not answer, returns the one line that names the command that starts it again and
why ours could not.

The old engine gets as long to stop as its own shutdown takes (its containers' stop timeouts,
its `shutdown-timeout`), with a margin; one still running past that is hung and is killed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable

from .step import HostError, log

MODULE = "daemon_config"
PROC = Path("/proc")
# The least time a stopping engine gets; its own shutdown bound and MARGIN_S extend it.
STOP_TIMEOUT_S = 60
MARGIN_S = 30
# dockerd's shutdown waits each running container's stop timeout plus this grace (moby's
# daemon.ShutdownTimeout), and gives 15 s where nothing asks for more.
SHUTDOWN_GRACE_S = 5
# A container's stop timeout when it sets none (the engine's default).
CONTAINER_STOP_S = 10
KILL_WAIT_S = 10
READY_TIMEOUT_S = 90
# Where a restarted engine logs when the log it had cannot be written (its folder is gone).
FALLBACK_LOG = "/var/log/dockerd-restarted-by-benchstack.log"
DEFAULT_SOCKET = "/var/run/docker.sock"
DELETED = " (deleted)"


class RestartError(HostError):
    """Why the engine could not be restarted: the one line the user reads."""


def _link(path: Path) -> tuple[str, bool]:
    """A /proc link's target, and whether that file or folder was deleted since."""
    target = os.readlink(path)
    if target.endswith(DELETED):
        return target[: -len(DELETED)], True
    return target, False


def _log_of(process: Path) -> str:
    """The file the process's output goes to (deleted since or not), else os.devnull."""
    try:
        target, deleted = _link(process / "fd" / "1")
    except OSError:
        return os.devnull
    is_file = deleted or Path(target).is_file()
    return target if target.startswith("/") and is_file else os.devnull


@dataclass(frozen=True)
class Dockerd:
    """A running dockerd as /proc shows it: what starts it again."""

    pid: int
    argv: list[str]
    env: dict[str, str]
    cwd: str
    # The binary it runs, absolute: argv[0] may be relative to a folder that is gone.
    exe: str
    log: str

    @classmethod
    def read(cls, pid: int, proc: Path = PROC) -> Dockerd:
        where = proc / str(pid)
        argv = [a.decode() for a in (where / "cmdline").read_bytes().split(b"\0") if a]
        env = dict(
            item.decode(errors="replace").partition("=")[::2]
            for item in (where / "environ").read_bytes().split(b"\0")
            if b"=" in item
        )
        return cls(pid=pid, argv=argv, env=env, cwd=_link(where / "cwd")[0],
                   exe=_link(where / "exe")[0], log=_log_of(where))

    def binary(self) -> str | None:
        """What to execute: the binary it ran, where that path still holds one."""
        return self.exe if os.path.isfile(self.exe) else None

    def unrestartable(self) -> str | None:
        """Why stopping it would leave it stopped; None when it can be started again."""
        if not self.argv:
            return f"dockerd (pid {self.pid}) has no readable command line"
        if self.binary() is None:
            return (f"dockerd (pid {self.pid}) runs {self.exe}, which is gone: it could not be "
                    "started again; restart it from a binary that exists, or set "
                    "docker.restart_command")
        return None

    def start_line(self) -> str:
        """The shell line that starts it again as it ran, from where that still works."""
        cwd = self.cwd if os.path.isdir(self.cwd) else "/"
        argv = list(self.argv)
        if cwd != self.cwd and "/" in argv[0] and not argv[0].startswith("/"):
            argv[0] = self.exe
        return f"cd {shlex.quote(cwd)} && {shlex.join(argv)}"


def running_dockerd(proc: Path = PROC) -> list[int]:
    """The dockerd processes of this host: those in this process's own PID namespace. An engine
    inside a container (a host of a multi-host rehearsal, Docker-in-Docker) shows in /proc too,
    but it is that container's, not this host's. A dockerd whose parent is a dockerd is no engine
    either: the engine forks itself to run its helpers (archive extraction, in a chroot), and
    until the fork execs it is named dockerd and holds the engine's sockets."""
    own = _pid_namespace(proc / "self")
    found = {}
    for comm in proc.glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "dockerd" and _pid_namespace(comm.parent) == own:
                found[int(comm.parent.name)] = _parent(comm.parent)
        except OSError:
            continue
    return sorted(pid for pid, parent in found.items() if parent not in found)


def _parent(process: Path) -> int | None:
    for line in (process / "status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    return None


def _pid_namespace(process: Path) -> str | None:
    try:
        return os.readlink(process / "ns" / "pid")
    except OSError:
        return None


def socket_path(docker_host: str) -> str | None:
    """The unix socket the step talks to the engine through; None for another transport."""
    if not docker_host:
        return DEFAULT_SOCKET
    return docker_host[len("unix://"):] if docker_host.startswith("unix://") else None


def _socket_inodes(process: Path) -> set[str]:
    found = set()
    for fd in (process / "fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed while listed
            continue
        if target.startswith("socket:["):
            found.add(target[len("socket:["):-1])
    return found


def serves(pid: int, path: str, proc: Path = PROC) -> bool:
    """Whether dockerd `pid` holds the unix socket `path`, as its own network namespace's table
    lists it (an engine in another namespace serves a socket this one cannot list)."""
    where = proc / str(pid)
    try:
        inodes = _socket_inodes(where)
        rows = (where / "net" / "unix").read_text().splitlines()[1:]
    except OSError:
        return False
    want = os.path.realpath(path)
    for row in rows:
        fields = row.split()
        if len(fields) >= 8 and fields[6] in inodes and os.path.realpath(fields[7]) == want:
            return True
    return False


def serving_pids(docker_host: str, proc: Path = PROC) -> list[int]:
    """The dockerd processes of this host serving the step's socket (none: a TCP host, no
    engine, an unreadable /proc)."""
    path = socket_path(docker_host)
    return [pid for pid in running_dockerd(proc) if path and serves(pid, path, proc)]


def engine_pids(docker_host: str, proc: Path = PROC) -> list[int]:
    """The dockerd serving the step's socket; where none is found serving it, every dockerd of
    this host."""
    return serving_pids(docker_host, proc) or running_dockerd(proc)


def systemd_runs_docker() -> bool:
    if not Path("/run/systemd/system").is_dir() or shutil.which("systemctl") is None:
        return False
    proc = subprocess.run(["systemctl", "is-active", "--quiet", "docker.service"])
    return proc.returncode == 0


def plan(docker_host: str = "") -> str:
    """How the engine is restarted here: "systemd", "process <pid>" or "init.d"."""
    if systemd_runs_docker():
        return "systemd"
    pids = engine_pids(docker_host)
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
        f"{len(pids)} dockerd processes run here ({', '.join(map(str, pids))}) and none is found "
        "serving the step's socket: which one to restart is ambiguous; set "
        "docker.restart_command"
    )


def stop_bound(container_stops: list[int], shutdown_timeout: int | None) -> int:
    """Seconds a stopping engine gets: as long as its own shutdown may take (each running
    container's stop timeout and a grace, or its `shutdown-timeout`), plus a margin; at least
    STOP_TIMEOUT_S."""
    own = max([shutdown_timeout or 15, *(s + SHUTDOWN_GRACE_S for s in container_stops)])
    return max(STOP_TIMEOUT_S, own + MARGIN_S)


def _alive(pid: int, proc: Path = PROC) -> bool:
    """Running, not a zombie (a dockerd this step started and stopped stays one until reaped)."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def stop(pid: int, seconds: float) -> None:
    """SIGTERM, up to `seconds` for dockerd `pid` to exit; past that it is hung: SIGKILL."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if _gone(pid, seconds):
        return
    log(MODULE, f"dockerd (pid {pid}) still runs {seconds:g}s after SIGTERM: killing it")
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    if not _gone(pid, KILL_WAIT_S):
        raise RestartError(f"dockerd (pid {pid}) did not exit, even {KILL_WAIT_S}s after SIGKILL")


def _open_log(path: str) -> tuple[IO[bytes], str]:
    """The engine's log, for appending: made again where it was when it was deleted; where its
    folder is gone too, FALLBACK_LOG."""
    if path == os.devnull:
        return open(os.devnull, "ab"), path
    existed = os.path.exists(path)
    try:
        out = open(path, "ab")
    except OSError as exc:
        log(MODULE, f"cannot write its log {path} ({exc.strerror}): it logs to {FALLBACK_LOG}")
        return open(FALLBACK_LOG, "ab"), FALLBACK_LOG
    if not existed:
        log(MODULE, f"its log {path} was deleted: it logs there again")
    return out, path


@dataclass
class Started:
    """A dockerd this step started, and the log it writes to (from `offset` on)."""

    popen: subprocess.Popen
    log: str
    offset: int

    def exited(self) -> str | None:
        """Why it is gone, with the last line it logged; None while it runs."""
        code = self.popen.poll()
        if code is None:
            return None
        return f"dockerd exited at start (code {code}): {self.last_line() or 'no output'}"

    def last_line(self) -> str:
        if self.log == os.devnull:
            return ""
        try:
            with open(self.log, "rb") as f:
                f.seek(self.offset)
                lines = f.read().decode(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1][-300:] if lines else ""


def launch(dockerd: Dockerd, cwd: str) -> Started:
    """Start `dockerd`'s command line from `cwd`, detached, its output appended to its log."""
    out, log_path = _open_log(dockerd.log)
    with out:
        offset = out.seek(0, os.SEEK_END)
        popen = subprocess.Popen(
            dockerd.argv, executable=dockerd.binary(), env=dockerd.env, cwd=cwd,
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
        )
    return Started(popen, log_path, offset)


class Restarts:
    """One step's restarts of the engine. Before the step first stops it, it keeps how it ran, so
    that every way out of the step ends with the engine answering, or with the one line that
    starts it again. `answers`: whether the engine answers `docker info` now."""

    def __init__(self, restart_command: str, docker_host: str, answers: Callable[[], bool],
                 stop_timeout: float = STOP_TIMEOUT_S) -> None:
        self.command = restart_command
        self.docker_host = docker_host
        self.answers = answers
        self.stop_timeout = stop_timeout
        self.how = f"'{restart_command}'" if restart_command else plan(docker_host)
        if self.how.startswith("process"):
            why = Dockerd.read(int(self.how.split()[1])).unrestartable()
            if why:
                raise RestartError(why)
        # How it ran before this step first stopped it (process restarts only).
        self.original: Dockerd | None = None
        self.started: Started | None = None
        self.touched = False

    def _command_text(self) -> str:
        if self.command:
            return self.command
        return "systemctl restart docker" if self.how == "systemd" else "service docker restart"

    def restart(self) -> str | None:
        """Restart the engine on whatever daemon.json holds now, and wait for it to answer;
        None, or why not."""
        self.touched = True
        if self.how.startswith("process"):
            return self._restart_process()
        return self._run_command()

    def recover(self, config_changed: bool = True) -> str | None:
        """Once the original daemon.json is back (`config_changed`: it differs from what the
        engine was last started on): the engine answering on it. None, or the one line that
        says why it does not and what starts it again."""
        if not self.touched or (not config_changed and self.answers()):
            return None
        if self.original is not None:
            return self._recover_process(self.original)
        if self.how.startswith("process"):
            return None  # it was never stopped: reading it failed first
        why = self._run_command()
        if why is None or self.answers():
            return None
        return f"the engine does not answer ({why}): start it with '{self._command_text()}'"

    def _run_command(self) -> str | None:
        command = self._command_text()
        proc = subprocess.run(["bash", "-c", command], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace", cwd="/")
        if proc.returncode != 0:
            last = (proc.stdout.strip().splitlines() or ["no output"])[-1]
            return f"'{command}' failed (exit {proc.returncode}): {last}"
        return self._await(None)

    def _restart_process(self) -> str | None:
        try:
            pids = engine_pids(self.docker_host)
            if len(pids) != 1:
                return (f"{len(pids)} dockerd processes run here now, not the one that served "
                        "the step's socket")
            current = Dockerd.read(pids[0])
        except (OSError, RestartError) as exc:
            return f"cannot read the running dockerd ({exc})"
        why = current.unrestartable()
        if why:
            return why
        if self.original is None:
            self.original = current
        try:
            stop(current.pid, self.stop_timeout)
        except RestartError as exc:
            return str(exc)
        return self._start(current, current.cwd)

    def _start(self, dockerd: Dockerd, cwd: str) -> str | None:
        """Start `dockerd` from `cwd` (from / where that is gone, or fails) and wait for it."""
        if not os.path.isdir(cwd):
            log(MODULE, f"its working directory {cwd} is gone: starting it from /")
            cwd = "/"
        try:
            self.started = launch(dockerd, cwd)
        except OSError as exc:
            if cwd == "/":
                return f"dockerd could not be started ({exc})"
            log(MODULE, f"it did not start in {cwd} ({exc}): starting it from /")
            return self._start(dockerd, "/")
        log(MODULE, f"started dockerd (pid {dockerd.pid} -> {self.started.popen.pid}) from {cwd}")
        return self._await(self.started)

    def _await(self, started: Started | None) -> str | None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.answers():
                return None
            why = started.exited() if started is not None else None
            if why is not None:
                return why
            time.sleep(0.5)
        return f"the engine did not answer within {READY_TIMEOUT_S}s of its restart"

    def _recover_process(self, original: Dockerd) -> str | None:
        # Whatever this step started (on the config now replaced) goes first.
        started = self.started
        try:
            if started is not None and _alive(started.popen.pid):
                stop(started.popen.pid, self.stop_timeout)
        except RestartError as exc:
            return self._stopped_line(original, str(exc))
        log(MODULE, "starting the engine again with its original command line, from / on the "
            "original daemon.json")
        why = self._start(original, "/")
        return None if why is None else self._stopped_line(original, why)

    @staticmethod
    def _stopped_line(original: Dockerd, why: str) -> str:
        return (f"the engine is stopped and ours could not start it again ({why}): start it "
                f"with: {original.start_line()}")
