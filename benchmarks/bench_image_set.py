"""The image_set host step (hostside/image_set.py) throughput and its all-present
re-run, against a private loopback registry.

1. K canary-derived images (distinct layers, env BENCH_K, default 8) pulled through the registry
   as a mirror at concurrency 1 and at concurrency 4: wall seconds of each and the ratio.
2. The real 89-image Terminal-Bench 2.1 manifest with every image already present (the canary
   tagged under the 89 names that are not here yet): wall seconds and the requests the registry
   served (goal: 0).

Everything it tags or pulls is removed at the end. Prints JSON on stdout; does not assert.
Run: .venv/bin/python benchmarks/bench_image_set.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from components.manifest import load_manifest  # noqa: E402
from tests.conftest import CANARY_IMAGE, TB21_TASKS, docker  # noqa: E402
from tests.images.conftest import ImageFactory, LocalRegistry  # noqa: E402
from tests.images.test_image_set_script import inputs_for, run_set  # noqa: E402


def timed_run(inputs: dict) -> tuple[float, dict]:
    start = time.perf_counter()
    result = run_set(inputs)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"image_set failed: {result.reason}\n{result.stderr}")
    return elapsed, result.outputs


def remove_local(names: list[str]) -> None:
    docker("rmi", "-f", *names, check=False)


def concurrency_ratio(registry: LocalRegistry, images: ImageFactory, work: Path, k: int) -> dict:
    names = [images.name(f"bench{i}:1") for i in range(k)]
    for name in names:
        images.push(name.split("/", 1)[1])
    timings: dict[int, float] = {}
    for concurrency in (1, 4):
        remove_local(names)
        inputs = inputs_for(registry, names, work, concurrency=concurrency,
                            state_dir=str(work / f"state-c{concurrency}"))
        timings[concurrency], out = timed_run(inputs)
        if out["pulled"] != k:
            raise SystemExit(f"expected {k} pulls at concurrency {concurrency}, got {out}")
    remove_local(names)
    return {
        "k": k,
        "seconds_concurrency_1": round(timings[1], 2),
        "seconds_concurrency_4": round(timings[4], 2),
        "speedup_4_vs_1": round(timings[1] / timings[4], 2),
    }


def all_present_rerun(registry: LocalRegistry, work: Path) -> dict:
    manifest = load_manifest(TB21_TASKS)
    names = manifest.image_names
    ours = [n for n in names if docker("image", "inspect", n, check=False).returncode != 0]
    try:
        for name in ours:
            docker("tag", CANARY_IMAGE, name)
        before = len(registry.requests())
        inputs = inputs_for(
            registry, list(names), work, no_network_tasks=list(manifest.no_network_tasks),
            # This machine has no buildx: the sidecar is not what is measured here.
            require_sidecar=False, state_dir=str(work / "state-89"),
        )
        seconds, out = timed_run(inputs)
        requests = len(registry.requests()) - before
    finally:
        if ours:
            remove_local(ours)
    return {
        "images": len(names),
        "seconds": round(seconds, 2),
        "ready": out["ready"],
        "pulled": out["pulled"],
        "registry_requests": requests,
        "goal_0_requests": "met" if requests == 0 else "missed",
    }


def main() -> None:
    k = int(os.environ.get("BENCH_K", "8"))
    with tempfile.TemporaryDirectory(prefix="bench_image_set.") as tmp:
        work = Path(tmp)
        registry = LocalRegistry(root=work / "registry")
        registry.root.mkdir()
        registry.start()
        images = ImageFactory(registry=registry, canary=CANARY_IMAGE)
        try:
            report = {
                "concurrency": concurrency_ratio(registry, images, work, k),
                "all_present_89": all_present_rerun(registry, work),
            }
        finally:
            images.cleanup()
            registry.stop()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
