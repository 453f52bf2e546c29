"""Trial-like setup time: the mounted tool bundle versus installing tmux with apt in the container.

Each run starts a fresh canary container (debootstrap minbase: no tmux) the way a Harbor trial
starts its `main` service, then does what Terminus-2's setup needs before the agent's first step:
 - bundle: the bundle mounted as the Harbor override mounts it (read-only, wrappers in /usr/bin),
   container started with --network none (so nothing can be downloaded), then the first tmux
   command: a detached `bash --login` session, a send-keys, and capture-pane reading it back;
 - apt: `apt-get update && apt-get install -y tmux` inside the container (as Harbor's fallback
   does; the container reaches the machine's Debian mirror), then the same first tmux command.
5 runs each (env BENCH_RUNS), wall seconds from `docker run` to the marker read back, medians and
the ratio apt/bundle, plus the bytes apt fetched. The bundle is built once (its build time is
reported too) in a temp dir, and every container is removed. Prints JSON; does not assert.
Run: .venv/bin/python benchmarks/bench_tool_bundle.py
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import CANARY_IMAGE, docker  # noqa: E402
from tests.hostplane.steps import build_tool_bundle  # noqa: E402

FIRST_TMUX = (
    "export TERM=xterm-256color; tmux new-session -x 160 -y 40 -d -s terminus-2 'bash --login' "
    "&& tmux send-keys -t terminus-2 'echo READY_$((6*7))' Enter "
    "&& for i in $(seq 1 100); do tmux capture-pane -p -t terminus-2 | grep -q '^READY_42' "
    "&& exit 0; sleep 0.05; done; exit 1"
)
APT = (
    "export DEBIAN_FRONTEND=noninteractive; apt-get update && apt-get install -y tmux"
)
UNITS = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}


def one_run(image: str, mounts: list[str], network: str, install: bool) -> tuple[float, int]:
    name = f"bste-bench-{uuid.uuid4().hex[:8]}"
    fetched = 0
    start = time.perf_counter()
    try:
        docker("run", "-d", "--name", name, "--network", network, *mounts,
               "--entrypoint", "sh", image, "-c", "sleep infinity")
        if install:
            res = docker("exec", name, "bash", "-c", APT, check=False, timeout=600)
            if res.returncode != 0:
                raise SystemExit(f"apt-get install tmux failed in the container:\n{res.stderr}")
            for amount, unit in re.findall(r"Fetched ([\d.,]+) (B|kB|MB|GB)", res.stdout):
                fetched += int(float(amount.replace(",", "")) * UNITS[unit])
        res = docker("exec", name, "bash", "--login", "-c", FIRST_TMUX, check=False)
        if res.returncode != 0:
            raise SystemExit(f"first tmux command failed: {res.stdout}{res.stderr}")
        return time.perf_counter() - start, fetched
    finally:
        docker("rm", "-f", name, check=False)


def main() -> None:
    runs = int(os.environ.get("BENCH_RUNS", "5"))
    with tempfile.TemporaryDirectory(prefix="bench-tools-") as work:
        tools = Path(work) / "harbor-tools"
        start = time.perf_counter()
        built = build_tool_bundle(tools)
        build_s = time.perf_counter() - start
        if built.returncode != 0:
            raise SystemExit(f"the tool bundle's step failed: {built.reason}")
        mounts = [
            "-v", f"{tools}:/opt/harbor-tools:ro",
            "-v", f"{tools}/bin/tmux:/usr/bin/tmux:ro",
            "-v", f"{tools}/bin/asciinema:/usr/bin/asciinema:ro",
        ]
        bundle, apt, fetched = [], [], []
        # Interleaved, so drift on the machine affects both sides alike.
        for _ in range(runs):
            bundle.append(one_run(CANARY_IMAGE, mounts, "none", install=False)[0])
            seconds, nbytes = one_run(CANARY_IMAGE, [], "bridge", install=True)
            apt.append(seconds)
            fetched.append(nbytes)
    med_bundle, med_apt = statistics.median(bundle), statistics.median(apt)
    print(json.dumps({
        "runs": runs,
        "bundle_build_s": round(build_s, 2),
        "bundle_s": [round(x, 2) for x in bundle],
        "apt_s": [round(x, 2) for x in apt],
        "median_bundle_s": round(med_bundle, 2),
        "median_apt_s": round(med_apt, 2),
        "ratio_apt_over_bundle": round(med_apt / med_bundle, 1),
        "apt_fetched_bytes_median": int(statistics.median(fetched)),
        "bundle_fetched_bytes": 0,  # its containers run with --network none
    }, indent=1))


if __name__ == "__main__":
    main()
