"""components/daemon_json.py with no peer: the pure logic (pools, overlaps, merge, which original,
the record, backup names, what the delete does) and its steps on files in a temporary directory.

The engine side (restarts, docker0, the proof networks) is proven by
tests/hostplane/test_daemon_config.py against a real second dockerd.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from components import daemon_json as dj
from components.host import CODE_ROOT

POOLS = [{"base": "172.18.0.0/15", "size": 24}]
POOLS_TEXT = json.dumps(POOLS)
BASE = '{\n  "bip": "10.213.0.1/24",\n  "log-level": "info"\n}\n'


# --- addresses and pools ----------------------------------------------------------------------


def test_parse_cidr_takes_ipv4_only() -> None:
    assert dj.parse_cidr("10.1.2.3/24") == ((10 << 24) | (1 << 16) | (2 << 8) | 3, 24)
    assert dj.parse_cidr("10.1.2.3") == ((10 << 24) | (1 << 16) | (2 << 8) | 3, 32)
    for bad in ("default", "fe80::/64", "256.0.0.0/8", "10.0.0.0/33", "10.0.0/8", "10.0.0.0/8\n",
                "١٠.0.0.0/8"):
        assert dj.parse_cidr(bad) is None, bad


def test_span_and_ip_text() -> None:
    start, end = dj.cidr_span("172.18.0.0/15") or (0, 0)
    assert (dj.ip_text(start), dj.ip_text(end)) == ("172.18.0.0", "172.19.255.255")
    assert dj.cidr_span("0.0.0.0/0") == (0, 0xFFFFFFFF)
    seven = (10 << 24) | 7
    assert dj.cidr_span("10.0.0.7") == (seven, seven)


def test_good_pools_come_back_normalized() -> None:
    text = '[{"size": 24, "base": "172.18.0.0/15"}, {"base": "10.99.0.0/16", "size": 26}]'
    assert dj.parse_pools(text, 64) == [
        {"base": "172.18.0.0/15", "size": 24}, {"base": "10.99.0.0/16", "size": 26},
    ]


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("not json", "ADDRESS_POOLS_JSON must be a non-empty JSON list"),
        ("[]", "ADDRESS_POOLS_JSON must be a non-empty JSON list"),
        ('{"base": "172.18.0.0/15", "size": 24}', "must be a non-empty JSON list"),
        ('[{"base": "172.18.0.0/15"}]', "must be a non-empty JSON list"),
        ('[{"base": "172.18.0.0/15", "size": 24, "x": 1}]', "must be a non-empty JSON list"),
        ('[{"base": "172.18.0.0/15", "size": "24"}]', "must be a non-empty JSON list"),
        ('[{"base": "172.18.0.0/15", "size": true}]', "must be a non-empty JSON list"),
        ('[{"base": "fd00::/48", "size": 64}]', "base 'fd00::/48' is not an IPv4 CIDR"),
        ('[{"base": "172.18.0.0", "size": 24}]', "base '172.18.0.0' is not an IPv4 CIDR"),
        ('[{"base": "172.18.0.0/15", "size": 12}]', "size 12 does not fit base 172.18.0.0/15: "
                                                    "use a size between /15 and /30"),
        ('[{"base": "172.18.0.0/15", "size": 31}]', "size 31 does not fit"),
        ('[{"base": "172.18.1.0/15", "size": 24}]', "has host bits set: use 172.18.0.0/15"),
        ('[{"base": "172.18.0.0/22", "size": 24}]',
         "yields only 4 networks, fewer than PROOF_NETWORKS=64"),
    ],
)
def test_bad_pools_name_what_to_change(text: str, fragment: str) -> None:
    with pytest.raises(dj.Failure) as err:
        dj.parse_pools(text, 64)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_capacity_adds_up_over_pools() -> None:
    two = '[{"base": "172.18.0.0/22", "size": 24}, {"base": "172.20.0.0/23", "size": 24}]'
    assert len(dj.parse_pools(two, 6)) == 2
    with pytest.raises(dj.Failure, match="yields only 6 networks"):
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
    assert dj.lenient_pools('[{"base": "x"}]') == [{"base": "x", "size": None}]
    with pytest.raises(dj.Failure, match="is not a JSON list of"):
        dj.lenient_pools('"x"')


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


def unplan(current: str | None, record: dict | None = None, **over: str) -> dj.Undo:
    return dj.unplan(POOLS, over.get("original", ""), over.get("backup", ""),
                     over.get("docker0", ""), record, "/d/daemon.json", current)


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


def test_unplan_overrides_and_failures() -> None:
    holds = json.dumps({"default-address-pools": POOLS})
    # ORIGINAL given: the record is not read at all.
    undo = unplan(holds, None, original="file", backup="/x", docker0="1.2.3.4/24")
    assert (undo.action, undo.backup, undo.docker0) == ("restore", "/x", "1.2.3.4/24")
    with pytest.raises(dj.Failure, match="ORIGINAL='bogus' must be file, absent or unchanged"):
        unplan(holds, None, original="bogus")
    with pytest.raises(dj.Failure, match=r"is not a JSON object any more: fix it by hand "
                                         r"\(backup: /d/b\)"):
        unplan("{", {"original": "file", "backup": "/d/b", "pools": POOLS})
    with pytest.raises(dj.Failure, match="RECORD_FILE=/r is not valid JSON"):
        dj.parse_delete_record("{", "/r", "/d")
    with pytest.raises(dj.Failure, match="RECORD_FILE=/r is not valid JSON"):
        dj.parse_delete_record('{"pools": 3}', "/r", "/d")


def test_without_pools() -> None:
    current = {"default-address-pools": POOLS, "bip": "10.0.0.1/24", "log-level": "info"}
    assert dj.without_pools(current, "file") == {"bip": "10.0.0.1/24", "log-level": "info"}
    assert dj.without_pools(current, "absent") == {"log-level": "info"}
    assert dj.without_pools({"default-address-pools": POOLS, "bip": "x"}, "absent") is None
    assert dj.without_pools({"default-address-pools": POOLS}, "file") == {}


# --- the steps, on files ----------------------------------------------------------------------


class Run:
    """One script run's steps, in-process, against files under `root`."""

    def __init__(self, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.root, self.capsys = root, capsys
        self.config = root / "daemon.json"
        self.record = root / "daemon.json.benchstack.json"
        self.state = root / f"state-{time.monotonic_ns()}"
        self.state.mkdir()

    def __call__(self, step: str, *args: str) -> tuple[int, str]:
        """The step's exit code and stdout; its log lines are left in `self.err`."""
        self.capsys.readouterr()
        rc = dj.main([str(self.state), step, *args])
        captured = self.capsys.readouterr()
        self.err = captured.err
        return rc, captured.out.strip()

    def inputs(self, pools: str = POOLS_TEXT, proof: str = "4") -> list[str]:
        return ["--daemon-json", str(self.config), "--record", str(self.record),
                "--backup-dir", str(self.root), "--pools", pools, "--proof-networks", proof]

    def create(self, docker0: str = "10.213.0.1/24", engine: str = "null",
               pools: str = POOLS_TEXT) -> dict:
        """The create's steps as daemon_config.sh runs them, the engine's side faked."""
        assert self("init", *self.inputs(pools)) == (0, "")
        rc, answer = self("plan", "--engine-pools", engine, "--docker0", docker0)
        assert rc == 0, answer
        need_write, need_restart = answer.split()
        if need_write == "true":
            assert self("install", "--dockerd", "") == (0, "")
        # The proof's first network: the pool's first /size subnet.
        pool = json.loads(pools)[0]
        first = f"{pool['base'].split('/')[0]}/{pool['size']}"
        rc, out = self("finish", "--restarted", need_restart, "--first", first, "--last", first)
        assert rc == 0, out
        return json.loads(out)

    def backups(self) -> list[Path]:
        return sorted(self.root.glob("daemon.json.backup-*"))


def test_create_then_rerun_then_delete_on_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "daemon.json"
    config.write_text(BASE)
    config.chmod(0o600)
    out = Run(tmp_path, capsys).create()
    run = Run(tmp_path, capsys)
    [backup] = run.backups()
    assert out == {
        "changed": True, "restarted": True, "original": "file", "backup": str(backup),
        "record": str(run.record), "daemon_json": str(config), "address_pools": POOLS,
        "first_subnet": "172.18.0.0/24", "last_subnet": "172.18.0.0/24", "proof_networks": 4,
    }
    assert backup.read_text() == BASE and backup.stat().st_mode & 0o777 == 0o600
    assert json.loads(config.read_text()) == {**json.loads(BASE), "default-address-pools": POOLS}
    assert json.loads(run.record.read_text()) == {
        "original": "file", "backup": str(backup), "daemon_json": str(config), "pools": POOLS,
        "docker0": "10.213.0.1/24",
    }
    temporary = [p for p in tmp_path.glob("daemon.json.benchstack.*") if p != run.record]
    assert temporary == [], "temporary files left"

    # The same pools again: nothing written, the same original; no new backup.
    merged = config.read_bytes()
    again = run.create(engine='[{"Base":"172.18.0.0/15","Size":24}]')
    assert (again["changed"], again["restarted"]) == (False, False)
    assert {k: again[k] for k in ("original", "backup", "record")} == {
        k: out[k] for k in ("original", "backup", "record")}
    assert config.read_bytes() == merged and run.backups() == [backup]

    # Delete: the backup put back byte for byte, its mode too; the record is spent.
    delete = Run(tmp_path, capsys)
    rc, answer = delete("unplan", *delete.inputs()[:-2])
    assert (rc, answer) == (0, "restore 10.213.0.1/24")
    assert delete("undo") == (0, "")
    assert config.read_text() == BASE and config.stat().st_mode & 0o777 == 0o600
    assert not run.record.exists()
    rc, report = delete("report", "--restored", "true", "--restarted", "true")
    assert json.loads(report) == {"restored": True, "restarted": True,
                                  "daemon_json": str(config), "original": "file"}
    # A second delete: nothing to undo.
    twice = Run(tmp_path, capsys)
    assert twice("unplan", *twice.inputs()[:-2]) == (0, "none")


def test_changed_pools_keep_the_first_backup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "daemon.json").write_text(BASE)
    first = Run(tmp_path, capsys).create()
    other = json.dumps([{"base": "172.20.0.0/16", "size": 24}])
    second = Run(tmp_path, capsys).create(pools=other)
    run = Run(tmp_path, capsys)
    assert second["changed"] is True and second["backup"] == first["backup"]
    assert len(run.backups()) == 2, "each write is backed up"
    # The old resource's delete is a no-op; the new one restores the first original.
    assert run("unplan", *run.inputs()[:-2]) == (0, "none")
    new = Run(tmp_path, capsys)
    assert new("unplan", *new.inputs(other)[:-2])[1].startswith("restore")
    assert new("undo") == (0, "")
    assert (tmp_path / "daemon.json").read_text() == BASE


def test_absent_config_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = Run(tmp_path, capsys).create(docker0="172.17.0.1/16")
    config = tmp_path / "daemon.json"
    assert (out["original"], out["backup"]) == ("absent", "")
    assert json.loads(config.read_text()) == {"default-address-pools": POOLS,
                                              "bip": "172.17.0.1/16"}
    assert config.stat().st_mode & 0o777 == 0o644 and Run(tmp_path, capsys).backups() == []
    delete = Run(tmp_path, capsys)
    assert delete("unplan", *delete.inputs()[:-2]) == (0, "restore 172.17.0.1/16")
    assert delete("undo") == (0, "") and not config.exists()


def test_delete_with_the_backup_gone_drops_only_our_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "daemon.json"
    config.write_text(BASE)
    out = Run(tmp_path, capsys).create()
    Path(out["backup"]).unlink()
    delete = Run(tmp_path, capsys)
    assert delete("unplan", *delete.inputs()[:-2])[0] == 0
    assert delete("undo") == (0, "")
    assert f"backup '{out['backup']}' is gone: removing only default-address-pools" in delete.err
    # The pin was the config's own bip: kept, as everything but the pools.
    assert json.loads(config.read_text()) == json.loads(BASE)


def test_failed_validation_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "daemon.json"
    config.write_text(BASE)
    dockerd = tmp_path / "fake-dockerd"
    dockerd.write_text('#!/bin/sh\n[ "$1" = --help ] && { echo "  --validate  check"; exit 0; }\n'
                       'echo "unable to configure the Docker daemon: bad key" >&2; exit 1\n')
    dockerd.chmod(0o755)
    run = Run(tmp_path, capsys)
    assert run("init", *run.inputs()) == (0, "")
    assert run("plan", "--engine-pools", "null", "--docker0", "") == (0, "true true")
    before = sorted(p.name for p in tmp_path.iterdir())
    rc, reason = run("install", "--dockerd", str(dockerd))
    assert rc == 1
    assert reason == ("dockerd --validate rejects the merged config (unable to configure the "
                      f"Docker daemon: bad key): fix DAEMON_JSON={config}")
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "a backup or temp file left"
    assert config.read_text() == BASE
    # Nothing was installed: put-back has nothing to do (and the script no restart).
    assert run("put-back") == (0, "unchanged") and config.read_text() == BASE


def test_put_back_after_install_restores_byte_for_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "daemon.json"
    config.write_bytes(b'{"log-level":"info"}')  # no newline, compact: bytes, not JSON, count
    run = Run(tmp_path, capsys)
    assert run("init", *run.inputs()) == (0, "")
    assert run("plan", "--engine-pools", "null", "--docker0", "")[0] == 0
    assert run("install", "--dockerd", "") == (0, "")
    assert config.read_bytes() != b'{"log-level":"info"}'
    assert run("put-back") == (0, "restored")
    assert config.read_bytes() == b'{"log-level":"info"}'
    assert run("put-back") == (0, "unchanged")
    assert not run.record.exists(), "a failed run writes no record"


def test_put_back_of_an_absent_original_removes_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Run(tmp_path, capsys)
    assert run("init", *run.inputs()) == (0, "")
    assert run("plan", "--engine-pools", "null", "--docker0", "")[0] == 0
    assert run("install", "--dockerd", "") == (0, "") and run.config.exists()
    assert run("put-back") == (0, "restored") and not run.config.exists()


def test_plan_rejects_a_config_that_is_not_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Run(tmp_path, capsys)
    run.config.write_text('{"bip": "10.213.0.1/24",\n')
    assert run("init", *run.inputs()) == (0, "")
    rc, reason = run("plan", "--engine-pools", "null", "--docker0", "")
    assert rc == 1 and reason.startswith(f"DAEMON_JSON={run.config} is not a JSON object (")
    assert reason.endswith("fix or move that file, then re-run")
    run.config.write_text("[1]")
    assert run("plan", "--engine-pools", "null", "--docker0", "")[1].startswith(
        f"DAEMON_JSON={run.config} is not a JSON object (not an object)")


def test_steps_report_conflicts_engine_and_proof(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Run(tmp_path, capsys)
    assert run("init", *run.inputs()) == (0, "")
    (tmp_path / "routes").write_text(ROUTES)
    (tmp_path / "networks").write_text("")
    rc, reason = run("conflicts", "--routes", str(tmp_path / "routes"),
                     "--networks", str(tmp_path / "networks"))
    assert rc == 1 and reason == (
        "pool 172.18.0.0/15 overlaps host route 'unreachable 172.19.4.0/24 metric 100': "
        "choose another base in ADDRESS_POOLS_JSON or remove what overlaps")
    rc, reason = run("check-engine", "--engine-pools", "null")
    assert rc == 1 and reason.startswith(
        'after the restart the engine reports default-address-pools [], not '
        '[{"base":"172.18.0.0/15","size":24}]: is DAEMON_JSON the file this engine reads?')
    assert run("check-engine", "--engine-pools", '[{"Base":"172.18.0.0/15","Size":24}]') == (
        0, "")
    assert run("plan", "--engine-pools", "null", "--docker0", "")[0] == 0
    rc, reason = run("finish", "--restarted", "true", "--first", "172.18.0.0/24",
                     "--last", "10.0.0.0/24")
    assert rc == 1 and reason.startswith("proof network got 10.0.0.0/24, which is not a /size")
    assert not run.record.exists()


def test_init_checks_proof_networks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = Run(tmp_path, capsys)
    assert run("init", *run.inputs(proof="x")) == (1, "PROOF_NETWORKS='x' is not a number")


def test_pin_then_put_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "daemon.json"
    config.write_text('{"log-level": "info"}')
    run = Run(tmp_path, capsys)
    assert run("unplan", "--daemon-json", str(config), "--record", str(run.record),
               "--backup-dir", str(tmp_path), "--pools", POOLS_TEXT, "--original", "file",
               "--docker0", "172.17.0.1/16") == (0, "none")  # the file holds other pools
    assert run("pin") == (0, "")
    assert json.loads(config.read_text()) == {"log-level": "info", "bip": "172.17.0.1/16"}
    assert run("put-back") == (0, "restored")
    assert config.read_text() == '{"log-level": "info"}'
    # No file before the pin: none after it.
    config.unlink()
    assert run("pin") == (0, "") and json.loads(config.read_text()) == {"bip": "172.17.0.1/16"}
    assert run("put-back") == (0, "restored") and not config.exists()


def test_runs_standalone_and_answers_on_stdout(tmp_path: Path) -> None:
    """As the scripts run it: a copy with nothing of the project beside it, no site-packages;
    a failure is exit 1 with the one-line reason as stdout."""
    prog = tmp_path / "daemon_json.py"
    shutil.copy(CODE_ROOT / "daemon_json.py", prog)
    state = tmp_path / "state"
    state.mkdir()
    cmd = [sys.executable, "-I", "-S", str(prog), str(state), "init", "--daemon-json",
           str(tmp_path / "daemon.json"), "--record", str(tmp_path / "r.json"),
           "--backup-dir", str(tmp_path), "--proof-networks", "64"]
    bad = subprocess.run([*cmd, "--pools", '[{"base": "172.18.1.0/15", "size": 24}]'],
                         capture_output=True, text=True, cwd=tmp_path,
                         env={"PATH": os.environ["PATH"]})
    assert bad.returncode == 1, bad.stderr
    assert bad.stdout == ("ADDRESS_POOLS_JSON base 172.18.1.0/15 has host bits set: "
                          "use 172.18.0.0/15\n")
    good = subprocess.run([*cmd, "--pools", POOLS_TEXT], capture_output=True, text=True,
                          cwd=tmp_path, env={"PATH": os.environ["PATH"]})
    assert (good.returncode, good.stdout) == (0, ""), good.stderr
    assert json.loads((state / "state.json").read_text())["pools"] == POOLS


def test_an_engine_without_validate_gets_the_json_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dockerd = tmp_path / "old-dockerd"
    dockerd.write_text('#!/bin/sh\necho "Usage: dockerd [OPTIONS]"\n')
    dockerd.chmod(0o755)
    run = Run(tmp_path, capsys)
    assert run("init", *run.inputs()) == (0, "")
    assert run("plan", "--engine-pools", "null", "--docker0", "")[0] == 0
    assert run("install", "--dockerd", str(dockerd)) == (0, "")
    assert dj.pools_in(json.loads(run.config.read_text())) == POOLS


def test_file_errors_are_one_line_reasons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Run(tmp_path, capsys)
    missing = tmp_path / "no-such-dir" / "daemon.json"
    assert run("init", "--daemon-json", str(missing), *run.inputs()[2:]) == (0, "")
    assert run("plan", "--engine-pools", "null", "--docker0", "") == (0, "true true")
    assert run("install", "--dockerd", "") == (
        1, f"cannot write next to DAEMON_JSON={missing}: run as root or allow sudo -n")
    # One the steps do not foresee: still one line, naming the file.
    delete = Run(tmp_path, capsys)
    delete.config.write_text(json.dumps({"default-address-pools": POOLS}))
    delete.record.mkdir()
    assert delete("unplan", *delete.inputs()[:-2], "--original", "absent")[0] == 0
    assert delete("undo") == (1, f"daemon_json.py undo: Is a directory ({delete.record})")
