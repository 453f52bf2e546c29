"""A host that ssh cannot reach, or whose key it refuses, is one line naming the host (found by the
two-host rehearsal: with worker-a's network cut, and with worker-a's host key changed between
two `up`s, preview and up died with a 50-line traceback around the status probe's whole command,
the host named only by its address inside ssh's own words).

Against the real OpenSSH server on 127.0.0.1 (`make setup`): the probe's command as the
seam renders it, run as the engine runs it, then read as the program reads it.
"""

from __future__ import annotations

import json

import pulumi
import pytest

from components.seam.probe import render
from components.seam.ssh import SSH_FAILED, reached, ssh_command, ssh_failure
from components.serving import RUN_TOKEN_LABEL
from tests.conftest import SSHD_PORT
from tests.hostplane.test_ssh_seam import host, other_host_key, run, sshd  # noqa: F401

pytestmark = [pytest.mark.real, pytest.mark.no_docker]

PROBE = render("container_status.sh",
               {"CONTAINER": "benchstack-no-such-container", "LABEL": RUN_TOKEN_LABEL})


def probe(peer, stored_key: str):
    proc = run(ssh_command(peer, PROBE, with_key=True, report_failure=True), stdin=stored_key)
    # ssh's own failure is not the command's: the program reads why, and names the host.
    assert proc.returncode == 0, proc.stderr
    return proc


def test_a_reached_host_answers_as_before(sshd) -> None:  # noqa: F811
    proc = probe(host(host_key=sshd["host_key"]), sshd["stored_key"])
    assert json.loads(reached(host(), proc.stdout).splitlines()[-1]) == {
        "state": "absent", "token": "start"}


def test_a_changed_host_key_is_refused_naming_the_host(sshd, tmp_path) -> None:  # noqa: F811
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{SSHD_PORT} {other_host_key(tmp_path)}\n")
    peer = host(name="worker-a", known_hosts=str(known_hosts))
    proc = probe(peer, sshd["stored_key"])
    assert proc.stdout.splitlines()[-1].startswith(SSH_FAILED)
    assert '"state"' not in proc.stdout  # nothing ran there
    with pytest.raises(pulumi.RunError) as refused:
        reached(peer, proc.stdout)
    message = str(refused.value)
    assert message.startswith(f"host worker-a (root@127.0.0.1 port {SSHD_PORT}): refused: its "
                              "SSH host key is not the one accepted at the first contact")
    assert f"ssh-keygen -R [127.0.0.1]:{SSHD_PORT} -f {known_hosts}" in message
    assert "\n" not in message


def test_a_wrong_pinned_key_is_refused_naming_the_host(sshd, tmp_path) -> None:  # noqa: F811
    peer = host(name="worker-b", host_key=other_host_key(tmp_path))
    with pytest.raises(pulumi.RunError, match=r"^host worker-b \(root@127\.0\.0\.1 port \d+\): "
                       r"refused: its SSH host key is not the one pinned"):
        reached(peer, probe(peer, sshd["stored_key"]).stdout)


def test_an_unreachable_host_is_named(sshd, tmp_path) -> None:  # noqa: F811
    peer = host(name="worker-a", port=1, known_hosts=str(tmp_path / "known_hosts"))
    with pytest.raises(pulumi.RunError, match=r"^host worker-a \(root@127\.0\.0\.1 port 1\): not "
                       r"reachable over SSH \(ssh: connect to host 127\.0\.0\.1 port 1: "
                       r"Connection refused\)$"):
        reached(peer, probe(peer, sshd["stored_key"]).stdout)


def test_a_refused_login_names_the_key(sshd, tmp_path) -> None:  # noqa: F811
    peer = host(name="worker-b", user="nobody", host_key=sshd["host_key"])
    with pytest.raises(pulumi.RunError, match=r"the SSH login was refused .*Permission denied.*"
                       r"check benchstack:sshPrivateKey"):
        reached(peer, probe(peer, sshd["stored_key"]).stdout)


def test_the_reasons_read_from_ssh_own_words() -> None:
    peer = host(name="worker-a", address="10.0.0.11", port=22, user="bench")
    assert ssh_failure(peer, ["ssh: connect to host 10.0.0.11 port 22: No route to host"]) == (
        "host worker-a (bench@10.0.0.11 port 22): not reachable over SSH (ssh: connect to host "
        "10.0.0.11 port 22: No route to host)")
    assert "refused: its SSH host key" in ssh_failure(
        peer, ["@@@@", "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @",
               "Host key verification failed."])
