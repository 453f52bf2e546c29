"""Harbor's install on the Harbor host: uv (the step's installer) versus pip (its fallback).

Each run installs the pinned Harbor wheel (the tests' copy, `make setup`) with its dependencies
into a fresh venv of the Harbor Python, the way hostside/harbor_install.py does: `python -m venv`,
then either uv with the host's pip settings (uv_installer.py; its installer venv built once,
outside the timing, as a host keeps it) or `pip install`. Both with warm caches (a first run of
each, untimed, fills them), so the figure is the install itself, not the network. Runs alternate
(ABAB) 3 times each (env BENCH_RUNS); medians and the ratio pip/uv. Prints JSON; asserts nothing.
Run: .venv/bin/python benchmarks/bench_harbor_install.py
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hostside.uv_installer import UV_VERSION, uv_command, uv_python  # noqa: E402
from tests.harbor.conftest import HARBOR_PYTHON, WHEEL, WHEEL_SHA256  # noqa: E402

PINNED = f"harbor @ {WHEEL.resolve().as_uri()}#sha256={WHEEL_SHA256}"


def fresh_venv(where: Path) -> str:
    shutil.rmtree(where, ignore_errors=True)
    subprocess.run([HARBOR_PYTHON, "-m", "venv", str(where)], check=True)
    return str(where / "bin" / "python")


def with_uv(uv: str, where: Path) -> float:
    python = fresh_venv(where)
    start = time.perf_counter()
    command, env = uv_command(uv, python, [PINNED])
    subprocess.run(command, env={**os.environ, **env}, check=True)
    return time.perf_counter() - start


def with_pip(where: Path) -> float:
    python = fresh_venv(where)
    start = time.perf_counter()
    subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", PINNED],
                   check=True)
    return time.perf_counter() - start


def main() -> None:
    runs = int(os.environ.get("BENCH_RUNS", "3"))
    if not WHEEL.is_file():
        raise SystemExit(f"no Harbor wheel at {WHEEL}: run `make setup`")
    with tempfile.TemporaryDirectory(prefix="bench-harbor-install-") as tmp:
        root = Path(tmp)
        uv = uv_python(str(root / "venvs"), step="bench")
        if uv is None:
            raise SystemExit("pip could not install uv on this machine")
        with_uv(uv, root / "warm-uv")
        with_pip(root / "warm-pip")
        times: dict[str, list[float]] = {"uv": [], "pip": []}
        for _ in range(runs):
            times["uv"].append(with_uv(uv, root / "uv"))
            times["pip"].append(with_pip(root / "pip"))
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(json.dumps({
        "what": "Harbor 0.21.0 and its dependencies into a fresh venv, warm caches",
        "uv_version": UV_VERSION, "runs": runs,
        "seconds": {name: [round(v, 2) for v in values] for name, values in times.items()},
        "median_s": {name: round(v, 2) for name, v in medians.items()},
        "ratio_pip_over_uv": round(medians["pip"] / medians["uv"], 1),
    }, indent=2))


if __name__ == "__main__":
    main()
