"""How long `pulumi preview` spends in our program: the a100 stack (89-image manifest) under
Pulumi mocks, median of 5 evaluations. Goal: under 1.5 s. Prints, does not assert."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.graph.program import run_program  # noqa: E402


def main() -> None:
    timings = []
    counts = set()
    for _ in range(5):
        start = time.perf_counter()
        run = run_program("a100", secrets={"apiKey": "EMPTY"})
        timings.append(time.perf_counter() - start)
        counts.add(len(run.registrations))
    median = statistics.median(timings)
    print(f"a100 program under mocks: {sorted(counts)} registrations")
    print(f"median of 5: {median:.3f} s (min {min(timings):.3f}, max {max(timings):.3f}); "
          f"goal < 1.5 s: {'met' if median < 1.5 else 'missed'}")


if __name__ == "__main__":
    main()
