"""The real Pulumi engine's overhead beside the program's own evaluation, side by side in one run.

Measured, median of 3 each, on a copy of the project with the CLI tests/env/setup.sh built:
- the `local` program under Pulumi mocks (what `tests/graph` runs);
- `pulumi preview` and a no-op `pulumi up` of the `local` stack's config through the real CLI
  (program served inline; see tests/engine/inline.py).
The local stack's command resources need the pulumi-command provider, which cannot be built
here (tests/env/engine/build.sh), so the CLI runs the config-loading program: the engine's fixed
cost per operation (start, state, secrets, plan), not the commands. Prints, does not assert.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.engine.paths import engine_root  # noqa: E402
from tests.graph.program import run_program  # noqa: E402

RUNS = 3


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    pulumi = engine_root() / "bin" / "pulumi"
    if not pulumi.is_file():
        sys.exit(f"bench_engine: no Pulumi CLI under {engine_root()}: run tests/env/setup.sh")
    work = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    project = work / "benchstack"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split("\0")
    for rel in filter(None, files):
        if (ROOT / rel).exists():
            (project / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, project / rel)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
    env.update(PULUMI_HOME=str(work / "home"), PULUMI_CONFIG_PASSPHRASE="bench",
               PULUMI_SKIP_UPDATE_CHECK="1", PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK="1",
               PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION="true")

    def cli(operation: str) -> None:
        subprocess.run([sys.executable, str(project / "tests" / "engine" / "inline.py"),
                        str(project), "local", operation, "config"],
                       cwd=project, env=env, check=True, capture_output=True, timeout=600)

    try:
        mocks = [timed(lambda: run_program("local")) for _ in range(RUNS)]
        cli("up")  # the stack exists and holds its outputs: what follows is preview and no-op up
        previews = [timed(lambda: cli("preview")) for _ in range(RUNS)]
        noops = [timed(lambda: cli("up")) for _ in range(RUNS)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    m, p, u = (statistics.median(x) for x in (mocks, previews, noops))
    print(f"local program under mocks:           median {m:.3f} s")
    print(f"pulumi preview (real CLI, config):   median {p:.3f} s  ({p / m:.1f}x the program)")
    print(f"pulumi up, no-op (real CLI, config): median {u:.3f} s  ({u / m:.1f}x the program)")


if __name__ == "__main__":
    main()
