"""hostside/daemon_json.py with no peer: the pure logic (pools, overlaps, merge, which
original, the record, backup names, what the delete does) and its file operations in a temporary
directory; and hostside/daemon_config.py's checks that come before any engine is asked, run
through the seam, and its way to root.

The engine side (restarts, docker0, the proof networks) is proven by
tests/hostplane/test_daemon_config.py against a real second dockerd.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.config import DockerConfig
from components.docker_daemon import step_inputs
from components.seam.code import PROJECT_ROOT
from components.seam.step import render_step
from hostside import daemon_json as dj
from hostside.step import HostError

POOLS = [{"base": "172.18.0.0/15", "size": 24}]
POOLS_TEXT = json.dumps(POOLS)
BASE = '{\n  "bip": "10.213.0.1/24",\n  "log-level": "info"\n}\n'


# --- addresses and pools ----------------------------------------------------------------------


def test_ipv4_networks_only() -> None:
    assert str(dj.ipv4_network("10.1.2.3/24")) == "10.1.2.0/24"
    assert str(dj.ipv4_network("10.1.2.3")) == "10.1.2.3/32"
    assert dj.ipv4_network("10.1.2.3", bare=False) is None
    for bad in ("default", "fe80::/64", "256.0.0.0/8", "10.0.0.0/33", "10.0.0/8", "10.0.0.0/8\n",
                "١٠.0.0.0/8", "10.0.0.0/٨", "10.0.0.0/255.0.0.0", "010.0.0.0/8", ""):
        assert dj.ipv4_network(bad) is None, bad
    network = dj.ipv4_network("172.18.0.0/15")
    assert network is not None
    assert (str(network[0]), str(network[-1])) == ("172.18.0.0", "172.19.255.255")


def test_good_pools_come_back_normalized() -> None:
    text = '[{"size": 24, "base": "172.18.0.0/15"}, {"base": "10.99.0.0/16", "size": 26}]'
    assert dj.parse_pools(json.loads(text), 64) == [
        {"base": "172.18.0.0/15", "size": 24}, {"base": "10.99.0.0/16", "size": 26},
    ]


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('"not a list"', "docker.address_pools must be a non-empty list"),
        ("[]", "docker.address_pools must be a non-empty list"),
        ('{"base": "172.18.0.0/15", "size": 24}', "must be a non-empty list"),
        ('[{"base": "172.18.0.0/15"}]', "must be a non-empty list"),
        ('[{"base": "172.18.0.0/15", "size": 24, "x": 1}]', "must be a non-empty list"),
        ('[{"base": "172.18.0.0/15", "size": "24"}]', "must be a non-empty list"),
        ('[{"base": "172.18.0.0/15", "size": true}]', "must be a non-empty list"),
        ('[{"base": "fd00::/48", "size": 64}]', "base 'fd00::/48' is not an IPv4 CIDR"),
        ('[{"base": "172.18.0.0", "size": 24}]', "base '172.18.0.0' is not an IPv4 CIDR"),
        ('[{"base": "172.18.0.0/15", "size": 12}]', "size 12 does not fit base 172.18.0.0/15: "
                                                    "use a size between /15 and /30"),
        ('[{"base": "172.18.0.0/15", "size": 31}]', "size 31 does not fit"),
        ('[{"base": "172.18.1.0/15", "size": 24}]', "has host bits set: use 172.18.0.0/15"),
        ('[{"base": "172.18.0.0/22", "size": 24}]',
         "yields only 4 networks, fewer than docker.proof_networks=64"),
    ],
)
def test_bad_pools_name_what_to_change(text: str, fragment: str) -> None:
    with pytest.raises(HostError) as err:
        dj.parse_pools(json.loads(text), 64)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_capacity_adds_up_over_pools() -> None:
    two = [{"base": "172.18.0.0/22", "size": 24}, {"base": "172.20.0.0/23", "size": 24}]
    assert len(dj.parse_pools(two, 6)) == 2
    with pytest.raises(HostError, match="yields only 6 networks"):
        dj.parse_pools(two, 7)


def test_pools_read_from_files_and_the_engine() -> None:
    assert dj.pools_in({}) == [] and dj.pools_in({"default-address-pools": None}) == []
    assert dj.pools_in({"default-address-pools": [{"size": 24, "base": "a", "x": 1}]}) == [
        {"base": "a", "size": 24}
    ]
    # Not a list of objects: kept as it is, so it equals no real pools.
    assert dj.pools_in({"default-address-pools": "172.18.0.0/15"}) != POOLS
    assert dj.engine_pools("null") == [] and dj.engine_pools("") == []
    assert dj.engine_pools('[{"Base":"172.18.0.0/15","Size":24}]') == POOLS
    assert dj.lenient_pools([{"base": "x"}]) == [{"base": "x", "size": None}]
    with pytest.raises(HostError, match="is not a list of"):
        dj.lenient_pools("x")


def test_in_pools_wants_a_size_subnet_inside_a_base() -> None:
    assert dj.in_pools("172.18.0.0/24", POOLS) and dj.in_pools("172.19.255.0/24", POOLS)
    assert not dj.in_pools("172.20.0.0/24", POOLS)
    assert not dj.in_pools("172.18.0.0/25", POOLS)
    assert not dj.in_pools("172.18.0.0", POOLS) and not dj.in_pools("", POOLS)


# --- overlaps ---------------------------------------------------------------------------------

ROUTES = """\
default via 10.0.0.1 dev eth0
10.0.0.0/24 dev eth0 proto kernel scope link src 10.0.0.5
unreachable 172.19.4.0/24 metric 100
local 172.18.0.1 dev lo table local proto kernel scope host src 172.18.0.1
broadcast 172.18.255.255 dev lo table local proto kernel scope link
fe80::/64 dev eth0
"""


def test_conflicts_with_routes_skip_default_and_local() -> None:
    found = dj.conflicts(POOLS, ROUTES, [])
    assert found == [
        "pool 172.18.0.0/15 overlaps host route 'unreachable 172.19.4.0/24 metric 100'"
    ]
    assert dj.conflicts([{"base": "10.0.0.0/8", "size": 24}], ROUTES, []) == [
        "pool 10.0.0.0/8 overlaps host route "
        "'10.0.0.0/24 dev eth0 proto kernel scope link src 10.0.0.5'"
    ]
    assert dj.conflicts([{"base": "192.168.0.0/16", "size": 24}], ROUTES, []) == []


def test_conflicts_with_docker_networks() -> None:
    networks = [
        {"Name": "bridge", "IPAM": {"Config": [{"Subnet": "10.213.0.0/24"}]}},
        {"Name": "squatter", "IPAM": {"Config": [{"Subnet": "172.19.7.0/24"},
                                                 {"Subnet": "fd00:1::/64"}]}},
        {"Name": "host", "IPAM": {"Config": []}},
        {"Name": "none", "IPAM": {"Config": None}},
        {"Name": "odd"},
    ]
    assert dj.conflicts(POOLS, "", networks) == [
        "pool 172.18.0.0/15 overlaps Docker network 'squatter' (172.19.7.0/24)"
    ]


# --- merge, plan, record ----------------------------------------------------------------------


def test_merge_keeps_every_key_and_pins_docker0() -> None:
    current = {"log-level": "info", "default-address-pools": [], "labels": ["a"]}
    merged = dj.merge(current, POOLS, "172.17.0.1/16")
    assert list(merged) == ["log-level", "default-address-pools", "labels", "bip"]
    assert merged == {**current, "default-address-pools": POOLS, "bip": "172.17.0.1/16"}
    assert current["default-address-pools"] == [], "the input was changed"
    assert dj.merge({"bip": "10.1.0.1/24"}, POOLS, "172.17.0.1/16")["bip"] == "10.1.0.1/24"
    assert "bip" not in dj.merge({"bridge": "br0"}, POOLS, "172.17.0.1/16")
    assert "bip" not in dj.merge({}, POOLS, "")


def test_render_is_jq_shaped() -> None:
    assert dj.render({"a": [1], "é": "ü"}) == '{\n  "a": [\n    1\n  ],\n  "é": "ü"\n}\n'


def test_plan_of_a_first_run() -> None:
    p = dj.plan({"log-level": "info"}, None, POOLS, [], "172.17.0.1/16")
    assert (p.need_write, p.need_restart, p.original, p.backup, p.from_record) == (
        True, True, "file", "", False)
    assert p.docker0 == "172.17.0.1/16" and p.merged["default-address-pools"] == POOLS
    absent = dj.plan(None, None, POOLS, [], "172.17.0.1/16")
    assert absent.original == "absent" and absent.merged == {
        "default-address-pools": POOLS, "bip": "172.17.0.1/16"}


def test_plan_of_a_rerun_keeps_the_record_and_does_nothing() -> None:
    record = dj.Record(original="file", backup="/b/daemon.json.backup-1Z", pools=POOLS,
                       docker0="10.213.0.1/24")
    current = {"default-address-pools": POOLS, "bip": "10.213.0.1/24"}
    p = dj.plan(current, record, POOLS, POOLS, "10.213.0.1/24")
    assert (p.need_write, p.need_restart) == (False, False)
    assert (p.original, p.backup, p.from_record) == ("file", "/b/daemon.json.backup-1Z", True)
    # The engine not on the file's pools yet: a restart, still no write.
    assert dj.plan(current, record, POOLS, [], "10.213.0.1/24").need_restart is True


def test_plan_of_pools_that_predate_benchstack() -> None:
    p = dj.plan({"default-address-pools": POOLS}, None, POOLS, POOLS, "")
    assert (p.need_write, p.need_restart, p.original, p.from_record) == (
        False, False, "unchanged", False)


def test_plan_of_changed_pools_keeps_the_first_original() -> None:
    other = [{"base": "172.20.0.0/16", "size": 24}]
    record = dj.Record(original="absent", backup="", pools=POOLS, docker0="172.17.0.1/16")
    current = {"default-address-pools": POOLS, "bip": "172.17.0.1/16"}
    p = dj.plan(current, record, other, POOLS, "172.17.0.1/16")
    assert (p.need_write, p.original, p.from_record, p.docker0) == (
        True, "absent", True, "172.17.0.1/16")
    # docker0 moved since: the record keeps where it was before benchstack.
    moved = dj.plan(current, record, other, POOLS, "172.18.0.1/24")
    assert moved.docker0 == "172.17.0.1/16"


def test_plan_ignores_a_record_of_other_pools() -> None:
    """Someone changed daemon.json since: the file as it is now is the original."""
    record = dj.Record(original="absent", backup="", pools=POOLS, docker0="x")
    p = dj.plan({"log-level": "debug"}, record, POOLS, [], "172.17.0.1/16")
    assert (p.original, p.from_record, p.docker0) == ("file", False, "172.17.0.1/16")


def test_parse_record() -> None:
    rec = dj.parse_record(json.dumps({"original": "file", "backup": "/b", "pools": POOLS}))
    assert rec == dj.Record(original="file", backup="/b", pools=POOLS, docker0="")
    for bad in ("{", "[]", '{"original": "unchanged"}', '{"backup": "/b"}'):
        assert dj.parse_record(bad) is None, bad


def test_backup_names_are_utc_and_never_reused() -> None:
    now = 1_700_000_000.0  # 2023-11-14T22:13:20Z
    taken: set[str] = set()
    names = []
    for _ in range(3):
        name = dj.backup_path("/etc/docker/daemon.json", "/var/backups/", now, taken.__contains__)
        taken.add(name)
        names.append(name)
    base = "/var/backups/daemon.json.backup-20231114T221320Z"
    assert names == [base, base + ".1", base + ".2"]


# --- the delete's decisions -------------------------------------------------------------------


def unplan(current: str | None, record: dict | None = None) -> dj.Undo:
    return dj.unplan(POOLS, record, "/d/daemon.json", current)


def test_unplan_restores_from_the_record() -> None:
    record = {"original": "file", "backup": "/d/b", "pools": POOLS, "docker0": "10.2.0.1/24"}
    undo = unplan(json.dumps({"default-address-pools": POOLS}), record)
    assert (undo.action, undo.original, undo.backup, undo.docker0) == (
        "restore", "file", "/d/b", "10.2.0.1/24")


def test_unplan_no_ops() -> None:
    holds = json.dumps({"default-address-pools": POOLS})
    other = {"original": "file", "backup": "/d/b", "pools": [{"base": "172.20.0.0/16",
                                                              "size": 24}]}
    replaced = unplan(holds, other)
    assert (replaced.action, replaced.original) == ("none", "file")
    assert "a later run replaced these" in replaced.why
    assert unplan(holds).why == "the pools predate benchstack: nothing to undo"
    gone = unplan(None, {"original": "absent", "pools": POOLS})
    assert (gone.action, gone.why) == ("none", "/d/daemon.json is gone: nothing to undo")
    changed = unplan('{"log-level": "info"}', {"original": "absent", "pools": POOLS})
    assert changed.action == "none" and "does not hold the pools" in changed.why


def test_unplan_failures() -> None:
    holds = json.dumps({"default-address-pools": POOLS})
    with pytest.raises(HostError, match="the record's original 'bogus' must be file or absent"):
        unplan(holds, {"original": "bogus", "pools": POOLS})
    with pytest.raises(HostError, match=r"is not a JSON object any more: fix it by hand "
                                        r"\(backup: /d/b\)"):
        unplan("{", {"original": "file", "backup": "/d/b", "pools": POOLS})
    with pytest.raises(HostError, match="the record /r is not valid JSON"):
        dj.parse_delete_record("{", "/r", "/d")
    with pytest.raises(HostError, match="the record /r is not valid JSON"):
        dj.parse_delete_record('{"pools": 3}', "/r", "/d")


def test_without_pools() -> None:
    current = {"default-address-pools": POOLS, "bip": "10.0.0.1/24", "log-level": "info"}
    assert dj.without_pools(current, "file") == {"bip": "10.0.0.1/24", "log-level": "info"}
    assert dj.without_pools(current, "absent") == {"log-level": "info"}
    assert dj.without_pools({"default-address-pools": POOLS, "bip": "x"}, "absent") is None
    assert dj.without_pools({"default-address-pools": POOLS}, "file") == {}


# --- the file operations ----------------------------------------------------------------------


def create_on_files(config: Path, pools: list[dict] = POOLS, docker0: str = "10.213.0.1/24",
                    engine: list | None = None, dockerd: str | None = None) -> dict:
    """What daemon_config.create does to the files (the engine's side faked), with its
    functions."""
    path = str(config)
    current = dj.read_config(path)
    p = dj.plan(current, dj.read_record(dj.record_path(path)), pools, engine or [], docker0)
    backup, record = p.backup, dj.record_path(path) if p.from_record else ""
    if p.need_write:
        run_backup = dj.install(dj.Change(path), p.merged, pools=pools, dockerd=dockerd,
                                file_existed=current is not None)
        backup = p.backup_to_restore(run_backup)
        record = dj.write_record(path, p, backup, pools)
    return {"changed": p.need_write, "restarted": p.need_restart, "original": p.original,
            "backup": backup, "record": record}


def delete_on_files(config: Path, pools: list[dict] = POOLS) -> dj.Undo:
    """What daemon_config.delete does to the files."""
    record_file = dj.record_path(str(config))
    record = (dj.parse_delete_record(Path(record_file).read_text(), record_file, str(config.parent))
              if os.path.isfile(record_file) else None)
    undo = dj.unplan(pools, record, str(config), dj.read_text(str(config)))
    if undo.action == "restore":
        dj.undo(str(config), undo.original, undo.backup)
    return undo


def backups(root: Path) -> list[Path]:
    return sorted(root.glob("daemon.json.backup-*"))


def test_create_then_rerun_then_delete_on_files(tmp_path: Path) -> None:
    config = tmp_path / "daemon.json"
    config.write_text(BASE)
    config.chmod(0o600)
    out = create_on_files(config)
    record = tmp_path / "daemon.json.benchstack.json"
    [backup] = backups(tmp_path)
    assert out == {"changed": True, "restarted": True, "original": "file", "backup": str(backup),
                   "record": str(record)}
    assert backup.read_text() == BASE and backup.stat().st_mode & 0o777 == 0o600
    assert json.loads(config.read_text()) == {**json.loads(BASE), "default-address-pools": POOLS}
    assert json.loads(record.read_text()) == {
        "original": "file", "backup": str(backup), "daemon_json": str(config), "pools": POOLS,
        "docker0": "10.213.0.1/24",
    }
    assert [p for p in tmp_path.glob("daemon.json.benchstack.*") if p != record] == [], \
        "temporary files left"

    # The same pools again: nothing written, the same original; no new backup.
    merged = config.read_bytes()
    again = create_on_files(config, engine=POOLS)
    assert (again["changed"], again["restarted"]) == (False, False)
    assert {k: again[k] for k in ("original", "backup", "record")} == {
        k: out[k] for k in ("original", "backup", "record")}
    assert config.read_bytes() == merged and backups(tmp_path) == [backup]

    # Delete: the backup put back byte for byte, its mode too; the record is spent.
    undo = delete_on_files(config)
    assert (undo.action, undo.docker0) == ("restore", "10.213.0.1/24")
    assert config.read_text() == BASE and config.stat().st_mode & 0o777 == 0o600
    assert not record.exists()
    assert delete_on_files(config).action == "none"


def test_changed_pools_keep_the_first_backup(tmp_path: Path) -> None:
    config = tmp_path / "daemon.json"
    config.write_text(BASE)
    first = create_on_files(config)
    other = [{"base": "172.20.0.0/16", "size": 24}]
    second = create_on_files(config, pools=other)
    assert second["changed"] is True and second["backup"] == first["backup"]
    assert len(backups(tmp_path)) == 2, "each write is backed up"
    # The old resource's delete is a no-op; the new one restores the first original.
    assert delete_on_files(config).action == "none"
    assert delete_on_files(config, other).action == "restore"
    assert config.read_text() == BASE


def test_absent_config_round_trip(tmp_path: Path) -> None:
    config = tmp_path / "daemon.json"
    out = create_on_files(config, docker0="172.17.0.1/16")
    assert (out["original"], out["backup"]) == ("absent", "")
    assert json.loads(config.read_text()) == {"default-address-pools": POOLS,
                                              "bip": "172.17.0.1/16"}
    assert config.stat().st_mode & 0o777 == 0o644 and backups(tmp_path) == []
    undo = delete_on_files(config)
    assert (undo.action, undo.docker0) == ("restore", "172.17.0.1/16") and not config.exists()


def test_delete_with_the_backup_gone_drops_only_our_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "daemon.json"
    config.write_text(BASE)
    out = create_on_files(config)
    Path(out["backup"]).unlink()
    assert delete_on_files(config).action == "restore"
    assert (f"backup '{out['backup']}' is gone: removing only default-address-pools"
            in capsys.readouterr().err)
    # The pin was the config's own bip: kept, as everything but the pools.
    assert json.loads(config.read_text()) == json.loads(BASE)


def test_failed_validation_changes_nothing(tmp_path: Path) -> None:
    config = tmp_path / "daemon.json"
    config.write_text(BASE)
    dockerd = tmp_path / "fake-dockerd"
    dockerd.write_text('#!/bin/sh\n[ "$1" = --help ] && { echo "  --validate  check"; exit 0; }\n'
                       'echo "unable to configure the Docker daemon: bad key" >&2; exit 1\n')
    dockerd.chmod(0o755)
    before = sorted(p.name for p in tmp_path.iterdir())
    change = dj.Change(str(config))
    with pytest.raises(HostError) as err:
        dj.install(change, dj.merge({}, POOLS, ""), pools=POOLS, dockerd=str(dockerd),
                   file_existed=True)
    assert str(err.value) == ("dockerd --validate rejects the merged config (unable to configure "
                              f"the Docker daemon: bad key): fix docker.daemon_json={config}")
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "a backup or temp file left"
    assert config.read_text() == BASE
    # Nothing was installed: nothing to put back (and so no restart).
    assert change.put_back() is False and config.read_text() == BASE


def test_an_engine_without_validate_gets_the_json_check(tmp_path: Path) -> None:
    dockerd = tmp_path / "old-dockerd"
    dockerd.write_text('#!/bin/sh\necho "Usage: dockerd [OPTIONS]"\n')
    dockerd.chmod(0o755)
    config = tmp_path / "daemon.json"
    create_on_files(config, dockerd=str(dockerd))
    assert dj.pools_in(json.loads(config.read_text())) == POOLS


def test_put_back_after_install_restores_byte_for_byte(tmp_path: Path) -> None:
    config = tmp_path / "daemon.json"
    config.write_bytes(b'{"log-level":"info"}')  # no newline, compact: bytes, not JSON, count
    change = dj.Change(str(config))
    dj.install(change, dj.merge({"log-level": "info"}, POOLS, ""), pools=POOLS, dockerd=None,
               file_existed=True)
    assert config.read_bytes() != b'{"log-level":"info"}'
    assert change.put_back() is True
    assert config.read_bytes() == b'{"log-level":"info"}'
    assert change.put_back() is False
    assert not Path(dj.record_path(str(config))).exists(), "a failed run writes no record"


def test_put_back_of_an_absent_original_removes_the_file(tmp_path: Path) -> None:
    config = tmp_path / "daemon.json"
    change = dj.Change(str(config))
    dj.install(change, dj.merge({}, POOLS, ""), pools=POOLS, dockerd=None, file_existed=False)
    assert config.exists()
    assert change.put_back() is True and not config.exists()


def test_read_config_rejects_a_config_that_is_not_json(tmp_path: Path) -> None:
    config = tmp_path / "daemon.json"
    config.write_text('{"bip": "10.213.0.1/24",\n')
    with pytest.raises(HostError) as err:
        dj.read_config(str(config))
    assert str(err.value).startswith(f"docker.daemon_json={config} is not a JSON object (")
    assert str(err.value).endswith("fix or move that file, then re-run")
    config.write_text("[1]")
    with pytest.raises(HostError, match=r"is not a JSON object \(not an object\)"):
        dj.read_config(str(config))
    assert dj.read_config(str(tmp_path / "none.json")) is None


def test_pin_then_put_back(tmp_path: Path) -> None:
    config = tmp_path / "daemon.json"
    config.write_text('{"log-level": "info"}')
    change = dj.Change(str(config))
    dj.pin(change, "172.17.0.1/16", str(tmp_path))
    assert json.loads(config.read_text()) == {"log-level": "info", "bip": "172.17.0.1/16"}
    assert change.put_back() is True
    assert config.read_text() == '{"log-level": "info"}'
    # No file before the pin: none after it.
    config.unlink()
    dj.pin(change, "172.17.0.1/16", str(tmp_path))
    assert json.loads(config.read_text()) == {"bip": "172.17.0.1/16"}
    assert change.put_back() is True and not config.exists()


def test_file_errors_are_one_line_reasons(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "daemon.json"
    with pytest.raises(HostError) as err:
        dj.install(dj.Change(str(missing)), {}, pools=POOLS, dockerd=None, file_existed=False)
    assert str(err.value) == (f"cannot write next to docker.daemon_json={missing}: run as root "
                              "or allow sudo -n")


# --- daemon_config through the seam, before any engine ----------------------------------------


def inputs(**over: object) -> dict:
    docker = DockerConfig(address_pools=POOLS, daemon_json="/nonexistent/daemon.json")
    return {**step_inputs(docker), **over}


def run_step(verb: str, values: dict, prefix: tuple[str, ...] = (),
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    command = render_step("daemon_config", verb, values, str(PROJECT_ROOT))
    return subprocess.run([*prefix, "/bin/sh", "-c", command], capture_output=True, text=True,
                          timeout=60, env=env, stdin=subprocess.DEVNULL)


def test_bad_pools_are_refused_in_one_line_before_the_engine() -> None:
    pools = [{"base": "172.18.1.0/15", "size": 24}]
    proc = run_step("create", inputs(address_pools=pools, docker_host="unix:///nonexistent"))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == ("daemon_config: docker.address_pools base 172.18.1.0/15 has "
                                   "host bits set: use 172.18.0.0/15")


@pytest.fixture
def nobody() -> Iterator[tuple[Path, list[str]]]:
    """A directory any user can write, and the prefix that runs a command there as nobody with a
    fake `sudo` first on PATH (it records its arguments; `SUDO_OK=0`: it refuses)."""
    work = Path(tempfile.mkdtemp(prefix="bste-sudo-", dir="/tmp"))
    work.chmod(0o777)
    fake = work / "bin"
    fake.mkdir()
    (fake / "sudo").write_text(
        '#!/bin/sh\n[ "$SUDO_OK" = 1 ] || { echo "sudo: a password is required" >&2; exit 1; }\n'
        '[ "$2" = true ] && exit 0\nprintf "%s\\n" "$@" >"$SUDO_ARGS"\n')
    (fake / "sudo").chmod(0o755)
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    yield work, prefix
    subprocess.run(["rm", "-rf", str(work)], check=False)


def test_not_root_runs_the_step_again_under_sudo(nobody: tuple[Path, list[str]]) -> None:
    work, prefix = nobody
    values = inputs()
    env = {"PATH": f"{work}/bin:/usr/bin:/bin", "SUDO_OK": "1", "SUDO_ARGS": f"{work}/args"}
    proc = run_step("delete", values, prefix, env)
    assert proc.returncode == 0, proc.stderr
    args = (work / "args").read_text().splitlines()
    assert args[:3] == ["-n", "env", f"PYTHONPATH={PROJECT_ROOT}"]
    assert args[3].startswith("BENCHSTACK_INPUTS=")
    assert json.loads(args[3].removeprefix("BENCHSTACK_INPUTS=")) == values
    assert args[5:] == ["-m", "hostside", "daemon_config", "delete"]
    assert Path(args[4]).name.startswith("python3")

    env["SUDO_OK"] = "0"
    refused = run_step("create", values, prefix, env)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        "daemon_config: this needs root for docker.daemon_json and the restart: run as root or "
        "allow passwordless sudo")


def test_the_steps_digest_covers_the_modules_it_imports() -> None:
    """An edited daemon_json.py or dockerd_restart.py is an update of the step that runs them."""
    from components.seam.code import module_closure

    assert {"hostside/daemon_config.py", "hostside/daemon_json.py",
            "hostside/dockerd_restart.py"} <= set(module_closure("daemon_config"))


@pytest.mark.parametrize(("argv", "keys", "expected"), [
    (["dockerd", "--default-address-pool", "base=10.99.0.0/16,size=24"],
     [dj.POOLS_KEY, "bip"], {dj.POOLS_KEY: "--default-address-pool"}),
    (["/usr/bin/dockerd", "--bip=10.98.0.1/24", "-H", "fd://"], ["bip"], {"bip": "--bip"}),
    (["dockerd", "-b", "br0"], ["bip"], {"bip": "-b"}),
    (["dockerd", "--bridge=br0"], [dj.POOLS_KEY, "bip"], {"bip": "--bridge"}),
    # A value that looks like a flag is not read as one: only what dockerd parses as flags.
    (["dockerd", "--pidfile", "/run/--bip"], ["bip"], {}),
    (["dockerd", "--data-root", "/d", "--iptables=false"], [dj.POOLS_KEY, "bip"], {}),
    # The binary's own path never counts; only the keys the step writes are mapped to flags.
    (["--bip"], ["bip"], {}),
    (["dockerd", "--log-driver", "json-file"], ["log-driver"], {}),
])
def test_flags_setting_names_the_flag_that_sets_a_key_too(argv, keys, expected) -> None:
    assert dj.flags_setting(argv, keys) == expected
