"""End to end: the `local` stack through the real `pulumi` CLI, from preview to destroy.

The project's own `__main__.py` runs under the language host; the command provider runs every
host step on this machine's real Docker engine (the daemon config is merged into it and it is
restarted the way the shipped stack says: decided on the host), with the local registry as the
image mirror and tinyproxy behind the proxy bridge. Each test then checks the host itself, not
the CLI's words: daemon.json, docker0, networks, containers, processes, files, Harbor's job.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from components.config import split_stack_file
from contracts import jobdir
from contracts import outputs as keys
from tests.audit.proof_check import quoted_in_file
from tests.conftest import CANARY_IMAGE, ROOT, docker
from tests.e2e.conftest import DAEMON_JSON, LocalStack, daemon_pools, docker0_address
from tests.engine.conftest import changed, steps
from tests.engine.test_cli import ProcessWatch

pytestmark = pytest.mark.real

PY = sys.executable
# What Terminus-2 (through the stand-in model) gets on the demo tasks: each task's category.
EXPECTED = {
    "hello-file": "passed",
    "hello-file-wrong": "agent_error",
    "hello-file-slow": "agent_timeout",
}
API_KEY = "sk-benchstack-e2e-canary"
IMAGE = "127.0.0.1:5000/benchstack/sglang-standin:0.3.2"
WORKER, ROUTER = "benchstack-sglang-local", "benchstack-sglang-router"
MODEL = "benchstack/stand-in"
# The proxy bridge's state (components/proxy_bridge.py: BRIDGE_NAME under <workspace>/logs).
BRIDGE = "logs/proxy-bridge/benchstack-proxy-bridge"


def wait_for(job_dir: str, pid_file: str, timeout: int = 420) -> dict:
    proc = subprocess.run(
        [PY, "-m", "components.progress", job_dir, "--wait", "--json",
         "--timeout", str(timeout), "--pid-file", pid_file],
        capture_output=True, text=True, timeout=timeout + 60, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def wait_for_job(outputs: dict, timeout: int = 420) -> dict:
    return wait_for(outputs[keys.JOB_DIR], outputs[keys.JOB_PID_FILE], timeout)


def audit_json(*args: str, env: dict | None = None, cwd: Path = ROOT,
               out: Path | None = None) -> dict:
    """The JSON report (read from `out` when the report goes to a file)."""
    proc = subprocess.run(
        [PY, "-m", "audit", *args, "--format", "json", *(["--out", str(out)] if out else [])],
        capture_output=True, text=True, timeout=300, cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(out.read_text() if out else proc.stdout)


def assert_demo_scores(report: dict, *, oracle: bool = False) -> None:
    """The demo tasks' expected categories; run by the oracle (the local-k8s stack), the
    reference solution of hello-file-wrong failing is no model failure (audit/RULES.md)."""
    categories = {t["task"]: t["category"] for t in report["trials"]}
    assert categories == (EXPECTED | {"hello-file-wrong": "insufficient_evidence"} if oracle
                          else EXPECTED)
    raw = h21(report)
    assert (raw["passed"], raw["counted"], raw["score"]) == (1, 3, 33.33)
    assert raw["low"] < 33.33 < raw["high"]
    # The board's rule: the agent timeout is counted (as 0), three tasks of one trial each.
    board = report["scores"]["leaderboard"]["rows"][0]["raw"]
    assert (board["counted"], board["shown"]) == (3, "33.3% ± N/A (leaderboard)")


def h21(report: dict, which: str = "raw") -> dict:
    """Harbor 0.21's job mean (the one row of its convention), raw or adjusted."""
    return report["scores"]["harbor-0.21"]["rows"][0][which]


def interrupt_harbor(outputs: dict, timeout: float) -> None:
    """SIGTERM to the job's Harbor, as an operator's Ctrl-C or a host shutdown: it must exit
    within `timeout` and leave the job unfinished (so the next `up` resumes it)."""
    pid = int(Path(outputs[keys.JOB_PID_FILE]).read_text().split()[0])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"harbor (pid {pid}) did not exit within {timeout} s of SIGTERM")
    result = json.loads((Path(outputs[keys.JOB_DIR]) / "result.json").read_text())
    assert result["finished_at"] is None


def process_lines(workspace: Path) -> list[str]:
    """The stack's job processes: its Harbor (run or resumed, each naming the stack's workspace:
    its jobs dir or the job dir; the cluster's tests beside the local stacks run Harbors of their
    own) and the proxy bridge's socat and loop, which only a local stack starts."""
    procs = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return sorted(
        line for line in procs.splitlines()
        if ((("harbor run" in line or "harbor job resume" in line) and str(workspace) in line)
            or "socat" in line or "benchstack-proxy-bridge-loop" in line)
        and "ps -eo" not in line
    )


def leftovers(job_name: str, workspace: Path) -> dict[str, list[str]]:
    project = job_name.lower()
    containers = docker("ps", "-a", "--format", "{{.Names}}").stdout.split()
    networks = docker("network", "ls", "--format", "{{.Name}}").stdout.split()
    return {
        "containers": [c for c in containers if "__env" in c or project in c],
        "networks": [n for n in networks if "__env" in n or "benchstack-pool-proof" in n],
        "processes": process_lines(workspace),
    }


def host_snapshot(workspace: Path) -> dict:
    """What a preview must leave untouched."""
    return {
        "daemon_json": DAEMON_JSON.read_bytes() if DAEMON_JSON.exists() else None,
        "docker0": docker0_address(),
        "networks": sorted(docker("network", "ls", "--format", "{{.Name}}").stdout.split()),
        "containers": sorted(docker("ps", "-a", "--format", "{{.Names}}").stdout.split()),
        "processes": process_lines(workspace),
        "workspace": workspace.exists(),
    }


def listeners(port: int) -> list[str]:
    """The local addresses something listens on at `port`."""
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True)
    return sorted({line.split()[3] for line in out.stdout.splitlines() if line.strip()})


def record_of(job_dir: str) -> list[dict]:
    """The serving record the sampler kept beside the job."""
    path = Path(job_dir) / jobdir.SERVING_RECORD
    return [json.loads(line) for line in path.read_text().splitlines()]


def sampler_gone(job_dir: str, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    pid = jobdir.recorded_pid(Path(jobdir.serving_sampler_pid(job_dir)))
    while pid is not None and Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    return pid is not None and not Path(f"/proc/{pid}").exists()


def assert_serving_record(job_dir: str, report: dict) -> None:
    """The job dir holds the serving plane's own record: the gateway's reads (smg's names, one
    health series per DP rank) and the worker's (SGLang's names); the sampler ended with the job;
    every trial's time is split, and the timeout's says what the plane did meanwhile."""
    assert sampler_gone(job_dir), "the sampler outlived its job"
    record = record_of(job_dir)
    starts = [x for x in record if x.get("kind") == "start"]
    assert starts and starts[0]["targets"] == [
        {"source": "gateway", "url": "http://127.0.0.1:29000/metrics"},
        {"source": "worker", "url": "http://127.0.0.1:30001/metrics"}]
    gateway = [x for x in record if x.get("source") == "gateway" and x["ok"]]
    worker = [x for x in record if x.get("source") == "worker" and x["ok"]]
    assert gateway and worker
    health = {k for x in gateway for k in x["values"] if k.startswith("smg_worker_health{")}
    assert health == {'smg_worker_health{worker="http://127.0.0.1:30001@0"}',
                      'smg_worker_health{worker="http://127.0.0.1:30001@1"}'}
    names = {k.split("{")[0] for x in worker for k in x["values"]}
    assert {"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
            "sglang:gen_throughput", "sglang:time_to_first_token_seconds_count"} <= names
    assert max(x["values"].get('sglang:num_requests_total{model_name="benchstack/stand-in"}', 0)
               for x in worker) >= 6
    times = {t["task"]: t["time"] for t in report["trials"]}
    assert all(times[task]["model_s"] is not None for task in EXPECTED), times
    assert times["hello-file-slow"]["serving"].startswith("queue max "), times
    assert report["serving"]["reads"] == len([x for x in record if x.get("source")])


def bridge_listening(port: int = 27891) -> bool:
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True)
    return bool(out.stdout.strip())


def kill_bridge(workspace: Path) -> None:
    """The bridge dies with its supervisor (a reboot, a kill -9): nothing on the host restarts
    it."""
    state = workspace / BRIDGE
    for pid_file in (Path(f"{state}.pid"), Path(f"{state}.pid.socat")):
        pid = int(pid_file.read_text().strip())
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while bridge_listening() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not bridge_listening()


def inspect(container: str) -> dict:
    return json.loads(docker("inspect", container).stdout)[0]


def worker_requests() -> list[dict]:
    """The stand-in worker's request log (one JSON line per request on its stdout)."""
    lines = docker("logs", WORKER).stdout.splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def assert_serving_plane_as_declared(local: LocalStack) -> None:
    """What the Docker provider created reads back as the components declared it."""
    image_id = docker("image", "inspect", "--format", "{{.Id}}", IMAGE).stdout.strip()
    worker, router = inspect(WORKER), inspect(ROUTER)
    for info in (worker, router):
        assert info["State"]["Running"] and info["Image"] == image_id
        assert info["HostConfig"]["NetworkMode"] == "host"
        assert info["Config"]["User"] == "1000:1000"
        assert info["HostConfig"]["LogConfig"]["Type"] == "json-file"
    cmd = worker["Config"]["Cmd"]
    assert cmd[:2] == ["sglang", "serve"]
    flags = dict(zip(cmd[2::2], cmd[3::2], strict=False))
    assert (flags["--served-model-name"], flags["--port"], flags["--tp-size"],
            flags["--dp-size"]) == (MODEL, "30001", "1", "2")
    assert not worker["HostConfig"].get("DeviceRequests"), "a CPU worker asked for GPUs"
    assert worker["HostConfig"]["IpcMode"] == "host"
    assert worker["HostConfig"]["Binds"] == [f"{local.project}/demo/model:/models/model:ro"]
    assert {u["Name"]: u["Hard"] for u in worker["HostConfig"]["Ulimits"]} == {
        "memlock": 8388608, "stack": 67108864}
    # SGLang's metrics, for the serving record; the stand-in's decode speed and the pace of the
    # SGLang startup it replays (Pulumi.local.yaml).
    assert cmd[-5:] == ["--enable-metrics", "--decode-tokens-per-s", "200", "--startup-speed",
                        "100"]
    rcmd = router["Config"]["Cmd"]
    # The default gateway: smg, with its metrics listener bound where the sampler reads it and
    # its overload protection off, as router.worker_overload_protection decides.
    assert rcmd[:4] == ["python3", "-m", "smg", "launch"]
    assert rcmd[rcmd.index("--worker-urls") + 1] == "http://127.0.0.1:30001"
    assert "--dp-aware" in rcmd and "--disable-worker-overload-protection" in rcmd
    assert rcmd[rcmd.index("--prometheus-host") + 1:rcmd.index("--prometheus-host") + 4] == [
        "127.0.0.1", "--prometheus-port", "29000"]
    assert router["HostConfig"]["Ulimits"] == [{"Name": "nofile", "Soft": 16384, "Hard": 16384}]
    assert listeners(29000) == ["127.0.0.1:29000"], "the gateway's metrics on every interface"


def test_preview_of_a_fresh_stack_shows_the_plan_and_changes_nothing(local: LocalStack):
    before = host_snapshot(local.workspace)
    preview = local.preview()
    plan = steps(preview)
    assert set(plan.values()) == {"create"}
    for name in ("local-code-copy", "local-docker-daemon-apply", "images-pull", "tools-build",
                 "proxy-socat", "job-install", "job-launch", "local-sglang-container",
                 "router-container"):
        assert plan[name] == "create", name
    assert host_snapshot(local.workspace) == before
    assert local.resources() == []


def test_local_stack_up_noop_audit_change_upgrade_repair_destroy(local: LocalStack, s3_env,
                                                                 tmp_path):
    local.config("--secret", "benchstack:apiKey", API_KEY)

    # --- up: every step created; no secret in any process's arguments meanwhile -------------
    with ProcessWatch([API_KEY.encode()]) as seen:
        first = local.up()
    assert seen == [], seen
    assert set(changed(first).values()) == {"create"}
    outputs = local.outputs()
    assert {keys.JOB_DIR, keys.JOB_LOG, keys.TOOLS_DIR, keys.PROXY_URL} <= outputs.keys()
    assert outputs[keys.IMAGES_READY] == 1
    assert docker("image", "inspect", CANARY_IMAGE, check=False).returncode == 0
    assert daemon_pools() == [{"base": "10.213.0.0/16", "size": 24}]
    assert_serving_plane_as_declared(local)
    assert outputs[keys.ROUTER_URL] == "http://127.0.0.1:30000"
    assert outputs[keys.WORKER_URLS] == ["http://127.0.0.1:30001"]
    state_files = "".join(p.read_text() for p in (local.project / ".pulumi-state").rglob("*")
                          if p.is_file())
    assert API_KEY not in state_files and API_KEY not in json.dumps(local.export())
    # The state holds calls of the host code, not its text (it was 508 KB with the text).
    checkpoint = (local.project / ".pulumi-state" / ".pulumi" / "stacks" / "benchstack"
                  / "local.json").read_text()
    sizes = sorted(((len(json.dumps(r)), r["urn"].rsplit("::", 1)[-1])
                    for r in json.loads(checkpoint)["checkpoint"]["latest"]["resources"]),
                   reverse=True)
    assert len(checkpoint) < 200_000, sizes[:5]  # 31 resources
    assert "pinned_venv() {" not in checkpoint and "def main(" not in checkpoint

    # --- nothing changed: preview says so, and a second up creates and replaces nothing ---
    local.preview("--expect-no-changes")
    assert changed(local.up()) == {}

    # --- the job, its progress and its audit through the real stack outputs ----------------
    snapshot = wait_for_job(outputs)
    assert snapshot["done"] == snapshot["total"] == 3
    # Terminus-2's calls went through the router to the worker's dp ranks, as configured.
    calls = [r for r in worker_requests() if r["path"] == "/v1/chat/completions"
             and r["reply"]["source"] == "episode"]
    assert len(calls) >= 6, calls  # three trials, two turns or more each
    assert {r["model"] for r in calls} == {MODEL}
    assert {r["data_parallel_rank"] for r in calls} <= {0, 1}
    for call in calls:  # the router re-encodes floats as 32-bit
        assert abs(call["sampling"]["temperature"] - 0.7) < 1e-6
        assert abs(call["sampling"]["top_p"] - 0.9) < 1e-6
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    report = audit_json("--stack", "local", "--project", str(local.project),
                        env=local.engine.env, cwd=elsewhere)
    assert_demo_scores(report)
    assert_serving_record(outputs[keys.JOB_DIR], report)
    page = subprocess.run([PY, "-m", "audit", outputs[keys.JOB_DIR], "--format", "html"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT).stdout
    assert "The serving plane, with the trials" in page and "<polyline" in page
    # The speed check ran at the job's agent concurrency before launch; its figures are kept.
    serving = json.loads(Path(outputs[keys.PROVENANCE_PATH]).read_text())["serving"]
    speed = serving["speed_check"]
    assert (speed["concurrency"], speed["requests"], speed["errors"]) == (3, 6, 0), speed
    # The stand-in decodes at 200 tokens/s per request: measured through the gateway.
    assert 100 < speed["decode_tokens_per_s"] <= 220, speed  # wide: a loaded machine's sleeps
    assert 0 < speed["time_to_first_token_s"] < 5, speed
    # The worker's startup as the readiness wait followed it from the container's log: SGLang's
    # phases replayed 100 times faster (Pulumi.local.yaml), the weights' 100.34 s among them.
    startup = serving["workers"][0]["startup"]
    assert [p["phase"] for p in startup] == [
        "starting", "initialising torch distributed", "loading weights",
        "allocating the KV cache", "capturing CUDA graphs", "starting the server",
        "capturing CUDA graphs", "starting the server", "warming up", "ready"], startup
    assert abs(startup[2]["seconds"] - 1.0) <= 0.5, startup  # the stamps are dockerd's reading

    # Archive to S3, then audit the archived copy.
    job_dir = outputs[keys.JOB_DIR]
    boto3.client(
        "s3", endpoint_url=s3_env["AWS_ENDPOINT_URL"], region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing",
    ).create_bucket(Bucket="benchstack-e2e")
    uri = f"s3://benchstack-e2e/{Path(job_dir).name}"
    proc = subprocess.run(
        [PY, "-m", "audit", "archive", job_dir, uri], capture_output=True, text=True,
        timeout=300, cwd=ROOT, env={**os.environ, **s3_env},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert_demo_scores(audit_json(uri, env=s3_env))

    # --- an input change names exactly what it changes ------------------------------------
    local.config("--path", "benchstack:docker.proof_networks", "8")
    assert changed(local.preview("--diff")) == {"local-docker-daemon-apply": "update"}
    assert changed(local.up()) == {"local-docker-daemon-apply": "update"}
    assert daemon_pools() == [{"base": "10.213.0.0/16", "size": 24}]
    # Another concurrency is another job: its steps are replaced, the rest stays (preview only).
    local.config("--path", "benchstack:harbor.n_concurrent_trials", "2")
    local.config("--path", "benchstack:harbor.agent.n_concurrent", "2")
    job_change = changed(local.preview("--diff"))
    assert {"job-configs", "job-preflight", "job-launch"} <= job_change.keys()
    assert job_change["job-launch"] == "replace"
    assert not {"local-docker-daemon-apply", "images-pull", "tools-build", "proxy-socat",
                "job-install", "job-dataset"} & job_change.keys(), job_change
    local.config("--path", "benchstack:harbor.agent.n_concurrent", "3")
    local.config("--path", "benchstack:harbor.n_concurrent_trials", "3")
    local.preview("--expect-no-changes")

    # One worker flag: that worker is replaced (and proven ready again), its speed measured
    # again, nothing else but the provenance record of its server config and speed; the
    # router's worker list is the same, and the running job is not touched.
    local.config("--path", "benchstack:serving.max_running_requests", "3")
    serving_change = changed(local.preview("--diff"))
    assert serving_change == {"local-sglang-container": "replace", "local-sglang-ready": "replace",
                              "speed-measure": "replace", "provenance-write": "replace"}, (
        serving_change)
    assert changed(local.up()) == serving_change
    assert inspect(WORKER)["Config"]["Cmd"][inspect(WORKER)["Config"]["Cmd"].index(
        "--max-running-requests") + 1] == "3"
    local.preview("--expect-no-changes")

    # The seed's own gateway, sglang-router 0.3.2, proven the same way (its version in the
    # container, health, every DP rank registered, the model list, a real completion), then
    # back to smg: the router is replaced, neither the workers nor the job.
    for gateway, launcher in (("sglang-router", ["python3", "-m", "sglang_router.launch_router"]),
                              ("smg", ["python3", "-m", "smg", "launch"])):
        local.config("--path", "benchstack:router.implementation", gateway)
        swap = changed(local.up())
        assert {"router-container", "router-ready"} <= swap.keys(), swap
        assert not {"local-sglang-container", "job-launch"} & swap.keys(), swap
        assert inspect(ROUTER)["Config"]["Cmd"][:len(launcher)] == launcher
        assert inspect(ROUTER)["State"]["Running"]
        assert listeners(29000) == ["127.0.0.1:29000"]
    local.preview("--expect-no-changes")

    # --- an upgrade of benchstack edits host code: exactly the steps that run it re-run in place
    edited = {"hostside/daemon_config.py": "local-docker-daemon-apply",
              "hostside/tool_bundle.py": "tools-build", "hostside/proxy_bridge.py": "proxy-socat",
              "hostside/harbor_install.py": "job-install"}
    for rel in edited:
        path = local.project / rel
        path.write_text(path.read_text() + "\n# benchstack upgrade\n")
    expected = {**{step: "update" for step in edited.values()}, "local-code-copy": "update"}
    assert changed(local.preview()) == expected
    assert changed(local.up()) == expected
    assert daemon_pools() == [{"base": "10.213.0.0/16", "size": 24}]
    tools = Path(outputs[keys.TOOLS_DIR])
    assert all((tools / "bin" / tool).is_file() for tool in ("tmux", "tmux.real", "asciinema"))
    assert bridge_listening(), "the proxy bridge is gone"
    harbor = local.workspace / "harbor-0.21.0" / "bin" / "harbor"
    assert subprocess.run([str(harbor), "--version"], capture_output=True).returncode == 0
    shipped = local.workspace / ".benchstack" / "code" / "hostside" / "tool_bundle.py"
    assert shipped.read_text().endswith("# benchstack upgrade\n")

    # --- refresh reads the state back and finds nothing to change -------------------------
    assert "error" not in local.cli("refresh", "--yes").output.lower()
    local.preview("--expect-no-changes")

    # --- a dead proxy bridge is noticed at the next preview and started again by up -------
    kill_bridge(local.workspace)
    assert changed(local.preview()) == {"proxy-socat": "replace"}
    assert changed(local.up()) == {"proxy-socat": "replace"}
    assert bridge_listening()
    local.preview("--expect-no-changes")

    # --- destroy: only results and logs stay; daemon.json and docker0 as they were ---------
    local.destroy()
    assert local.resources() == []
    names = docker("ps", "-a", "--format", "{{.Names}}").stdout.split()
    assert WORKER not in names and ROUTER not in names
    assert leftovers(outputs[keys.JOB_NAME], local.workspace) == {
        "containers": [], "networks": [], "processes": []}
    assert Path(job_dir).is_dir() and (Path(job_dir) / "result.json").is_file()
    assert Path(outputs[keys.JOB_LOG]).is_file()
    remaining = sorted(p.name for p in local.workspace.iterdir())
    assert set(remaining) <= {"logs", "results"}, f"destroy left {remaining} in {local.workspace}"
    logs = Path(outputs[keys.JOB_LOG]).parent
    job_pid = Path(outputs[keys.JOB_PID_FILE]).name
    pid_files = [p.name for p in logs.rglob("*.pid*") if p.name != job_pid]
    assert pid_files == [], f"destroy left supervisor pid files: {pid_files}"
    assert "local" in local.cli("stack", "ls").stdout
    assert local.cli("stack", "rm", "--yes").returncode == 0
    assert "local" not in local.cli("stack", "ls").stdout


def test_local_stack_sigterm_then_resume(local: LocalStack):
    local.up()
    outputs = local.outputs()
    interrupt_harbor(outputs, timeout=120)

    # The probe sees the interruption: the launch is replaced, and only the launch.
    assert changed(local.preview()) == {"job-launch": "replace"}
    assert changed(local.up()) == {"job-launch": "replace"}
    assert local.outputs()[keys.JOB_DIR] == outputs[keys.JOB_DIR]
    wait_for_job(outputs)
    assert_demo_scores(audit_json(outputs[keys.JOB_DIR]))
    # The serving record survived the resume: the sampler started again beside the resumed
    # Harbor and appended to the same record, then ended with it.
    assert sampler_gone(outputs[keys.JOB_DIR])
    starts = [x for x in record_of(outputs[keys.JOB_DIR]) if x.get("kind") == "start"]
    assert len(starts) == 2 and starts[0]["until_pid"] != starts[1]["until_pid"], starts
    local.preview("--expect-no-changes")
    local.destroy()
    assert leftovers(outputs[keys.JOB_NAME], local.workspace) == {
        "containers": [], "networks": [], "processes": []}


def test_a_failed_up_leaves_state_the_next_up_recovers_from(local: LocalStack):
    """A host step that fails halfway: one reason on the console (not the step's source, no
    traceback), no pending operation in the state, the steps before it kept; with the step
    fixed, the next up creates the rest. The step is the job's configs: it runs after the serving
    plane, so which steps came before it does not depend on timing (Harbor's install and the
    dataset run beside the plane)."""
    script = local.project / "hostside" / "harbor_configs.py"
    original = script.read_text()
    marker = "\ndef create(inputs: Inputs) -> None:\n"
    assert marker in original
    script.write_text(original.replace(
        marker, marker + '    raise HostError("injected failure halfway")\n', 1))
    failed = local.cli("up", "--yes")
    assert failed.returncode != 0
    assert "harbor_configs: injected failure halfway" in failed.output
    assert "Traceback" not in failed.output and "KeyboardInterrupt" not in failed.output
    assert len(failed.output) < 40_000, len(failed.output)
    deployment = local.export()["deployment"]
    assert not deployment.get("pending_operations"), deployment.get("pending_operations")
    kept = {r["urn"].rsplit("::", 1)[-1] for r in deployment["resources"]}
    assert {"local-code-copy", "local-docker-daemon-apply", "router-ready", "job-dataset"} <= kept
    assert "job-configs" not in kept and "job-launch" not in kept

    script.write_text(original)
    recovered = changed(local.up())
    assert recovered.get("job-configs") == "create" and recovered.get("job-launch") == "create"
    assert "local-docker-daemon-apply" not in recovered
    local.preview("--expect-no-changes")


def tree(path: Path) -> dict[str, tuple[int, int]]:
    """Every file under `path` with its size and mtime: what "never written to" compares."""
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(path.rglob("*")) if p.is_file()}


def test_local_stack_reruns_an_infra_failure_and_merges_the_score(local: LocalStack, tmp_path):
    """The loop: run, audit, rerun, merged score. The proxy bridge dies while the main job
    runs, so the verifier of hello-proxy (it needs the proxy) fails by infra; the audit lists
    it; the next `up` starts the bridge again and reruns exactly that task as its own job; the
    merged score counts it as passed with both attempts shown, and the main job's dir is never
    written."""
    dataset = tmp_path / "tasks"
    for task, source in (("hello-file", ROOT / "demo" / "tasks"),
                         ("hello-proxy", ROOT / "tests" / "e2e" / "tasks")):
        shutil.copytree(source / task, dataset / task)
    harbor = split_stack_file(ROOT / "Pulumi.local.yaml")[0]["harbor"]
    local.config("benchstack:dataset", json.dumps(
        {"path": str(dataset), "expected_tasks": 2, "manifest_path": str(dataset)}))
    local.config("benchstack:harbor", json.dumps(
        {**harbor, "job_name_prefix": "local-rerun", "reruns": {"from_audit": True}}))

    local.up()
    # At once, while the main job runs (hello-proxy's agent sleeps first): not after another CLI
    # call, which on a loaded machine can last until hello-proxy's verifier has passed.
    kill_bridge(local.workspace)
    outputs = local.outputs()
    assert outputs[keys.RERUN_JOB_DIRS] == []
    main_name = outputs[keys.JOB_NAME]
    assert outputs[keys.RERUN_WAITING].startswith(f"waits for the main job {main_name}")
    wait_for_job(outputs)
    main_dir = Path(outputs[keys.JOB_DIR])
    main = audit_json(str(main_dir))
    assert {t["task"]: t["category"] for t in main["trials"]} == {
        "hello-file": "passed", "hello-proxy": "infra"}
    assert main["rerun"] == ["hello-proxy"]
    # The job's serving record is written until its sampler ends with Harbor: then the main
    # job's dir is what the rerun must leave as it is.
    assert sampler_gone(str(main_dir))
    written = tree(main_dir)

    # Preview shows the bridge started again and the rerun replacing its waiting steps, and
    # starts nothing.
    preview = changed(local.preview())
    assert preview["proxy-socat"] == "replace"
    assert {"rerun-configs", "rerun-preflight", "rerun-launch"} <= preview.keys()
    assert not [op for op in preview.values() if op == "create"]
    assert not list(main_dir.parent.glob(f"{main_dir.name}-rerun-*"))
    second = changed(local.up())
    assert {"rerun-configs", "rerun-preflight", "rerun-launch"} <= second.keys()
    assert "job-launch" not in second, "the finished main job was touched"
    after = local.outputs()
    rerun_dirs = after[keys.RERUN_JOB_DIRS]
    assert len(rerun_dirs) == 1 and after[keys.RERUN_WAITING] == ""
    rerun_dir = Path(rerun_dirs[0])
    assert rerun_dir.name.startswith(f"{main_name}-rerun-")
    logs = Path(outputs[keys.JOB_LOG]).parent
    wait_for(str(rerun_dir), str(logs / f"{rerun_dir.name}.pid"))
    rerun = audit_json(str(rerun_dir))
    assert {t["task"]: t["category"] for t in rerun["trials"]} == {"hello-proxy": "passed"}

    merged = audit_json(str(main_dir), "--rerun", str(rerun_dir))
    attempts = {t["task"]: t for t in merged["merge"]["tasks"]}
    assert [a["category"] for a in attempts["hello-proxy"]["attempts"]] == ["infra", "passed"]
    assert [a["category"] for a in attempts["hello-file"]["attempts"]] == ["passed"]
    assert (h21(merged)["passed"], h21(merged)["counted"]) == (1, 2)  # the main job's own
    assert (h21(merged["merge"])["passed"], h21(merged["merge"])["counted"]) == (2, 2)
    assert merged["merge"]["rerun"] == []

    # The same merge from the real stack's outputs: the rerun dirs and the provenance manifest
    # come with the main job.
    report_dir = tmp_path / "report"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    from_stack = audit_json("--stack", "local", "--project", str(local.project),
                            env=local.engine.env, cwd=elsewhere, out=report_dir / "report.json")
    assert from_stack["merge"]["tasks"] == merged["merge"]["tasks"]
    assert from_stack["provenance"]["job"]["name"] == main_name
    assert (report_dir / "provenance.json").is_file()
    provenance = json.loads(Path(after[keys.PROVENANCE_PATH]).read_text())
    assert provenance["schema"] == keys.PROVENANCE_SCHEMA
    assert [r["tasks"] for r in provenance["reruns"]] == [["hello-proxy"]]
    assert provenance["harbor_config"]["job_name"] == main_name
    assert "HTTP_PROXY" in provenance["compose_override"]

    # A third `up` starts nothing.
    assert changed(local.up()) == {}

    # Another round, with another task list: another job; the first round stays in the outputs.
    local.config("benchstack:harbor", json.dumps(
        {**harbor, "job_name_prefix": "local-rerun", "reruns": ["hello-file", "hello-proxy"]}))
    local.up()
    dirs = local.outputs()[keys.RERUN_JOB_DIRS]
    assert len(dirs) == 2 and dirs[0] == str(rerun_dir), dirs
    second_round = Path(dirs[1])
    wait_for(str(second_round), str(logs / f"{second_round.name}.pid"))
    both = audit_json(str(main_dir), "--rerun", dirs[0], "--rerun", dirs[1])
    statuses = {t["task"]: [a["status"] for a in t["attempts"]] for t in both["merge"]["tasks"]}
    assert statuses == {"hello-file": ["counted", "unused"],
                        "hello-proxy": ["superseded", "counted", "unused"]}
    assert (h21(both["merge"])["passed"], h21(both["merge"])["counted"]) == (2, 2)

    local.destroy()
    for done in (rerun_dir, second_round):
        assert leftovers(done.name, local.workspace) == {
            "containers": [], "networks": [], "processes": []}
        assert (done / "result.json").is_file()
    assert tree(main_dir) == written, "the rerun wrote into the main job's directory"


def test_serving_faults_a_wrong_tp_size_is_refused_and_a_dead_worker_is_infra(local: LocalStack):
    """A worker that serves another layout than the stack asks for stops `up` before the job
    starts, naming the field; a worker that dies mid-trial is the endpoint's failure, not the
    model's: the audit says infra with the router's words and lists the trials for a rerun."""
    # The server takes its last --tp-size: it reports 2 where the stack asked for 1.
    serving = split_stack_file(ROOT / "Pulumi.local.yaml")[0]["serving"]
    local.config("benchstack:serving", json.dumps(
        {**serving, "extra_server_args": ["--tp-size", "2"]}))
    refused = local.cli("up", "--yes")
    assert refused.returncode != 0
    assert "tp_size" in refused.output and "Traceback" not in refused.output, refused.output[-3000:]
    kept = {r["urn"].rsplit("::", 1)[-1] for r in local.resources()}
    assert "local-sglang-container" in kept and "local-sglang-ready" not in kept
    assert not {"router-container", "job-launch"} & kept, "the job started on a wrong server"

    # A serving plane too slow for the job stops `up` at the speed check, with both figures,
    # before Harbor starts.
    local.config("benchstack:serving", json.dumps(
        {**serving, "speed_check": {"min_decode_tokens_per_s": 1e12}}))
    slow = local.cli("up", "--yes")
    assert slow.returncode != 0
    assert "the serving plane is too slow for the job: decode " in slow.output, slow.output[-3000:]
    assert ("below the required 1e+12 (benchstack:serving.speed_check.min_decode_tokens_per_s)"
            in slow.output)
    kept = {r["urn"].rsplit("::", 1)[-1] for r in local.resources()}
    assert "router-ready" in kept and not {"speed-measure", "job-launch"} & kept

    local.config("benchstack:serving", json.dumps(serving))
    fixed = changed(local.up())
    # The worker goes away as the trials start (`up` returns once the first one runs), at
    # once: the agents' calls find no model behind the gateway.
    docker("stop", WORKER)
    assert fixed["speed-measure"] == "create" and fixed["job-launch"] == "create"
    outputs = local.outputs()
    wait_for_job(outputs)
    report = audit_json(outputs[keys.JOB_DIR])
    trials = {t["task"]: t for t in report["trials"]}
    for task in ("hello-file", "hello-file-wrong"):
        assert trials[task]["category"] == "infra", trials[task]
        assert task in report["rerun"]
        # The serving plane's own record says so too, the read quoted where it is.
        plane = [p for p in trials[task]["proof"] if p["cause"] == "serving_record"]
        assert plane, trials[task]
        assert plane[0]["where"].startswith(f"../{jobdir.SERVING_RECORD}:")
        assert quoted_in_file(Path(outputs[keys.JOB_DIR]), trials[task]["trial"],
                              plane[0]["where"], plane[0]["quote"]), plane
        # The router's own words: its circuit open on the dead worker (smg 1.13.0: "All workers
        # are unavailable"; sglang-router: "No available workers"), or the upstream refused.
        evidence = json.dumps(trials[task])
        assert any(words in evidence for words in (
            "All workers are unavailable", "No available workers", "call_upstream_request_error",
            "error sending request")), evidence

    # The next preview sees the worker stopped; `up` starts it again (a new container, proven
    # ready), and touches neither the router nor the finished job.
    expected = {"local-sglang-container": "replace", "local-sglang-ready": "replace"}
    assert changed(local.preview()).items() >= expected.items()
    back = changed(local.up())
    assert back.items() >= expected.items() and not {"router-container", "job-launch"} & set(back)
    assert inspect(WORKER)["State"]["Running"]
    local.preview("--expect-no-changes")
    local.destroy()
    assert (Path(outputs[keys.JOB_DIR]) / "result.json").is_file()
