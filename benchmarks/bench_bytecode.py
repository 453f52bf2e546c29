"""What a Pulumi program's start costs without a bytecode cache, the way CI's machine runs it.

Every `pulumi` operation starts the program in a new Python process, which imports the modules
__main__.py imports (read from it here: pulumi, the providers' SDKs, components/...). Where the
machine sets PYTHONDONTWRITEBYTECODE and the venv was installed by uv (no bytecode), each start
compiles all of them from source; tests/run.sh therefore gives every process of the run a
bytecode cache (PYTHONPYCACHEPREFIX in the tests' state dir). Side by side in one run,
interleaved, BENCH_REPEAT=5 starts each:
  no cache  PYTHONDONTWRITEBYTECODE=1 and an empty prefix (nothing cached is read or written)
  cache     a prefix that one warm-up start filled
Prints the median wall and CPU seconds of each and their ratios; does not assert.
Run: .venv/bin/python benchmarks/bench_bytecode.py
"""

from __future__ import annotations

import ast
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))


def program_imports() -> list[str]:
    """The modules __main__.py imports, in its order."""
    tree = ast.parse((ROOT / "__main__.py").read_text())
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__":
            names.append(node.module)
    return names


def start(imports: list[str], env: dict[str, str]) -> tuple[float, float]:
    """One program start: wall and CPU seconds (user + system) of a process importing them."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import " + ", ".join(imports)], cwd=ROOT, env=env,
                   check=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    imports = program_imports()
    base = {k: v for k, v in os.environ.items()
            if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as filled:
        cases = {
            "no cache": {**base, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": empty},
            "cache": {**base, "PYTHONPYCACHEPREFIX": filled},
        }
        start(imports, cases["cache"])  # fills the cache
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for _ in range(REPEAT):
            for name, env in cases.items():
                runs[name].append(start(imports, env))
    print(f"a Pulumi program's start: the imports of __main__.py ({len(imports)} modules), "
          f"median of {REPEAT}, interleaved")
    medians = {name: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r))
               for name, r in runs.items()}
    for name, (wall, cpu) in medians.items():
        print(f"  {name:9} {wall:.2f} s wall, {cpu:.2f} s CPU")
    (cold_wall, cold_cpu), (warm_wall, warm_cpu) = medians["no cache"], medians["cache"]
    print(f"  ratio (no cache / cache): {cold_wall / warm_wall:.1f}x wall, "
          f"{cold_cpu / warm_cpu:.1f}x CPU; saved per start: {cold_cpu - warm_cpu:.2f} s CPU")


if __name__ == "__main__":
    main()
