"""The proxy bridge's state on the host, and its status probe.

proxy_bridge.py keeps its files here: `<state_dir>/<name>.pid` (the supervising loop),
`.pid.socat` (its socat), `.settings`, `.token`, `.log`; under systemd, the unit `<name>.service`.
Whether a process is that loop is read from its command line, which carries a marker: a PID in a
stale file that the kernel gave to another process is never ours.

The status probe runs this file at program time, on every `pulumi up` and `preview`, before any
code is on the host (scripts/proxy_status.sh inlines it: standard library only, no import of the
package): `python3 - STATE_DIR NAME BRIDGE_PORT` prints `{"state", "token"}`. While the bridge's
supervisor lives and something listens on its port, the token is the one its create recorded (the
step's trigger is unchanged: nothing runs); when the bridge died with its supervisor (a reboot, a
kill), it is a new token derived from the recorded one, so the next `up` replaces the step and
the bridge is started again. Read-only; never fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass

LOOP_MARKER = "benchstack-proxy-bridge-loop"


@dataclass(frozen=True)
class Files:
    state_dir: str
    name: str

    def _path(self, suffix: str) -> str:
        return os.path.join(self.state_dir, f"{self.name}{suffix}")

    @property
    def pid(self) -> str:
        return self._path(".pid")

    @property
    def socat_pid(self) -> str:
        return self._path(".pid.socat")

    @property
    def settings(self) -> str:
        return self._path(".settings")

    @property
    def token(self) -> str:
        return self._path(".token")

    @property
    def log(self) -> str:
        return self._path(".log")

    @property
    def unit(self) -> str:
        return f"{self.name}.service"

    @property
    def loop_marker(self) -> str:
        """What the loop's command line holds: its marker, its name and its pid file."""
        return f"{LOOP_MARKER} {self.name} {self.name} {self.pid} "


def read(path: str) -> str | None:
    """A small state file's text without its final newlines; None when it cannot be read."""
    try:
        with open(path) as f:
            return f.read().rstrip("\n")
    except OSError:
        return None


def cmdline(pid: int) -> str:
    """A process's arguments joined by spaces (as `tr '\\0' ' '` shows them); "" if gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def pid_in(path: str) -> int | None:
    text = read(path)
    return int(text) if text and text.isdigit() else None


def loop_pid(files: Files) -> int | None:
    """The loop's PID while it is alive and really ours."""
    pid = pid_in(files.pid)
    return pid if pid is not None and files.loop_marker in cmdline(pid) else None


def unit_active(unit: str) -> bool:
    try:
        return subprocess.run(["systemctl", "is-active", "--quiet", unit],
                              stdin=subprocess.DEVNULL, capture_output=True).returncode == 0
    except OSError:
        return False


def listeners(port: int, processes: bool = False) -> list[str]:
    """`ss` lines of the TCP listeners on `port` (with their processes)."""
    flags = "-ltnpH" if processes else "-ltnH"
    try:
        out = subprocess.run(["ss", flags, f"sport = :{port}"], stdin=subprocess.DEVNULL,
                             capture_output=True, text=True).stdout
    except OSError:
        return []
    return [line for line in out.splitlines() if line.strip()]


def status(state_dir: str, name: str, port: int) -> dict:
    files = Files(state_dir, name)
    recorded = read(files.token)
    if recorded is None:
        return {"state": "absent", "token": "start"}
    alive = unit_active(files.unit) or loop_pid(files) is not None
    if alive and listeners(port):
        return {"state": "running", "token": recorded}
    repair = hashlib.sha256(recorded.encode()).hexdigest()[:12]
    return {"state": "down", "token": f"repair-{repair}"}


if __name__ == "__main__":
    print(json.dumps(status(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
