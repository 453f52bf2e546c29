"""Processes that run beside a Harbor job and end with it: the k8s watcher, the serving sampler.

Each is spawned detached by the launch (its own session; stdin /dev/null, stdout and stderr
appended to its log), records its PID in a file beside the job dir, watches over Harbor's PID
and ends when that process is gone. A live one of the same job dir watching over the same PID is
reused; one watching over another PID (a resume) is stopped and replaced. Whether a recorded PID
is still such a process is read from /proc: a PID the kernel gave to another process since is
not one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .step import HostError, child_env


def alive(pid: int) -> bool:
    """`pid` is a live process (a zombie is not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    # The state follows the command name, which is in parentheses and may hold anything.
    return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] not in (b"Z", b"X", b"")


def arguments(pid: int) -> list[str]:
    """A process's argv ([] when it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def stop(pid: int, wait_s: float = 15) -> None:
    """SIGTERM, a bounded wait, then SIGKILL."""
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return
    deadline = time.monotonic() + wait_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def recorded(pid_path: str, module: str, job_dir: str) -> tuple[int, int] | None:
    """(PID, until_pid) of the live `python3 -m MODULE run ... JOB_DIR ... UNTIL_PID` recorded in
    `pid_path`: the job dir is an argument, Harbor's PID the last one."""
    try:
        text = Path(pid_path).read_text().strip()
    except OSError:
        return None
    if not text.isdigit() or not alive(int(text)):
        return None
    argv = arguments(int(text))
    try:
        at = argv.index(module)
    except ValueError:
        return None
    rest = argv[at + 1:]
    if len(rest) < 3 or rest[0] != "run" or os.path.abspath(job_dir) not in rest \
            or not rest[-1].isdigit():
        return None
    return int(text), int(rest[-1])


def stop_on_signals(say: Callable[[str], None], last: str) -> threading.Event:
    """An event SIGTERM and SIGINT set (saying so), for the process's own loop to end on after
    `last` (its last read or list)."""
    stopping = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        say(f"signal {signum}: {last}, then exit")
        stopping.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stopping


_spawned: list[subprocess.Popen] = []


def spawn(module: str, args: list[str], pid_path: str, log_path: str, what: str) -> int:
    """`python3 -m MODULE run ARGS...` detached, with the package on PYTHONPATH; its PID, also
    written to `pid_path`. Raises HostError only when it cannot be spawned."""
    package_root = str(Path(__file__).resolve().parent.parent)
    argv = [sys.executable or "python3", "-m", module, "run", *args]
    try:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(pid_path).parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True, cwd="/",
                env=child_env({"PYTHONPATH": package_root}),
            )
        Path(pid_path).write_text(f"{proc.pid}\n")
    except OSError as exc:
        raise HostError(f"cannot start the {what} ({exc.strerror or exc}; log {log_path})"
                        ) from None
    # Not waited for here: it outlives the caller (a zombie only while a long-lived caller
    # such as a test lives; `alive` does not count it).
    _spawned.append(proc)
    return proc.pid
