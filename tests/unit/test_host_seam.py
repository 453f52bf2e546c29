"""The host seam: how a script and its inputs reach a host, run for real with bash; the venvs
its steps build; the host-key lookup it runs where Pulumi runs."""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from components.seam import known_hosts
from components.seam.code import code_files, module_closure
from components.seam.host import Host
from components.seam.probe import probe_text, probes_dir, render
from components.seam.ssh import KNOWN_HOST_KEY_MARK, known_host_key_command, parse_outputs
from hostside.pinned_venv import pinned_venv
from hostside.step import HostError


@pytest.fixture
def probe_script(scratch_code: Path):
    """A throwaway probe in the host code's probes/ (the seam only runs probes from there), in
    a copy of it (tests/conftest.py `scratch_code`)."""
    path = scratch_code / "hostside" / "probes" / "_seam_probe.sh"
    path.write_text(
        "set -euo pipefail\n"
        'printf \'{"plain": "%s"}\\n\' "$PLAIN"\n'
        "tr '\\0' ' ' </proc/$$/cmdline >&2\n"
    )
    return path.name


def run(command: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", "-c", command], input=stdin, capture_output=True, text=True)


def test_probe_inputs_are_quoted_into_its_text(probe_script):
    env = {"PLAIN": "it's $HOME; `x`"}
    proc = run(render(probe_script, env))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == '{"plain": "it\'s $HOME; `x`"}'


def test_bad_input_name_is_refused(probe_script):
    with pytest.raises(ValueError, match="'BAD-NAME'"):
        render(probe_script, {"BAD-NAME": "x"})


def test_unknown_probe_is_refused():
    with pytest.raises(ValueError, match="nope.sh"):
        probe_text("nope.sh")


def test_includes_are_expanded_once_where_they_stand():
    """For the probes run before any code is on the host (an invoke at every preview)."""
    text = probe_text("harbor_status.sh")
    assert text.count("def status(") == 1
    assert not [ln for ln in text.splitlines() if ln.startswith("# benchstack:include")]


def test_an_include_of_a_missing_file_is_refused(scratch_code: Path):
    path = scratch_code / "hostside" / "probes" / "_seam_missing.sh"
    path.write_text("# benchstack:include hostside/no_such_module.py\n")
    with pytest.raises(ValueError, match="no_such_module.py"):
        probe_text("_seam_missing.sh")


def test_the_probes_run_nothing_shipped():
    """Probes reach the host whole, before any code is copied: none is shipped, and every probe
    of the directory is one a component runs."""
    assert not [f for f in code_files() if f.endswith(".sh")]
    assert {p.name for p in probes_dir().glob("*.sh")} == {
        "container_status.sh", "harbor_reruns.sh", "harbor_status.sh", "proxy_status.sh"}


def test_what_is_shipped_is_the_host_package_and_the_contracts_it_imports():
    shipped = code_files()
    assert "hostside/__main__.py" in shipped and "contracts/jobdir.py" in shipped
    assert "contracts/outputs.py" not in shipped  # the stack outputs are the audit's, not a host's
    assert not [f for f in shipped if f.startswith("components/") or f.startswith("audit/")]


def test_a_steps_digest_covers_the_programs_it_runs_in_its_venv():
    """readiness.py and s3_fetch.py are run, not imported (they need httpx and boto3): an edited
    one is still an update of exactly the steps that run it."""
    shared = ("hostside/__init__.py", "hostside/__main__.py", "hostside/step.py")
    assert module_closure("serving_probe") == tuple(sorted((
        *shared, "hostside/pinned_venv.py", "hostside/readiness.py", "hostside/serving_probe.py")))
    assert module_closure("model_stage") == tuple(sorted((
        *shared, "hostside/model_stage.py", "hostside/pinned_venv.py", "hostside/s3_fetch.py")))
    assert module_closure("model_check") == tuple(sorted((*shared, "hostside/model_check.py")))
    for module in ("serving_probe", "model_stage", "model_check", "serving_image"):
        assert set(module_closure(module)) <= set(code_files()), module


def test_a_steps_digest_covers_the_contracts_its_module_imports():
    """harbor_launch asks contracts/jobdir.py where the job's files are: an edited layout is an
    update of the steps that use it."""
    assert "contracts/jobdir.py" in module_closure("harbor_launch")
    assert "contracts/hostlayout.py" in module_closure("harbor_install")
    assert not [f for f in module_closure("waiting") if f.startswith("contracts/")]


def tiny_wheel(directory: Path, name: str = "benchstack_tiny", version: str = "1.0") -> Path:
    """A pure-Python wheel made here, so pip installs it with no index and no network."""
    files = {f"{name}/__init__.py": b"VALUE = 1\n",
             f"{name}-{version}.dist-info/METADATA":
                 f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{name}-{version}.dist-info/WHEEL":
                 b"Wheel-Version: 1.0\nGenerator: benchstack-tests\nRoot-Is-Purelib: true\n"
                 b"Tag: py3-none-any\n"}

    def digest(data: bytes) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record = "".join(f"{path},sha256={digest(data)},{len(data)}\n" for path, data in files.items())
    record += f"{name}-{version}.dist-info/RECORD,,\n"
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
        archive.writestr(f"{name}-{version}.dist-info/RECORD", record)
    return wheel


def test_pinned_venv_builds_once_reuses_and_leaves_nothing_on_failure(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    tiny_wheel(wheels)
    offline = ["--no-index", "--find-links", str(wheels)]
    venvs = tmp_path / "venvs"

    def pinned(name: str, module: str, requirement: str) -> str:
        return pinned_venv(venvs / name, module, requirement, pip_timeout_s=300,
                           pip_args=offline, step="probe")

    python = pinned("venv", "benchstack_tiny", "benchstack_tiny==1.0")
    assert python == f"{venvs}/venv/bin/python"
    assert "[probe] building the venv" in capfd.readouterr().err
    proc = subprocess.run([python, "-I", "-c", "import benchstack_tiny as t; print(t.VALUE)"],
                          capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "1"
    assert pinned("venv", "benchstack_tiny", "benchstack_tiny==1.0") == python
    assert "building" not in capfd.readouterr().err

    with pytest.raises(HostError, match=r"^pip could not install benchstack_tiny==9\.9: check"):
        pinned("bad", "benchstack_tiny", "benchstack_tiny==9.9")
    assert sorted(p.name for p in venvs.iterdir()) == ["venv"], "a half-built venv was left"


KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGJlbmNoc3RhY2stdW5pdC1ob3N0LWtleS0wMDAwMDA"
OTHER = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGJlbmNoc3RhY2stdW5pdC1vdGhlci1rZXktMDAwMDA"


def test_a_recorded_host_key_is_read_also_hashed(tmp_path: Path):
    path = tmp_path / "known_hosts"
    path.write_text(f"# a comment\n10.0.0.9 {OTHER}\n[10.0.0.7]:2222 {KEY} comment\n")
    assert known_hosts.recorded_key("[10.0.0.7]:2222", path) == KEY
    assert known_hosts.recorded_key("10.0.0.7", path) == ""
    subprocess.run(["ssh-keygen", "-H", "-f", str(path)], capture_output=True, check=True)
    assert "10.0.0.7" not in path.read_text()
    assert known_hosts.recorded_key("[10.0.0.7]:2222", path) == KEY
    # No contact when one is recorded.
    assert known_hosts.host_key("[10.0.0.7]:2222", str(path), ["false"]) == KEY


def test_without_a_record_the_first_contact_records_it(tmp_path: Path,
                                                        capfd: pytest.CaptureFixture[str]):
    path = tmp_path / "ssh" / "known_hosts"
    record = ["sh", "-c", f"echo '[10.0.0.7]:2222 {KEY}' >>{shlex.quote(str(path))}"]
    assert known_hosts.host_key("[10.0.0.7]:2222", str(path), record) == KEY
    assert path.read_text() == f"[10.0.0.7]:2222 {KEY}\n"
    assert known_hosts.host_key("[10.0.0.7]:2222", str(tmp_path / "none"), ["true"]) == ""
    assert capfd.readouterr().err.strip() == (
        "known_host_key: [10.0.0.7]:2222 presented no host key (unreachable, or not SSH)")


def test_the_lookup_command_contacts_with_the_seams_options_and_no_login(tmp_path: Path):
    """The seam builds the one ssh command (accept-new into the stack's known_hosts, no
    authentication method), and the program's own python runs the lookup."""
    host = Host(name="gpu", address="10.0.0.7", port=2222, user="bench",
                known_hosts=str(tmp_path / "known_hosts"), key_path="/keys/id")
    command = known_host_key_command(host)
    argv = shlex.split(command, comments=True)
    assert argv[:3] == [sys.executable, "-I", str(Path(known_hosts.__file__))]
    assert command.endswith(f"# {KNOWN_HOST_KEY_MARK}")
    spec = json.loads(argv[3])
    assert spec["name"] == "[10.0.0.7]:2222" and spec["known_hosts"] == host.known_hosts
    contact = spec["contact"]
    assert contact[:2] == ["ssh", "-n"] and contact[-3:] == ["-p", "2222", "10.0.0.7"]
    for option in ("StrictHostKeyChecking=accept-new", f"UserKnownHostsFile={host.known_hosts}",
                   "PreferredAuthentications=none", "BatchMode=yes"):
        assert option in contact, option
    # Run as the invoke runs it (bash), with a key already recorded: no contact at all.
    (tmp_path / "known_hosts").write_text(f"[10.0.0.7]:2222 {KEY}\n")
    proc = subprocess.run(["/bin/bash", "-c", command], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert parse_outputs(proc.stdout) == {"host_key": KEY}
