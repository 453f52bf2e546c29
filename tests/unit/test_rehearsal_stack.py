"""Pulumi.a100-rehearsal.yaml is Pulumi.a100.yaml with only what a CPU rehearsal forces changed:
the two files side by side, key by key (lists by index), and every difference must be one of the
allowed ones below, each with its reason. Anything else that differs (a host, an address, a
user, a path, a serving or sampling flag, a timeout multiplier, the router's policy...) fails,
naming the key: the rehearsal must stay the seed's topology and the seed's settings."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from components.config import load_stack_file, split_stack_file

ROOT = Path(__file__).resolve().parents[2]
A100 = ROOT / "Pulumi.a100.yaml"
REHEARSAL = ROOT / "Pulumi.a100-rehearsal.yaml"

# Every key allowed to differ (a regular expression over the flattened key), and why.
ALLOWED = {
    r"serving\.image": "the CPU stand-in of SGLang (demo/gpu_standin) instead of SGLang, which "
                       "needs GPUs",
    r"serving\.gpus": "no GPU: the stand-in runs without `--gpus`",
    r"serving\.extra_server_args": "the stand-in's decode speed (it would answer at once; GPUs "
                                   "take seconds, so a host lost mid-job finds calls in flight) "
                                   "and the pace of the SGLang startup it replays",
    r"hosts\[\d\]\.gpus(\..*)?": "no GPU on the rehearsal hosts (config_checks refuses "
                                 "hosts[].gpus with serving.gpus null)",
    r"docker\.restart_command": "the rehearsal hosts have no systemd: their engine's init script "
                                "(still under sudo)",
    r"serving\.memlock|router\.nofile|harbor\.nofile": "the rehearsal machine's Docker engines may "
                                                      "not raise limits (no CAP_SYS_RESOURCE)",
    r"harbor\.n_concurrent_trials|harbor\.agent\.n_concurrent": "what a 2-core machine holds",
    r"dataset\..*": "the 3 demo tasks on worker-b instead of Terminal-Bench 2.1's 89 from GitHub",
    r"images\.mirror": "the registry mirror on the hosts' loopback: no other registry is reachable",
    r"proxy\.check_url": "a page on the operator's loopback instead of a public site",
}


def flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaves by dotted key, list items by index: {"hosts[0].address": "10.0.0.11", ...}."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flat(item, f"{prefix}.{key}" if prefix else key))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {}
        for i, item in enumerate(value):
            out.update(flat(item, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def differences(a: dict, b: dict) -> dict[str, tuple[Any, Any]]:
    fa, fb = flat(a), flat(b)
    missing = object()
    return {k: (fa.get(k, missing), fb.get(k, missing))
            for k in sorted(fa.keys() | fb.keys()) if fa.get(k, missing) != fb.get(k, missing)}


def allowed(key: str) -> bool:
    return any(re.fullmatch(pattern, key) for pattern in ALLOWED)


def test_only_what_a_cpu_rehearsal_forces_differs():
    (a100, _), (rehearsal, _) = split_stack_file(A100), split_stack_file(REHEARSAL)
    found = differences(a100, rehearsal)
    others = {k: v for k, v in found.items() if not allowed(k)}
    assert not others, "keys that differ from Pulumi.a100.yaml without a CPU-rehearsal reason: " \
        + ", ".join(f"{k} (a100 {a!r}, rehearsal {b!r})" for k, (a, b) in others.items())
    # Each allowed difference is there for its reason (none is left over from an old file).
    patterns_used = {p for p in ALLOWED for k in found if re.fullmatch(p, k)}
    assert patterns_used == set(ALLOWED), set(ALLOWED) - patterns_used


def test_the_rehearsal_is_the_seed_topology_on_cpus():
    a100, rehearsal = load_stack_file(A100), load_stack_file(REHEARSAL)
    assert [(h.name, h.address, h.user, h.roles) for h in rehearsal.hosts] == [
        (h.name, h.address, h.user, h.roles) for h in a100.hosts]
    assert rehearsal.harbor_host.name == "worker-b" and rehearsal.replicas == a100.replicas == 4
    assert rehearsal.serving.gpus is None and all(h.gpus is None for h in rehearsal.hosts)
    assert rehearsal.serving.image.startswith("127.0.0.1:5000/benchstack/sglang-standin:")
    # Restarting a remote engine as the non-root user needs sudo, as the seed's does.
    assert rehearsal.docker.restart_command.startswith("sudo ")
    assert rehearsal.dataset.path and rehearsal.dataset.expected_tasks == 3
    assert rehearsal.dataset.manifest_path == "demo/tasks"


@pytest.mark.parametrize("key, a, b, ok", [
    ("serving.tp_size", 4, 2, False),
    ("hosts[1].address", "10.0.0.12", "10.0.0.13", False),
    ("harbor.agent.temperature", 1.0, 0.7, False),
    ("serving.image", "lmsysorg/sglang", "127.0.0.1:5000/x", True),
    ("hosts[0].gpus.count", 8, None, True),
])
def test_a_difference_outside_the_list_is_named(key, a, b, ok):
    def nested(value):
        head, *rest = re.split(r"\.(?![^\[]*\])", key)
        doc: dict = {}
        cur = doc
        for part in [head, *rest][:-1]:
            name, _, index = part.partition("[")
            if index:
                cur[name] = [{} for _ in range(int(index[:-1]) + 1)]
                cur = cur[name][int(index[:-1])]
            else:
                cur = cur.setdefault(name, {})
        cur[[head, *rest][-1]] = value
        return doc
    found = differences(nested(a), nested(b))
    assert list(found) == [key]
    assert allowed(key) is ok
