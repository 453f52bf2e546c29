"""Every step on a remote host runs without pulumi-command putting its previous output into the
SSH session's environment (found by the two-host rehearsal: every update and delete of every
remote step warned "Unable to set 'PULUMI_COMMAND_STDOUT'" against a stock sshd, which passes
only what it `AcceptEnv`s; no step reads it, and a server that accepted it would hold a secret
step's output in its environment). The real CLI's output of an update and a destroy on two real
hosts, without the warning, is tests/e2e/test_two_hosts.py's."""

from __future__ import annotations

import pytest

from tests.graph.test_graph import REMOTE_STACKS, program


@pytest.mark.parametrize("stack", REMOTE_STACKS)
def test_no_remote_step_sends_its_previous_output_as_environment(stack):
    remote = program(stack).of_type("command:remote:Command")
    assert remote, "no remote step"
    for reg in remote:
        assert reg.inputs.get("addPreviousOutputInEnv") is False, reg.name
