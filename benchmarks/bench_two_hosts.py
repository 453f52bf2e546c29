"""What SSH costs, and what a trial's teardown cost: two measurements, printed.

1. The a100 rehearsal (Pulumi.a100-rehearsal.yaml on the two hosts of tests/env/hosts, reached
   only over SSH) beside the `local` stack (one host, no SSH), through the real CLI, each from a
   fresh stack: `up` (to the first trial running, when up returns), the time from the start of
   `up` to the first trial's start as the trial records it, a no-op `up`, then, once the job
   finished, `destroy`. Printed: each time and the two-host/local ratio. The two hosts are
   started for the run (and stopped after, when this run started them); their first `up` pulls
   the serving image and installs Harbor through the proxy, as a fresh server's does.
2. Docker trials' teardown: Harbor 0.21.0's oracle on the demo tasks on this machine's engine,
   the compose override the stack renders (components/harbor_config.py: the trial's main with
   an init) against the same override without the init (what every trial waited out before:
   the 10 s stop of a PID 1 that ignores SIGTERM), in ABAB rounds at the local stack's trial
   concurrency. Printed: trials per minute each way and the ratio.

    python benchmarks/bench_two_hosts.py [--only lifecycle|teardown] [--rounds N]

Needs what `make setup` sets up (setup/dev.sh: the engine, Harbor, the registry, the proxy)
and the hosts' image (tests/env/hosts/build.sh, which hosts.sh runs). Uses this machine's Docker
engine: hold the machine's Docker lock if others share it. Asserts nothing but that the runs
themselves succeeded.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from components.config import HarborConfig  # noqa: E402
from components.harbor_config import compose_override  # noqa: E402
from contracts import outputs as keys  # noqa: E402
from tests.conftest import HARBOR_VENV  # noqa: E402
from tests.e2e.two_hosts import (  # noqa: E402
    CONFIG,
    B,
    Hosts,
    Rehearsal,
    check_page,
    hosts,
    ssh_agent,
)
from tests.engine.conftest import copy_project, make_engine, ok, pulumi  # noqa: E402

DEMO_TASKS = ROOT / "demo" / "tasks"
HARBOR = HARBOR_VENV / "bin" / "harbor"


def say(message: str) -> None:
    print(f"[bench_two_hosts] {message}", file=sys.stderr, flush=True)


def started_at(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def first_trial_start(read_results) -> float:
    """The first trial's start as it records it (its result.json appears a moment after `up`
    returns with the trial running)."""
    deadline = time.time() + 300
    while time.time() < deadline:
        starts = [started_at(r["started_at"]) for r in read_results() if r.get("started_at")]
        if starts:
            return min(starts)
        time.sleep(1)
    raise SystemExit("bench_two_hosts: no trial recorded its start within 5 minutes of up")


def lifecycle(run, read_results, job_done, destroy) -> dict[str, float]:
    """up, no-op up, (the job finishes), destroy of one stack; seconds each. The stack is
    destroyed whatever happens."""
    times: dict[str, float] = {}
    destroyed = False
    try:
        start = time.time()
        run("up", "--yes")
        times["up"] = time.time() - start
        times["up to first trial"] = first_trial_start(read_results) - start
        begin = time.time()
        run("up", "--yes", "--expect-no-changes")
        times["no-op up"] = time.time() - begin
        deadline = time.time() + 900
        while not job_done():
            if time.time() > deadline:
                raise SystemExit("bench_two_hosts: the job did not finish in 15 minutes")
            time.sleep(3)
        begin = time.time()
        destroyed = True
        destroy()
        times["destroy"] = time.time() - begin
    finally:
        if not destroyed:
            destroy()
    return times


def local_lifecycle(work: Path) -> dict[str, float]:
    engine = make_engine(work / "local-home")
    project = copy_project(work / "local")
    workspace = work / "local-workspace"

    def run(*args: str) -> None:
        ok(pulumi(engine, project, *args, "--stack", "local"))

    ok(pulumi(engine, project, "stack", "select", "--create", "local"))
    run("config", "set", "benchstack:workspace", str(workspace))
    with check_page("http://127.0.0.1:27892/") as url:
        run("config", "set", "--path", "benchstack:proxy.check_url", url)

        def job_dir() -> Path:
            outputs = ok(pulumi(engine, project, "stack", "output", "--json", "--stack",
                                "local")).json()
            return Path(outputs[keys.JOB_DIR])

        def results() -> list[dict]:
            return [json.loads(p.read_text()) for p in job_dir().glob("*__*/result.json")]

        def done() -> bool:
            result = job_dir() / "result.json"
            return result.is_file() and bool(json.loads(result.read_text()).get("finished_at"))

        say("local stack: up, no-op up, destroy")
        return lifecycle(run, results, done, lambda: run("destroy", "--yes"))


def two_host_lifecycle(work: Path) -> dict[str, float]:
    engine = make_engine(work / "hosts-home")
    running = Hosts.start()
    running.prepare()
    with ssh_agent(running.key, work) as agent, check_page(CONFIG.proxy.check_url):
        stack = Rehearsal.create(engine, work / "rehearsal", running,
                                 {**agent, "XDG_CACHE_HOME": str(work / "cache")})

        def run(*args: str) -> None:
            ok(stack.cli(*args))

        def job() -> str:
            return stack.outputs()[keys.JOB_DIR]

        def results() -> list[dict]:
            text = running.on(B, "python3 -c 'import glob, json, sys; [print(json.dumps("
                              "json.load(open(f)))) for f in glob.glob(sys.argv[1])]' "
                              f"'{job()}/*__*/result.json'").stdout
            return [json.loads(line) for line in text.splitlines() if line.strip()]

        def done() -> bool:
            text = running.on(B, f"cat {job()}/result.json", check=False).stdout
            return bool(text) and bool(json.loads(text).get("finished_at"))

        say("two-host rehearsal: up, no-op up, destroy")
        return lifecycle(run, results, done, lambda: run("destroy", "--yes"))


def print_lifecycle(local: dict[str, float], two: dict[str, float]) -> None:
    print("\nlifecycle through the real CLI, from a fresh stack (one run each):")
    print(f"{'':22} {'local':>9} {'two hosts':>10} {'ratio':>7}")
    for step in ("up", "up to first trial", "no-op up", "destroy"):
        print(f"{step:22} {local[step]:8.1f}s {two[step]:9.1f}s {two[step] / local[step]:6.2f}x")


# --- teardown ------------------------------------------------------------------------------

def teardown_round(work: Path, label: str, override: dict, trials: int, concurrency: int) -> float:
    """One oracle job of `trials` trials on the demo tasks; its trials per minute."""
    name = f"teardown-{label}-{int(time.time() * 1000)}"
    compose = work / f"{name}.compose.yaml"
    compose.write_text(json.dumps(override))
    attempts = -(-trials // len(list(DEMO_TASKS.iterdir())))
    argv = [str(HARBOR), "run", "-p", str(DEMO_TASKS), "-a", "oracle", "-e", "docker",
            "-n", str(concurrency), "-k", str(attempts), "--job-name", name,
            "-o", str(work / "jobs"), "--extra-docker-compose", str(compose), "-y"]
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=work, timeout=1800,
                          env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HARBOR_TELEMETRY": "0",
                               "HOME": str(work)})
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"bench_two_hosts: harbor run failed: {proc.stdout[-2000:]}")
    done = list((work / "jobs" / name).glob("*__*/result.json"))
    if len(done) != attempts * len(list(DEMO_TASKS.iterdir())):
        raise SystemExit(f"bench_two_hosts: {name}: {len(done)} trials")
    return len(done) / wall * 60


def teardown(work: Path, rounds: int) -> None:
    harbor = HarborConfig.model_validate({
        "version": "0.21.0", "wheel_sha256": CONFIG.harbor.wheel_sha256,
        "n_concurrent_trials": 3, "agent": {"name": "oracle", "n_concurrent": 3}})
    after = compose_override(harbor, tools_dir=None, proxy_url=None)
    before = json.loads(json.dumps(after))
    before["services"]["main"].pop("init")
    rates: dict[str, list[float]] = {"without init (before)": [], "with init (after)": []}
    for i in range(rounds):
        for label, override in (("without init (before)", before), ("with init (after)", after)):
            rate = teardown_round(work, "before" if "before" in label else "after", override,
                                  trials=6, concurrency=3)
            rates[label].append(rate)
            say(f"teardown round {i + 1}: {label}: {rate:.1f} trials/min")
    b, a = (statistics.median(v) for v in rates.values())
    print("\nDocker trials (Harbor 0.21.0 oracle, demo tasks, 6 trials at -n 3, median of "
          f"{rounds} rounds):")
    print(f"  without init (before): {b:5.1f} trials/min")
    print(f"  with init (after):     {a:5.1f} trials/min  ({a / b:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["lifecycle", "teardown"])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-two-hosts-"))
    was_running = hosts("status").returncode == 0
    try:
        if args.only != "teardown":
            local = local_lifecycle(work)
            two = two_host_lifecycle(work)
            print_lifecycle(local, two)
        if args.only != "lifecycle":
            teardown(work, args.rounds)
    finally:
        if not was_running:
            hosts("stop")


if __name__ == "__main__":
    main()
