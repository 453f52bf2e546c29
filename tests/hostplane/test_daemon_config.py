"""DockerDaemonConfig's host step (hostside/daemon_config.py), for real, against a second dockerd
in its own namespace, with the inputs the component renders from the config.

Every fault test checks the one-line reason and that the host is as it was: the config file's
bytes, no new backup, the same engine process, the same networks.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from typing import Any

import pytest

from components.config import DockerConfig
from components.docker_daemon import step_inputs
from tests.hostplane.conftest import BASE_CONFIG, TINY_IMAGE, SecondEngine

pytestmark = pytest.mark.real

POOLS = [{"base": "172.18.0.0/15", "size": 24}]


def inputs_for(engine: SecondEngine, **over: Any) -> dict[str, Any]:
    """The step's inputs for this engine, from the config's defaults; `over` replaces some (the
    pools raw, to get past the config model's own checks)."""
    docker = DockerConfig(address_pools=POOLS, daemon_json=str(engine.config),
                          restart_command=engine.restart_cmd)
    return {**step_inputs(docker, docker_host=engine.socket), **over}


def snapshot(engine: SecondEngine) -> dict:
    return {
        "config": engine.config.read_bytes() if engine.config.exists() else None,
        "files": sorted(p.name for p in engine.dir.iterdir()),
        "pid": engine.pid(),
        "networks": sorted(engine.docker("network", "ls", "--format", "{{.Name}}").stdout.split()),
        "pools": engine.pools(),
    }


def in_pool(subnet: str) -> bool:
    net = ipaddress.ip_network(subnet)
    return net.prefixlen == 24 and net.subnet_of(ipaddress.ip_network("172.18.0.0/15"))


def test_merge_backup_restart_proof_then_noop_then_restore(test_engine: SecondEngine) -> None:
    test_engine.reset()
    pid_before = test_engine.pid()

    res = test_engine.step("create", inputs_for(test_engine))
    assert res.returncode == 0, res.stderr
    out = res.outputs
    assert out["changed"] is True and out["restarted"] is True and out["original"] == "file"
    record = json.loads((test_engine.dir / "daemon.json.benchstack.json").read_text())
    assert out["record"] == str(test_engine.dir / "daemon.json.benchstack.json")
    # docker0's address from before: the config's own bip keeps it there.
    assert record == {"original": "file", "backup": out["backup"],
                      "daemon_json": str(test_engine.config), "pools": POOLS,
                      "docker0": json.loads(BASE_CONFIG)["bip"]}
    assert test_engine.pid() != pid_before, "the engine was not restarted"
    # Every other key kept, the pools merged in, the engine really uses them.
    merged = json.loads(test_engine.config.read_text())
    assert merged == {**json.loads(BASE_CONFIG), "default-address-pools": POOLS}
    assert test_engine.pools() == [{"Base": "172.18.0.0/15", "Size": 24}]
    backup = test_engine.dir / out["backup"].rsplit("/", 1)[1]
    assert out["backup"].startswith(f"{test_engine.config}.backup-")
    assert out["backup"].endswith("Z") and backup.read_text() == BASE_CONFIG
    assert out["proof_networks"] == 64
    assert in_pool(out["first_subnet"]) and in_pool(out["last_subnet"])
    assert out["first_subnet"] != out["last_subnet"]
    nets = test_engine.docker("network", "ls", "--format", "{{.Name}}").stdout.split()
    assert not [n for n in nets if n.startswith("benchstack-pool-proof")], "proof networks left"

    # Same pools again: nothing written, no restart, no new backup; the same outputs.
    before = snapshot(test_engine)
    again = test_engine.step("create", inputs_for(test_engine))
    assert again.returncode == 0, again.stderr
    assert again.outputs["changed"] is False and again.outputs["restarted"] is False
    assert {k: again.outputs[k] for k in ("original", "backup", "record")} == {
        k: out[k] for k in ("original", "backup", "record")
    }
    assert snapshot(test_engine) == before

    # Destroy, with only the create's inputs (as Pulumi runs it from stored state), puts the
    # original back byte for byte and restarts; a second destroy is a no-op.
    delete_env = inputs_for(test_engine)
    gone = test_engine.step("delete", delete_env)
    assert gone.returncode == 0, gone.stderr
    assert gone.outputs == {
        "restored": True, "restarted": True, "daemon_json": str(test_engine.config),
        "original": "file",
    }
    assert test_engine.config.read_text() == BASE_CONFIG
    assert test_engine.pools() == []
    assert not (test_engine.dir / "daemon.json.benchstack.json").exists()
    before = snapshot(test_engine)
    twice = test_engine.step("delete", delete_env)
    assert twice.returncode == 0 and twice.outputs["restored"] is False
    assert snapshot(test_engine) == before


def test_absent_config_is_created_and_destroy_removes_it(test_engine: SecondEngine) -> None:
    test_engine.reset(None)
    res = test_engine.step("create", inputs_for(test_engine, proof_networks=4))
    assert res.returncode == 0, res.stderr
    assert res.outputs["original"] == "absent" and res.outputs["backup"] == ""
    written = json.loads(test_engine.config.read_text())
    # docker0 is pinned where it was: a restart with new pools would otherwise move it into
    # the first pool subnet, for good.
    gateway = test_engine.docker(
        "network", "inspect", "bridge", "--format", "{{range .IPAM.Config}}{{.Gateway}}{{end}}"
    ).stdout.strip()
    assert written == {"default-address-pools": POOLS, "bip": written["bip"]}
    bip = ipaddress.ip_interface(written["bip"])
    assert str(bip.ip) == gateway and not in_pool(str(bip.network))
    assert not list(test_engine.dir.glob("daemon.json.backup-*"))

    gone = test_engine.step("delete", inputs_for(test_engine))
    assert gone.returncode == 0, gone.stderr
    assert not test_engine.config.exists(), "destroy must restore 'no daemon.json'"
    assert test_engine.pools() == []


def test_fresh_engine_keeps_docker0_through_create_and_destroy(test_engine: SecondEngine) -> None:
    """On a fresh machine (no daemon.json, docker0 never pinned), up and destroy leave docker0
    at its first address: the CI failure where the pools' first /24 became docker0 for good."""
    test_engine.pristine()
    ipam = test_engine.docker("network", "inspect", "bridge", "--format", "{{json .IPAM.Config}}")
    assert "Gateway" not in ipam.stdout, f"not the fresh-engine case: {ipam.stdout}"
    before = test_engine.docker0()
    assert not in_pool(str(ipaddress.ip_interface(before).network))

    res = test_engine.step("create", inputs_for(test_engine, proof_networks=4))
    assert res.returncode == 0, res.stderr
    assert json.loads(test_engine.config.read_text())["bip"] == before
    assert test_engine.docker0() == before
    record = json.loads(test_engine.config.with_name("daemon.json.benchstack.json").read_text())
    assert record["docker0"] == before

    gone = test_engine.step("delete", inputs_for(test_engine))
    assert gone.returncode == 0, gone.stderr
    assert not test_engine.config.exists()
    assert test_engine.docker0() == before
    test_engine.helper("restart")
    test_engine.wait_ready()
    assert test_engine.docker0() == before, "docker0 moved at the next restart after destroy"


def test_destroy_moves_a_moved_docker0_back(test_engine: SecondEngine) -> None:
    """docker0 moved into a pool while benchstack's config was on (the engine restarted without
    the pin): destroy puts it back where the record says it was, and it stays there."""
    test_engine.pristine()
    before = test_engine.docker0()
    res = test_engine.step("create", inputs_for(test_engine, proof_networks=1))
    assert res.returncode == 0, res.stderr
    unpinned = json.loads(test_engine.config.read_text())
    del unpinned["bip"]
    test_engine.config.write_text(json.dumps(unpinned))
    test_engine.helper("restart")
    test_engine.wait_ready()
    moved = test_engine.docker0()
    assert moved != before and in_pool(str(ipaddress.ip_interface(moved).network))

    gone = test_engine.step("delete", inputs_for(test_engine))
    assert gone.returncode == 0, gone.stderr
    assert "pinning it back" in gone.stderr
    assert not test_engine.config.exists()
    assert test_engine.docker0() == before
    test_engine.helper("restart")
    test_engine.wait_ready()
    assert test_engine.docker0() == before


def test_changed_pools_keep_the_first_original(test_engine: SecondEngine) -> None:
    """Pools changed by a later run (a replace, create before delete): the old delete is a
    no-op, and destroy still restores the config from before benchstack."""
    test_engine.reset()
    first = test_engine.step("create", inputs_for(test_engine, proof_networks=2))
    assert first.returncode == 0, first.stderr
    other = [{"base": "172.20.0.0/16", "size": 24}]
    other_env = inputs_for(test_engine, address_pools=other, proof_networks=2)
    second = test_engine.step("create", other_env)
    assert second.returncode == 0, second.stderr
    assert second.outputs["changed"] is True and second.outputs["original"] == "file"
    assert second.outputs["backup"] == first.outputs["backup"]
    assert test_engine.pools() == [{"Base": "172.20.0.0/16", "Size": 24}]

    stale = test_engine.step("delete", inputs_for(test_engine))
    assert stale.returncode == 0 and stale.outputs["restored"] is False
    assert json.loads(test_engine.config.read_text())["default-address-pools"] == other

    gone = test_engine.step("delete", other_env)
    assert gone.returncode == 0 and gone.outputs["restored"] is True, gone.stderr
    assert test_engine.config.read_text() == BASE_CONFIG
    assert test_engine.pools() == []


def test_exhausted_pools_fail_the_proof_and_its_networks_are_removed(
    test_engine: SecondEngine,
) -> None:
    """The seed's pitfall: leftover networks use up the pools. The proof fails, names the cause,
    and removes every network it created; the leftover stays."""
    test_engine.reset()
    small = inputs_for(
        test_engine, address_pools=[{"base": "172.18.0.0/22", "size": 24}], proof_networks=2,
    )
    assert test_engine.step("create", small).returncode == 0
    test_engine.docker("network", "create", "bste-leftover")
    before = snapshot(test_engine)
    res = test_engine.step("create", {**small, "proof_networks": 4})
    assert res.returncode != 0
    assert res.reason.startswith("daemon_config: network 4 of 4 could not be created (")
    assert "the pools are exhausted or clash" in res.reason
    assert snapshot(test_engine) == before


def test_pool_overlapping_a_docker_network_fails_and_changes_nothing(
    test_engine: SecondEngine,
) -> None:
    test_engine.reset()
    test_engine.docker("network", "create", "--subnet", "172.19.7.0/24", "bste-squatter")
    before = snapshot(test_engine)
    res = test_engine.step("create", inputs_for(test_engine))
    assert res.returncode != 0
    assert res.reason.startswith("daemon_config: ")
    assert "Docker network 'bste-squatter' (172.19.7.0/24)" in res.reason
    assert "docker.address_pools" in res.reason
    assert snapshot(test_engine) == before


def test_pool_overlapping_a_host_route_fails_and_changes_nothing(test_engine: SecondEngine) -> None:
    test_engine.reset()
    # A VPN-like route, inside the engine's own namespace only.
    netns = ["ip", "netns", "exec", test_engine.ns]
    subprocess.run([*netns, "ip", "link", "add", "bste-vpn0", "type", "bridge"], check=True)
    try:
        subprocess.run(
            [*netns, "ip", "addr", "add", "10.77.3.1/24", "dev", "bste-vpn0"], check=True
        )
        subprocess.run([*netns, "ip", "link", "set", "bste-vpn0", "up"], check=True)
        before = snapshot(test_engine)
        pools = [{"base": "10.77.0.0/16", "size": 24}]
        res = test_engine.step("create", inputs_for(test_engine, address_pools=pools))
        assert res.returncode != 0
        assert "pool 10.77.0.0/16 overlaps host route '10.77.3.0/24 dev bste-vpn0" in res.reason
        assert snapshot(test_engine) == before
    finally:
        subprocess.run([*netns, "ip", "link", "del", "bste-vpn0"], check=False)


def test_running_containers_block_the_restart_unless_allowed(test_engine: SecondEngine) -> None:
    test_engine.reset()
    test_engine.docker(
        "run", "-d", "--name", "bste-busy", "--network", "none", "--stop-timeout", "1",
        TINY_IMAGE, "/bin/sleep", "600",
    )
    before = snapshot(test_engine)
    res = test_engine.step("create", inputs_for(test_engine))
    assert res.returncode != 0
    assert "containers are running (bste-busy)" in res.reason
    assert "set docker.allow_restart_with_running_containers" in res.reason
    assert snapshot(test_engine) == before

    allowed = test_engine.step(
        "create",
        inputs_for(test_engine, allow_restart_with_running_containers=True, proof_networks=2),
    )
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.outputs["restarted"] is True
    assert test_engine.pools() == [{"Base": "172.18.0.0/15", "Size": 24}]


def test_daemon_json_that_is_not_json_fails_and_changes_nothing(test_engine: SecondEngine) -> None:
    test_engine.reset()
    test_engine.config.write_text('{"bip": "10.213.0.1/24",\n')  # as a botched hand edit leaves it
    before = snapshot(test_engine)
    res = test_engine.step("create", inputs_for(test_engine))
    assert res.returncode != 0
    assert f"docker.daemon_json={test_engine.config} is not a JSON object" in res.reason
    assert snapshot(test_engine) == before


def test_failed_restart_puts_the_original_back(test_engine: SecondEngine) -> None:
    test_engine.reset()
    before = snapshot(test_engine)
    res = test_engine.step("create", inputs_for(test_engine, restart_command="false"))
    assert res.returncode != 0
    assert "original restored" in res.reason
    after = snapshot(test_engine)
    # The backup stays (an audit trail); everything else is as it was.
    assert [f for f in after["files"] if f not in before["files"]] == [
        f for f in after["files"] if f.startswith("daemon.json.backup-")
    ]
    assert {k: v for k, v in after.items() if k != "files"} == {
        k: v for k, v in before.items() if k != "files"
    }


@pytest.mark.parametrize(
    "pools, fragment",
    [
        ("not a list", "docker.address_pools must be a non-empty list"),
        ([{"base": "172.18.0.0/15", "size": 12}], "size 12 does not fit base 172.18.0.0/15"),
        ([{"base": "172.18.1.0/15", "size": 24}], "has host bits set: use 172.18.0.0/15"),
        ([{"base": "172.18.0.0/22", "size": 24}], "yields only 4 networks"),
    ],
)
def test_bad_pools_are_rejected_before_anything(
    test_engine: SecondEngine, pools: Any, fragment: str
) -> None:
    before = snapshot(test_engine)
    res = test_engine.step("create", inputs_for(test_engine, address_pools=pools))
    assert res.returncode != 0 and fragment in res.reason
    assert snapshot(test_engine) == before
