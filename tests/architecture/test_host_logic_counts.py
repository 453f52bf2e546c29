"""The counts of tests/architecture/host_logic.py hold their targets (bash small, no default
outside the config, one owner of Harbor's job layout, the seam the only local-or-ssh decider),
and each rule finds the violation it is for in a file written to have it."""

from __future__ import annotations

import json

import pytest

from tests.architecture import host_logic as counts
from tests.conftest import ROOT

CONFIG = 'class RouterConfig(Model):\n    worker_timeout_s: int = Field(default=60, gt=0)\n'


@pytest.fixture(scope="module")
def measured() -> counts.Counts:
    return counts.measure_root(ROOT)


def test_the_tree_holds_the_targets(measured: counts.Counts) -> None:
    summary = measured.summary()
    print(summary)
    assert summary["bash_scripts"] <= 6 and summary["bash_lines"] <= 100, summary
    assert measured.shell_defaults == [] and measured.python_defaults == [], (
        [str(f) for f in measured.shell_defaults + measured.python_defaults])
    for what in ("finished", "pid_check", "layout"):
        # Exactly one owner: jobdir.py, which the rule must find too (or it finds nothing).
        assert counts.Counts.owners(getattr(measured, what)) == [counts.JOBDIR], (
            what, [str(f) for f in getattr(measured, what) if f.path != counts.JOBDIR])
    assert measured.local_or_ssh == [], [str(f) for f in measured.local_or_ssh]


def test_the_script_prints_the_counts(capsys) -> None:
    assert counts.main(["--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["summary"]["local_or_ssh_deciders_outside_seam"] == 0
    assert counts.main([]) == 0
    assert "a. bash under hostside/probes/" in capsys.readouterr().out


def one(files: dict[str, str]) -> counts.Counts:
    return counts.measure({"components/config.py": CONFIG, **files})


def test_bash_lines_and_fallbacks() -> None:
    script = ('#!/usr/bin/env bash\n# a comment\nset -euo pipefail\n\n'
              'x="${TIMEOUT:-600}"\ny=${NAME:-}\n')
    found = one({"hostside/probes/a.sh": script})
    assert found.bash == {"scripts": 1, "lines": 6, "code_lines": 3}
    assert [f.text for f in found.shell_defaults] == ["${TIMEOUT:-600}"]
    assert [f.text for f in found.shell_guards] == ["${NAME:-}"]
    # Bash in a string of the host package counts as shipped bash.
    embedded = one({"hostside/m.py": 'LOOP = "sleep ${DELAY:-5}"\n'})
    assert [f.text for f in embedded.shell_defaults] == ["${DELAY:-5}"]


@pytest.mark.parametrize("source", [
    'import os\nX = os.environ.get("SCRATCH", "/var/tmp")\n',
    'import os\nX = os.getenv("SCRATCH", "/var/tmp")\n',
    'import os\nX = os.environ.get("SCRATCH") or "/var/tmp"\n',
    'def f(spec):\n    return spec.get("timeout_s", 600)\n',
    'def f(spec):\n    return spec.get("timeout_s") or 600\n',
    'from dataclasses import dataclass\n@dataclass(frozen=True)\nclass Inputs:\n'
    '    retries: int = 5\n',
    'from dataclasses import dataclass\nfrom .step import read\n@dataclass\nclass Args:\n'
    '    retries: int = 5\ndef create():\n    read(Args)\n',
    # A parameter named like a key the module reads, with a default of its own.
    'def run(spec):\n    wait(spec["interval_s"])\ndef wait(interval_s=2.0):\n    pass\n',
    # The config's own default, duplicated (600 and 600.0 alike).
    'def wait(*, worker_timeout_s=60.0):\n    pass\n',
    'import argparse\ndef f(spec):\n    spec["timeout_s"]\n    p = argparse.ArgumentParser()\n'
    '    p.add_argument("--timeout", default=600.0, dest="timeout_s")\n',
])
def test_each_default_in_the_host_package_is_found(source: str) -> None:
    assert len(one({"hostside/m.py": source}).python_defaults) == 1, source


@pytest.mark.parametrize("source", [
    'def f(row):\n    return row.get("Repository", "")\n',   # a tolerant read of outside data
    'def f(spec):\n    return spec.get("expect") or {}\n',
    'def f(path, name="Dockerfile"):\n    pass\n',            # no input, no config default
    'def f(spec):\n    return spec["timeout_s"]\n',
    '"""A docstring: os.environ.get("X", "y") and ${X:-y}."""\n',
    # The old names a delete stored by an older release reads (step.read): not an input.
    'from dataclasses import dataclass\nfrom typing import ClassVar\n@dataclass(frozen=True)\n'
    'class Inputs:\n    retries: int\n'
    '    RENAMED: ClassVar[dict[str, str]] = {"tries": "retries"}\n',
])
def test_what_is_not_a_default_is_left_alone(source: str) -> None:
    found = one({"hostside/m.py": source})
    assert found.python_defaults == [] and found.shell_defaults == [], source


@pytest.mark.parametrize("source", [
    "def done(result):\n    return result.finished_at is not None\n",
    'def done(job):\n    return job.get("finished_at") is not None\n',
    'def done(job):\n    if job["finished_at"]:\n        return True\n',
    "from contracts import jobdir\n"
    "def done(job):\n    return not job.get(jobdir.FINISHED_AT)\n",
    'CHECK = "grep -q \'\\"finished_at\\": null\' \\"$JOB/result.json\\""\n',
])
def test_a_second_owner_of_finished_is_found(source: str) -> None:
    found = one({"audit/x.py": source}).finished
    assert [f.path for f in found] == ["audit/x.py"], source


def test_asking_jobdir_is_not_deciding() -> None:
    source = ("from contracts import jobdir\n"
              "def done(job):\n    return jobdir.ended(job.finished_at)\n"
              "def row(job):\n    return {'finished_at': job.get(jobdir.FINISHED_AT)}\n")
    assert one({"components/progress.py": source}).finished == []
    sh = 'if grep -q finished_at "$JOBS_DIR/$JOB_NAME/result.json"; then exit 0; fi\n'
    assert len(one({"hostside/probes/s.sh": sh}).finished) == 1


@pytest.mark.parametrize("source", [
    "from pathlib import Path\ndef alive(pid, job_name):\n"
    "    return job_name in Path(f'/proc/{pid}/cmdline').read_text()\n",
    "from pathlib import Path\ndef alive(pid, job):\n"
    "    return job in (Path('/proc') / str(pid) / 'cmdline').read_text()\n",
    "import os\ndef harbor_alive(pid_of_job):\n    os.kill(pid_of_job, 0)\n",
])
def test_a_second_pid_check_is_found(source: str) -> None:
    assert len(one({"components/progress.py": source}).pid_check) == 1, source


def test_a_pid_check_of_another_program_is_not_the_jobs() -> None:
    source = "def alive(pid):\n    return open(f'/proc/{pid}/cmdline').read()\n"
    assert one({"hostside/proxy_status.py": source}).pid_check == []
    sh = 'pid=$(cat "$LOG_DIR/$JOB_NAME.pid")\nkill -0 "$pid" && echo running\n'
    assert len(one({"hostside/probes/s.sh": sh}).pid_check) == 1


@pytest.mark.parametrize("source", [
    'def jobs_dir(workspace):\n    return f"{workspace}/results"\n',
    'from pathlib import Path\ndef logs(ws):\n    return Path(ws) / "logs"\n',
    'def pid_file(log_dir, job_name):\n    return f"{log_dir}/{job_name}.pid"\n',
    'def job_log(log_dir, job_name):\n    return f"{log_dir}/{job_name}.log"\n',
    'def token(log_dir, job_name):\n    return f"{log_dir}/{job_name}.launch-token"\n',
    'def aside(jobs, job_name):\n    return f"{jobs}/.benchstack-interrupted/{job_name}"\n',
    'def project(trial):\n    return f"{trial.lower()}__env"\n',
])
def test_a_second_spelling_of_the_layout_is_found(source: str) -> None:
    assert len(one({"components/harbor_job.py": source}).layout) == 1, source
    sh = 'tail -n 5 "$LOG_DIR/$JOB_NAME.log"\n'
    assert len(one({"hostside/probes/s.sh": sh}).layout) == 1


def test_names_that_are_not_the_layout_are_left_alone() -> None:
    source = ('def f(step, name, job_name):\n'
              '    results = step.get("results") or []\n'          # a JSON key
              '    argv = ["docker", "logs", name]\n'               # an argv word
              '    why = "read exception.txt and trial.log"\n'      # prose
              '    return results, argv, why\n')
    assert one({"audit/x.py": source}).layout == []
    bridge = 'def pid(state_dir, name):\n    return f"{state_dir}/{name}.pid"\n'
    assert one({"hostside/proxy_status.py": bridge}).layout == []


@pytest.mark.parametrize("source", [
    "from components.seam.ssh import ssh_command\n"
    "def copy(host, text):\n"
    "    return text if host.is_local else ssh_command(host, text, with_key=False)\n",
    "def opts(host):\n    if host.is_local:\n        return None\n    return host.ssh_options()\n",
    "def key(cfg, ssh_private_key):\n    return None if cfg.is_local else ssh_private_key\n",
    'CONTACT = "ssh -n -o BatchMode=yes host true"\n',
])
def test_a_local_or_ssh_decision_outside_the_seam_is_found(source: str) -> None:
    assert one({"components/x.py": source}).local_or_ssh != [], source


def test_the_seam_and_checks_that_take_no_ssh_path_are_left_alone() -> None:
    seam = "def opts(host):\n    return None if host.is_local else host.ssh_options()\n"
    assert one({"components/seam/probe.py": seam}).local_or_ssh == []
    check = ('def check(host):\n    if not host.is_local and host.user is None:\n'
             '        raise ValueError("remote hosts need a user: see ssh-keyscan")\n')
    assert one({"components/config.py": CONFIG + check}).local_or_ssh == []
