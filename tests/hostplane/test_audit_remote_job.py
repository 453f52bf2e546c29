"""The audit's copy of a job dir on a remote Harbor host (audit/read/remote.py), over the real
OpenSSH server on 127.0.0.1 with the options the seam gives the `harbor_ssh` stack output (found
by the two-host rehearsal: `python -m audit --stack` of a stack whose Harbor host is another
machine stopped at "not readable here"). The whole path, `--stack` through the real CLI on a
real remote host, is tests/e2e/test_two_hosts.py's."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from audit.read import remote
from audit.read.stack import StackError, job_from_outputs
from contracts import outputs as keys
from tests.conftest import ROOT, SAMPLE_JOBS
from tests.hostplane.test_ssh_seam import host, sshd  # noqa: F401

pytestmark = pytest.mark.real


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


def access(sshd, tmp_path) -> dict:  # noqa: F811
    peer = host(name="worker-b", host_key=sshd["host_key"], key_path=sshd["key_path"])
    return peer.ssh_access()


def test_a_finished_job_is_copied_once(sshd, tmp_path, remote_job, cache) -> None:  # noqa: F811
    ssh = access(sshd, tmp_path)
    copy = remote.copy_here("worker-b", ssh, str(remote_job))
    assert copy == cache / "worker-b" / "oracle-pass"
    assert sorted(p.name for p in copy.iterdir() if p.name != remote.FINAL_MARK) == sorted(
        p.name for p in remote_job.iterdir())
    assert (copy / "result.json").read_bytes() == (remote_job / "result.json").read_bytes()
    assert (copy / remote.FINAL_MARK).is_file()
    # Final: a later change on the host is not fetched again (a finished job does not change).
    (remote_job / "job.log").write_text("changed\n")
    assert remote.copy_here("worker-b", ssh, str(remote_job)) == copy
    assert (copy / "job.log").read_text() != "changed\n"


def test_a_running_job_is_copied_afresh(sshd, tmp_path, remote_job, cache) -> None:  # noqa: F811
    result = json.loads((remote_job / "result.json").read_text())
    result["finished_at"] = None
    (remote_job / "result.json").write_text(json.dumps(result))
    ssh = access(sshd, tmp_path)
    copy = remote.copy_here("worker-b", ssh, str(remote_job))
    assert not (copy / remote.FINAL_MARK).exists()
    (remote_job / "job.log").write_text("later\n")
    assert (remote.copy_here("worker-b", ssh, str(remote_job)) / "job.log").read_text() == "later\n"


def test_a_host_that_refuses_is_one_line(sshd, tmp_path, remote_job, cache) -> None:  # noqa: F811
    ssh = host(name="worker-b", port=1, key_path=sshd["key_path"],
               known_hosts=str(tmp_path / "kh")).ssh_access()
    with pytest.raises(remote.RemoteError, match=r"could not copy .*oracle-pass from the Harbor "
                       r"host worker-b \(root@127\.0\.0\.1\): .*Connection refused"):
        remote.copy_here("worker-b", ssh, str(remote_job))


def test_the_stack_output_is_read_and_checked() -> None:
    outputs = {keys.JOB_DIR: "/x/results/j", keys.HARBOR_HOST: "worker-b",
               keys.HARBOR_SSH: {"target": "bench@10.0.0.12", "port": 22, "options": ["-o", "a"]}}
    assert job_from_outputs(outputs, "s").harbor_ssh == outputs[keys.HARBOR_SSH]
    assert job_from_outputs({**outputs, keys.HARBOR_SSH: None}, "s").harbor_ssh is None
    with pytest.raises(StackError, match="harbor_ssh"):
        job_from_outputs({**outputs, keys.HARBOR_SSH: "bench@10.0.0.12"}, "s")


def test_the_audit_reads_the_copy(sshd, tmp_path, remote_job, cache) -> None:  # noqa: F811
    copy = remote.copy_here("worker-b", access(sshd, tmp_path), str(remote_job))
    proc = subprocess.run([sys.executable, "-m", "audit", str(copy), "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [t["category"] for t in report["trials"]] == ["passed"]
