"""End to end: the `local` stack from up to audit to destroy, for real, in the order Pulumi runs it.

`__main__.py` is evaluated for `Pulumi.local.yaml` by tests/e2e/engine.py, which runs every
host script the program declares on this machine's real Docker engine (the daemon config is
applied to it and it is restarted by the stack's restart command), with the local registry as
the image mirror and tinyproxy behind the proxy bridge. The test then waits for the oracle job
with the progress command, audits the job from the stack outputs (recorded in a real stack and
read back through the real `pulumi stack output --json`), archives it to moto's S3, upgrades
(edited host scripts), checks that a second `up` runs nothing, destroys, and checks that
nothing is left but results, daemon.json and docker0 as they were.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import boto3
import pytest

from components import host as host_module
from components import outputs as keys
from components.config import split_stack_file
from tests.conftest import CANARY_IMAGE, REGISTRY, ROOT, docker
from tests.e2e.engine import StackState, delete, destroy, run_create, up
from tests.engine.conftest import copy_project, make_engine, record_outputs

pytestmark = pytest.mark.real

PY = sys.executable
DAEMON_JSON = Path("/etc/docker/daemon.json")
# What the oracle gets on the demo tasks: the expected category of every task.
EXPECTED = {
    "hello-file": "passed",
    "hello-file-wrong": "agent_error",
    "hello-file-slow": "agent_timeout",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def target_url():
    """A host-local HTTP server that a task container reaches only through the proxy bridge."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", _free_port()), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture
def canary_from_mirror(docker_engine):
    """Drop the local tag of the demo tasks' image so `up` must pull it through the mirror."""
    docker("image", "rm", CANARY_IMAGE, check=False)
    yield
    if docker("image", "inspect", CANARY_IMAGE, check=False).returncode != 0:
        docker("pull", f"{REGISTRY}/{CANARY_IMAGE}")
        docker("tag", f"{REGISTRY}/{CANARY_IMAGE}", CANARY_IMAGE)


@pytest.fixture
def stack(tmp_path, target_url, canary_from_mirror, harbor_bin):
    """The local stack's overrides for this machine, and a destroy that always runs."""
    workspace = tmp_path / "workspace"
    overrides = {
        "workspace": str(workspace),
        "docker": {
            "address_pools": [{"base": "10.213.0.0/16", "size": 24}],
            "restart_command": f"bash {ROOT}/tests/env/dockerd.sh restart",
            "proof_networks": 16,
        },
        "proxy": {"upstream": "127.0.0.1:27890", "bridge_port": 27891, "check_url": target_url},
    }
    daemon_before = DAEMON_JSON.read_bytes() if DAEMON_JSON.exists() else None
    docker0_before = docker0_address()
    state = StackState()
    try:
        yield state, overrides, workspace
    finally:
        if state.order:
            destroy(state)
        # Whatever happened, the engine's config is as it was and the engine answers.
        if daemon_before is None:
            assert not DAEMON_JSON.exists(), "destroy left /etc/docker/daemon.json behind"
        else:
            assert DAEMON_JSON.read_bytes() == daemon_before
        docker("info")
        assert docker0_address() == docker0_before, "destroy left docker0 at another address"



def docker0_address() -> str:
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", "docker0"],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[out.index("inet") + 1]


def wait_for_job(outputs: dict, timeout: int = 420) -> dict:
    return wait_for(outputs[keys.JOB_DIR], outputs[keys.JOB_PID_FILE], timeout)


def wait_for(job_dir: str, pid_file: str, timeout: int = 420) -> dict:
    proc = subprocess.run(
        [PY, "-m", "components.progress", job_dir, "--wait", "--json",
         "--timeout", str(timeout), "--pid-file", pid_file],
        capture_output=True, text=True, timeout=timeout + 60, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def audit_json(*args: str, env: dict | None = None, cwd: Path = ROOT, stdout: bool = True) -> dict:
    """The JSON report; with `stdout=False`, read from the `--out` file given in `args`."""
    proc = subprocess.run(
        [PY, "-m", "audit", *args, "--format", "json"],
        capture_output=True, text=True, timeout=300, cwd=cwd, env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    if stdout:
        return json.loads(proc.stdout)
    return json.loads(Path(args[list(args).index("--out") + 1]).read_text())


def assert_demo_scores(report: dict) -> None:
    categories = {t["task"]: t["category"] for t in report["trials"]}
    assert categories == EXPECTED
    raw = report["raw"]
    assert (raw["passed"], raw["total"], raw["score"]) == (1, 3, 33.33)
    assert raw["ci_low"] < 33.33 < raw["ci_high"]


def leftovers(job_name: str) -> dict[str, list[str]]:
    project = job_name.lower()
    containers = docker("ps", "-a", "--format", "{{.Names}}").stdout.split()
    networks = docker("network", "ls", "--format", "{{.Name}}").stdout.split()
    procs = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return {
        "containers": [c for c in containers if "__env" in c or project in c],
        "networks": [n for n in networks if "__env" in n or "benchstack-pool-proof" in n],
        "processes": [
            line for line in procs.splitlines()
            if ("harbor run" in line or "harbor job resume" in line or "socat" in line)
            and "ps -eo" not in line
        ],
    }


def test_local_stack_up_audit_archive_upgrade_reup_destroy(stack, s3_env, tmp_path, monkeypatch):
    state, overrides, workspace = stack

    first = up("local", state, overrides)
    outputs = first.run.exports
    assert first.replaced == [] and first.unchanged == []
    assert {keys.JOB_DIR, keys.JOB_LOG, keys.TOOLS_DIR, keys.PROXY_URL} <= outputs.keys()
    assert outputs[keys.IMAGES_READY] == 1
    assert docker("image", "inspect", CANARY_IMAGE, check=False).returncode == 0
    daemon = json.loads(DAEMON_JSON.read_text())
    assert daemon["default-address-pools"] == [{"base": "10.213.0.0/16", "size": 24}]

    snapshot = wait_for_job(outputs)
    assert snapshot["done"] == snapshot["total"] == 3

    # The audit finds the job from the stack outputs alone, through the real
    # `pulumi stack output --json` of a real stack holding them, from another directory.
    engine = make_engine(tmp_path / "pulumi-home")
    project = copy_project(tmp_path / "clone")
    record_outputs(engine, project, "local", outputs, tmp_path)
    report = audit_json("--stack", "local", "--project", str(project),
                        env={**engine.env, "PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    assert_demo_scores(report)

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

    # An upgrade of benchstack edits host scripts: each is an update that runs its create again
    # over what is there and deletes nothing, so pools, bundle, bridge and Harbor stay in place.
    edited = {"daemon_config.sh": "local-docker-daemon-apply", "tool_bundle.sh": "tools-build",
              "proxy_bridge.sh": "proxy-socat", "harbor_install.sh": "job-install"}
    original_text = host_module.script_text

    def upgraded(script: str) -> str:
        text = original_text(script)
        return text + "\n# benchstack upgrade\n" if script in edited else text

    monkeypatch.setattr(host_module, "script_text", upgraded)
    upgrade = up("local", state, overrides)
    assert upgrade.created == [] and upgrade.replaced == [], (upgrade.created, upgrade.replaced)
    assert sorted(upgrade.updated) == sorted(edited.values())
    assert json.loads(DAEMON_JSON.read_text())["default-address-pools"] == overrides["docker"][
        "address_pools"]
    tools = Path(outputs[keys.TOOLS_DIR])
    assert all((tools / "bin" / tool).is_file() for tool in ("tmux", "tmux.real", "asciinema"))
    assert leftovers(outputs[keys.JOB_NAME])["processes"], "the proxy bridge is gone"
    harbor = workspace / "harbor-0.21.0" / "bin" / "harbor"
    assert subprocess.run([str(harbor), "--version"], capture_output=True).returncode == 0
    monkeypatch.undo()

    # A second up runs nothing: every command's inputs and triggers are unchanged.
    second = up("local", state, overrides)
    assert second.created == [] and second.replaced == [], (second.created, second.replaced)
    assert second.run.exports[keys.JOB_NAME] == outputs[keys.JOB_NAME]

    destroy(state)
    assert leftovers(outputs[keys.JOB_NAME]) == {"containers": [], "networks": [], "processes": []}
    remaining = sorted(p.name for p in workspace.iterdir()) if workspace.exists() else []
    assert Path(job_dir).is_dir() and (Path(job_dir) / "result.json").is_file()
    assert Path(outputs[keys.JOB_LOG]).is_file()
    assert set(remaining) <= {"logs", "results"}, f"destroy left {remaining} in {workspace}"
    logs = Path(outputs[keys.JOB_LOG]).parent
    job_pid = Path(outputs[keys.JOB_PID_FILE]).name
    pid_files = [p.name for p in logs.rglob("*.pid*") if p.name != job_pid]
    assert pid_files == [], f"destroy left supervisor pid files: {pid_files}"


def test_local_stack_sigterm_then_resume(stack):
    state, overrides, _ = stack
    first = up("local", state, overrides)
    outputs = first.run.exports
    pid = int(Path(outputs[keys.JOB_PID_FILE]).read_text().split()[0])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"harbor (pid {pid}) did not exit within 120 s of SIGTERM")
    result = json.loads((Path(outputs[keys.JOB_DIR]) / "result.json").read_text())
    assert result["finished_at"] is None

    resumed = up("local", state, overrides)
    assert resumed.replaced, "the interrupted job was not resumed by `up`"
    assert resumed.run.exports[keys.JOB_DIR] == outputs[keys.JOB_DIR]
    wait_for_job(outputs)
    assert_demo_scores(audit_json(outputs[keys.JOB_DIR]))
    destroy(state)
    assert leftovers(outputs[keys.JOB_NAME]) == {"containers": [], "networks": [], "processes": []}


def tree(path: Path) -> dict[str, tuple[int, int]]:
    """Every file under `path` with its size and mtime: what "never written to" compares."""
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(path.rglob("*")) if p.is_file()}


def test_local_stack_reruns_an_infra_failure_and_merges_the_score(stack, tmp_path):
    """The loop: run, audit, rerun, merged score. The proxy bridge goes away while the main job
    runs, so the verifier of hello-proxy (it needs the proxy) fails by infra; the audit lists
    it; with the proxy back, `up` reruns exactly that task as its own job; the merged score
    counts it as passed with both attempts shown, and the main job's dir is never written."""
    state, overrides, workspace = stack
    dataset = tmp_path / "tasks"
    for task, source in (("hello-file", ROOT / "demo" / "tasks"),
                         ("hello-proxy", ROOT / "tests" / "e2e" / "tasks")):
        shutil.copytree(source / task, dataset / task)
    harbor = split_stack_file(ROOT / "Pulumi.local.yaml")[0]["harbor"]
    overrides = {
        **overrides,
        "dataset": {"path": str(dataset), "expected_tasks": 2, "manifest_path": str(dataset)},
        "harbor": {**harbor, "job_name_prefix": "local-rerun", "reruns": {"from_audit": True}},
    }

    first = up("local", state, overrides)
    outputs = first.run.exports
    assert outputs[keys.RERUN_JOB_DIRS] == []
    main_name = outputs[keys.JOB_NAME]
    assert outputs[keys.RERUN_WAITING].startswith(f"waits for the main job {main_name}")
    bridge = state.commands["proxy-socat"]
    delete(bridge)  # the proxy is gone while the main job runs (hello-proxy's agent sleeps)
    wait_for_job(outputs)
    main_dir = Path(outputs[keys.JOB_DIR])
    main = audit_json(str(main_dir))
    assert {t["task"]: t["category"] for t in main["trials"]} == {
        "hello-file": "passed", "hello-proxy": "infra"}
    assert main["rerun"] == ["hello-proxy"]
    written = tree(main_dir)

    # Still nothing to rerun until `up` is asked; the proxy comes back first.
    run_create(bridge)
    # Preview shows the rerun replacing its waiting steps, and starts nothing.
    preview = up("local", state, overrides, preview=True)
    assert {"rerun-configs", "rerun-preflight", "rerun-launch"} <= set(preview.replaced)
    assert preview.created == []
    assert not list(main_dir.parent.glob(f"{main_dir.name}-rerun-*"))
    second = up("local", state, overrides)
    rerun_dirs = second.run.exports[keys.RERUN_JOB_DIRS]
    assert len(rerun_dirs) == 1 and second.run.exports[keys.RERUN_WAITING] == ""
    assert {"rerun-configs", "rerun-preflight", "rerun-launch"} <= set(second.replaced)
    rerun_dir = Path(rerun_dirs[0])
    assert rerun_dir.name.startswith(f"{outputs[keys.JOB_NAME]}-rerun-")
    logs = Path(outputs[keys.JOB_LOG]).parent
    wait_for(str(rerun_dir), str(logs / f"{rerun_dir.name}.pid"))
    rerun = audit_json(str(rerun_dir))
    assert {t["task"]: t["category"] for t in rerun["trials"]} == {"hello-proxy": "passed"}

    merged = audit_json(str(main_dir), "--rerun", str(rerun_dir))
    attempts = {t["task"]: t for t in merged["merge"]["tasks"]}
    assert [a["category"] for a in attempts["hello-proxy"]["attempts"]] == ["infra", "passed"]
    assert [a["category"] for a in attempts["hello-file"]["attempts"]] == ["passed"]
    assert (merged["raw"]["passed"], merged["raw"]["total"]) == (1, 2)  # the main job's own
    assert (merged["merge"]["raw"]["passed"], merged["merge"]["raw"]["total"]) == (2, 2)
    assert merged["merge"]["rerun"] == []

    # The same merge from the stack outputs alone, through the real `pulumi stack output`:
    # the rerun dirs and the provenance manifest come with the main job.
    engine = make_engine(tmp_path / "pulumi-home")
    project = copy_project(tmp_path / "clone")
    record_outputs(engine, project, "local", second.run.exports, tmp_path)
    report_dir = tmp_path / "report"
    from_stack = audit_json("--stack", "local", "--project", str(project), "--out",
                            str(report_dir / "report.json"),
                            env={**engine.env, "PYTHONPATH": str(ROOT)}, cwd=tmp_path,
                            stdout=False)
    assert from_stack["merge"]["tasks"] == merged["merge"]["tasks"]
    assert from_stack["provenance"]["job"]["name"] == outputs[keys.JOB_NAME]
    assert (report_dir / "provenance.json").is_file()

    # The provenance manifest names the rerun beside the main job.
    provenance = json.loads(Path(second.run.exports[keys.PROVENANCE_PATH]).read_text())
    assert provenance["schema"] == keys.PROVENANCE_SCHEMA
    assert provenance["job"]["name"] == outputs[keys.JOB_NAME]
    assert [r["tasks"] for r in provenance["reruns"]] == [["hello-proxy"]]
    assert provenance["harbor_config"]["job_name"] == outputs[keys.JOB_NAME]
    assert "HTTP_PROXY" in provenance["compose_override"]

    # A third `up` starts nothing again; destroy stops the rerun and keeps both results.
    third = up("local", state, overrides)
    assert third.created == [] and third.replaced == [], (third.created, third.replaced)

    # Another round, with another task list: another job; the first round stays in the outputs.
    overrides["harbor"] = {**overrides["harbor"], "reruns": ["hello-file", "hello-proxy"]}
    fourth = up("local", state, overrides)
    dirs = fourth.run.exports[keys.RERUN_JOB_DIRS]
    assert len(dirs) == 2 and dirs[0] == str(rerun_dir), dirs
    second_round = Path(dirs[1])
    wait_for(str(second_round), str(logs / f"{second_round.name}.pid"))
    both = audit_json(str(main_dir), "--rerun", dirs[0], "--rerun", dirs[1])
    statuses = {t["task"]: [a["status"] for a in t["attempts"]] for t in both["merge"]["tasks"]}
    assert statuses == {"hello-file": ["counted", "unused"],
                        "hello-proxy": ["superseded", "counted", "unused"]}
    assert (both["merge"]["raw"]["passed"], both["merge"]["raw"]["total"]) == (2, 2)

    destroy(state)
    for done in (rerun_dir, second_round):
        assert leftovers(done.name) == {"containers": [], "networks": [], "processes": []}
        assert (done / "result.json").is_file()
    assert tree(main_dir) == written, "the rerun wrote into the main job's directory"
