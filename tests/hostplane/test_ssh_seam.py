"""The SSH seam (components/seam/ssh.py) against a real OpenSSH server on 127.0.0.1 (started by
tests/env/setup.sh): every path that runs the local ssh client (the status probe, the Docker
provider's ssh://, the accept-new host-key lookup) with the stack's host-key policy, and the key
as `pulumi config set --secret benchstack:sshPrivateKey -- < key` stores it (no final newline).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from components.seam.host import Host
from components.seam.probe import render
from components.seam.ssh import known_host_key_command, parse_outputs, ssh_command
from components.serving import RUN_TOKEN_LABEL
from tests.conftest import SSHD_DIR, SSHD_PORT

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def sshd() -> dict:
    pub = SSHD_DIR / "host_ed25519.pub"
    key = SSHD_DIR / "id_ed25519"
    if not (pub.is_file() and key.is_file()):
        pytest.fail(f"no test sshd under {SSHD_DIR}: run `make setup`")
    with_newline = key.read_text()
    return {
        "host_key": " ".join(pub.read_text().split()[:2]),
        "key_path": str(key),
        # What the CLI hands the program: the key without its final newline.
        "stored_key": with_newline.rstrip("\n"),
    }


def host(**changes) -> Host:
    fields = {"name": "peer", "address": "127.0.0.1", "port": SSHD_PORT, "user": "root",
              **changes}
    return Host(**fields)


def other_host_key(tmp_path: Path) -> str:
    key = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return " ".join(key.with_suffix(".pub").read_text().split()[:2])


def run(text: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", text], input=stdin or "", capture_output=True, text=True,
                          timeout=60, env={**os.environ, "SSH_AUTH_SOCK": ""})


def test_probe_with_a_pinned_key_and_the_stored_key_on_stdin(sshd) -> None:
    peer = host(host_key=sshd["host_key"])
    remote = render("container_status.sh",
                    {"CONTAINER": "benchstack-no-such-container", "LABEL": RUN_TOKEN_LABEL})
    proc = run(ssh_command(peer, remote, with_key=True), stdin=sshd["stored_key"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == {"state": "absent", "token": "start"}


def test_a_key_without_its_newline_is_what_openssh_refuses(sshd, tmp_path) -> None:
    """Why the seam adds the newline: the key as stored, written as is, does not load."""
    raw = tmp_path / "raw"
    raw.write_text(sshd["stored_key"])
    raw.chmod(0o600)
    proc = subprocess.run(["ssh-keygen", "-y", "-f", str(raw)], capture_output=True, text=True)
    assert proc.returncode != 0


def test_a_wrong_pinned_key_is_refused(sshd, tmp_path) -> None:
    peer = host(host_key=other_host_key(tmp_path))
    proc = run(ssh_command(peer, "echo reached", with_key=True), stdin=sshd["stored_key"])
    assert proc.returncode != 0 and "reached" not in proc.stdout
    assert "host key" in proc.stderr.lower(), proc.stderr


def known_host_key(peer: Host) -> str:
    """The accept-new lookup exactly as the seam's invoke runs it (host.known_host_key)."""
    res = run(known_host_key_command(peer))
    assert res.returncode == 0, res.stderr
    return parse_outputs(res.stdout)["host_key"]


def test_accept_new_records_the_first_key_then_requires_it(sshd, tmp_path) -> None:
    known_hosts = tmp_path / "ssh" / "known_hosts"
    peer = host(known_hosts=str(known_hosts), key_path=sshd["key_path"])
    # First contact: the key is recorded without logging in, and is the server's.
    assert known_host_key(peer) == sshd["host_key"]
    found = subprocess.run(["ssh-keygen", "-F", f"[127.0.0.1]:{SSHD_PORT}", "-f", str(known_hosts)],
                           capture_output=True, text=True)
    assert sshd["host_key"] in found.stdout, known_hosts.read_text()
    proc = run(ssh_command(peer, "echo reached", with_key=False))
    assert proc.returncode == 0 and "reached" in proc.stdout, proc.stderr
    # From then on only that key: a host presenting another one is refused on every path.
    known_hosts.write_text(f"[127.0.0.1]:{SSHD_PORT} {other_host_key(tmp_path)}\n")
    assert known_host_key(peer) != sshd["host_key"]
    proc = run(ssh_command(peer, "echo reached", with_key=False))
    assert proc.returncode != 0 and "reached" not in proc.stdout


def test_unreachable_host_yields_no_key(tmp_path) -> None:
    peer = host(port=1, known_hosts=str(tmp_path / "known_hosts"))
    assert known_host_key(peer) == ""


@pytest.mark.parametrize("policy", ["pinned", "accept-new"])
def test_docker_provider_options_reach_the_engine(sshd, tmp_path, policy) -> None:
    """pulumi-docker runs `ssh <ssh_opts> ... docker system dial-stdio`: the same options
    and key file reach the host's Docker engine with either host-key policy."""
    peer = host(key_path=sshd["key_path"], known_hosts=str(tmp_path / "known_hosts"),
                host_key=sshd["host_key"] if policy == "pinned" else None)
    proc = subprocess.run(
        ["ssh", "-n", *peer.ssh_options(), "-p", str(peer.port), peer.ssh_target,
         "docker", "version", "--format", "{{.Server.Version}}"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "SSH_AUTH_SOCK": ""},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()
