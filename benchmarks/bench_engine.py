"""The real Pulumi engine's cost beside the program's own evaluation, side by side in one run.

Measured, median of 3 each, on a copy of the project (the local stack, its workspace in a temp
dir), with the engine `make setup` built (CLI, language host, command provider):
- the `local` program under Pulumi mocks (what tests/graph runs: the program alone);
- `pulumi preview` of the live local stack (the language host starts the program, the probes run
  on the host, the engine diffs every step: nothing to do);
- a no-op `pulumi up` of it (the same, plus the update's bookkeeping).
The stack is brought up once before the timings (not timed) and destroyed after. Prints the
times and their ratios to the program alone; asserts nothing.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.engine.conftest import copy_project, make_engine, ok, pulumi  # noqa: E402
from tests.graph.program import run_program  # noqa: E402

RUNS = 3
STACK = "local"


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    engine = make_engine(work / "home")
    project = copy_project(work)

    def cli(*args: str) -> None:
        ok(pulumi(engine, project, *args, "--stack", STACK))

    ok(pulumi(engine, project, "stack", "select", "--create", STACK))
    cli("config", "set", "benchstack:workspace", str(work / "workspace"))
    cli("up", "--yes")  # not timed: what follows has nothing to do
    try:
        mocks = [timed(lambda: run_program(STACK)) for _ in range(RUNS)]
        previews = [timed(lambda: cli("preview", "--expect-no-changes")) for _ in range(RUNS)]
        noops = [timed(lambda: cli("up", "--yes", "--expect-no-changes")) for _ in range(RUNS)]
    finally:
        cli("destroy", "--yes")
    summary = json.loads(subprocess.run(
        [str(engine.pulumi), "stack", "history", "--json", "--stack", STACK], cwd=project,
        env=engine.env, capture_output=True, text=True, check=True).stdout)[0]
    m, p, u = (statistics.median(x) for x in (mocks, previews, noops))
    print(f"local program under mocks:        median {m:.3f} s")
    print(f"pulumi preview, nothing to do:    median {p:.3f} s  ({p / m:.1f}x the program)")
    print(f"pulumi up, no-op:                 median {u:.3f} s  ({u / m:.1f}x the program)")
    print(f"(last operation: {summary['kind']} {summary['result']}, "
          f"{len(previews) + len(noops)} timed operations on a live stack of "
          f"{summary.get('resourceChanges', {}).get('delete', '?')} resources)")


if __name__ == "__main__":
    main()
