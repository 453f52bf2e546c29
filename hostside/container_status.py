"""The serving container status probe (components/serving.py): read-only, run at program time on
every `pulumi up`/`preview`, before any code is on the host, so scripts/container_status.sh
inlines this file and runs it with the host's python3: `python3 - CONTAINER LABEL`. It imports
nothing from the package.

The container carries a run token in its label LABEL; while it runs, this returns that token
(the component's label is unchanged: nothing happens). When it stopped (a crash, an OOM kill, a
reboot), it returns a new token derived from the old one, so the next `up` replaces the
container: the worker or router is started again and proven ready. Never fails: a container
the engine does not show is absent.

Output (one JSON line): state (absent | running | stopped), token.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from typing import Any

DOCKER = "docker"
ABSENT = {"state": "absent", "token": "start"}


def status(container: str, label: str) -> dict[str, Any]:
    try:
        proc = subprocess.run([DOCKER, "inspect", "--type", "container", container],
                              capture_output=True, text=True, timeout=60, check=False)
        info = json.loads(proc.stdout)[0] if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        info = None
    if not isinstance(info, dict):
        return dict(ABSENT)
    token = str(((info.get("Config") or {}).get("Labels") or {}).get(label) or "")
    if (info.get("State") or {}).get("Running") is True:
        return {"state": "running", "token": token or "start"}
    # Derived from the old token, so that each stop gives a new one.
    return {"state": "stopped",
            "token": f"restart-{hashlib.sha256(token.encode()).hexdigest()[:12]}"}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python3 - CONTAINER LABEL", file=sys.stderr)
        print(json.dumps(ABSENT))
        return 0
    print(json.dumps(status(*argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
