"""The one remote job copy (contracts/job_copy.py) over the real OpenSSH server on 127.0.0.1, as
both of its callers make it: the program's rerun audit (components/seam/ssh.py's command, run by
an invoke with the stack's key on standard input) and the audit's `--stack` (audit/read/remote.py,
with the options the seam gives the `harbor_ssh` stack output; found by the two-host rehearsal:
`python -m audit --stack` of a stack whose Harbor host is another machine stopped at "not
readable here"). One cache path, one completion mark. The whole path, `--stack` through the
real CLI on a real remote host, is tests/e2e/test_two_hosts.py's."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from audit.read import remote
from audit.read.stack import StackError, job_from_outputs
from components.seam.audit import audit_command
from components.seam.ssh import copy_here_command
from contracts import job_copy
from contracts import outputs as keys
from tests.audit.audit_jobgen import TrialSpec, write_job
from tests.conftest import ROOT, SAMPLE_JOBS
from tests.hostplane.test_ssh_seam import host, run, sshd  # noqa: F401

pytestmark = [pytest.mark.real, pytest.mark.no_docker]


@pytest.fixture
def remote_job(tmp_path: Path) -> Path:
    """A finished job dir "on the host" (the loopback sshd is this machine: another path)."""
    job = tmp_path / "host" / "results" / "oracle-pass"
    shutil.copytree(SAMPLE_JOBS / "oracle-pass", job)
    return job


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "benchstack" / "jobs"


def access(sshd) -> dict:  # noqa: F811
    peer = host(name="worker-b", host_key=sshd["host_key"], key_path=sshd["key_path"])
    return peer.ssh_access()


def test_the_program_copies_a_finished_job_once_with_the_key_on_stdin_and_audits_it(
        sshd, tmp_path, cache) -> None:  # noqa: F811
    """harbor.reruns.from_audit on a remote Harbor host: what read_dir_here runs, the copy
    (once) with the stack's secret key, then the audit of the copy, the host's job unchanged."""
    job = write_job(tmp_path / "remote" / "results", "main-job", [
        TrialSpec(task="hello-file"),
        TrialSpec(task="hello-proxy", reward=None, exception_type="CancelledError",
                  exception_message=""),
    ])
    before = {p: p.stat().st_mtime_ns for p in job.rglob("*")}
    # The stack's key only: no key file among the options, no agent (run() empties it).
    peer = host(host_key=sshd["host_key"])
    copy = job_copy.cache_dir(peer.name, str(job))
    assert copy == cache / "peer" / "main-job"
    text = copy_here_command(peer, str(job), copy, with_key=True) + audit_command(str(copy))
    assert sshd["stored_key"] not in text
    first = run(text, stdin=sshd["stored_key"])
    assert first.returncode == 0, first.stderr[-2000:]
    assert json.loads(first.stdout)["rerun"] == ["hello-proxy"]
    assert (copy / "result.json").is_file() and "copying" in first.stderr
    assert (copy / job_copy.FINAL_MARK).is_file()
    assert {p: p.stat().st_mtime_ns for p in job.rglob("*")} == before, "the host's job changed"

    again = run(text, stdin=sshd["stored_key"])
    assert again.returncode == 0 and "copying" not in again.stderr
    assert json.loads(again.stdout)["rerun"] == json.loads(first.stdout)["rerun"]
    # The audit's `--stack` finds the same copy final: one cache path, one mark.
    assert remote.copy_here("peer", access(sshd), str(job)) == copy


def test_the_audit_copies_a_finished_job_once(sshd, remote_job, cache) -> None:  # noqa: F811
    ssh = access(sshd)
    copy = remote.copy_here("worker-b", ssh, str(remote_job))
    assert copy == cache / "worker-b" / "oracle-pass"
    assert sorted(p.name for p in copy.iterdir() if p.name != job_copy.FINAL_MARK) == sorted(
        p.name for p in remote_job.iterdir())
    assert (copy / "result.json").read_bytes() == (remote_job / "result.json").read_bytes()
    assert (copy / job_copy.FINAL_MARK).is_file()
    # Final: a later change on the host is not fetched again (a finished job does not change).
    (remote_job / "job.log").write_text("changed\n")
    assert remote.copy_here("worker-b", ssh, str(remote_job)) == copy
    assert (copy / "job.log").read_text() != "changed\n"


def test_a_running_job_is_copied_afresh(sshd, remote_job, cache) -> None:  # noqa: F811
    result = json.loads((remote_job / "result.json").read_text())
    result["finished_at"] = None
    (remote_job / "result.json").write_text(json.dumps(result))
    ssh = access(sshd)
    copy = remote.copy_here("worker-b", ssh, str(remote_job))
    assert not (copy / job_copy.FINAL_MARK).exists()
    (remote_job / "job.log").write_text("later\n")
    assert (remote.copy_here("worker-b", ssh, str(remote_job)) / "job.log").read_text() == "later\n"


def test_a_host_that_refuses_is_one_line(sshd, tmp_path, remote_job, cache) -> None:  # noqa: F811
    ssh = host(name="worker-b", port=1, key_path=sshd["key_path"],
               known_hosts=str(tmp_path / "kh")).ssh_access()
    with pytest.raises(remote.RemoteError, match=r"could not copy .*oracle-pass from the Harbor "
                       r"host worker-b \(root@127\.0\.0\.1\): .*Connection refused"):
        remote.copy_here("worker-b", ssh, str(remote_job))
    # The program's command fails the same way, on its stderr, with nothing left in the cache.
    peer = host(name="worker-b", port=1, known_hosts=str(tmp_path / "kh"))
    copy = job_copy.cache_dir("worker-b", str(remote_job))
    proc = run(copy_here_command(peer, str(remote_job), copy, with_key=True) + "echo after",
               stdin=sshd["stored_key"])
    assert proc.returncode != 0 and "after" not in proc.stdout
    assert "job_copy: could not copy" in proc.stderr and "Connection refused" in proc.stderr
    assert not copy.exists() and [p.name for p in copy.parent.iterdir()] == []


def test_the_audit_reads_the_copy(sshd, remote_job, cache) -> None:  # noqa: F811
    copy = remote.copy_here("worker-b", access(sshd), str(remote_job))
    proc = subprocess.run([sys.executable, "-m", "audit", str(copy), "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [t["category"] for t in report["trials"]] == ["passed"]


def test_the_stack_output_is_read_and_checked() -> None:
    outputs = {keys.JOB_DIR: "/x/results/j", keys.HARBOR_HOST: "worker-b",
               keys.HARBOR_SSH: {"target": "bench@10.0.0.12", "port": 22, "options": ["-o", "a"]}}
    assert job_from_outputs(outputs, "s").harbor_ssh == outputs[keys.HARBOR_SSH]
    assert job_from_outputs({**outputs, keys.HARBOR_SSH: None}, "s").harbor_ssh is None
    with pytest.raises(StackError, match="harbor_ssh"):
        job_from_outputs({**outputs, keys.HARBOR_SSH: "bench@10.0.0.12"}, "s")
    with pytest.raises(job_copy.CopyError, match="target, port and options"):
        job_copy.ssh_argv({"target": "bench@10.0.0.12"}, "true")
