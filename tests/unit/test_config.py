"""The stack config model: every shipped stack file parses, and every bad config is rejected
before any resource exists, with a message that names the key to change."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from components.config import (
    KNOWN_HARBOR_WHEELS,
    ConfigError,
    load_stack_file,
    parse_stack_config,
    split_stack_file,
)
from contracts.harbor_profiles import PROFILES
from tests.conftest import ROOT
from tests.machine import setting

STACK_FILES = sorted(ROOT.glob("Pulumi.*.yaml"))


def a100() -> dict:
    values, _ = split_stack_file(ROOT / "Pulumi.a100.yaml")
    return copy.deepcopy(values)


def local() -> dict:
    values, _ = split_stack_file(ROOT / "Pulumi.local.yaml")
    return copy.deepcopy(values)


def test_every_stack_file_is_covered():
    names = {p.name for p in STACK_FILES}
    assert {"Pulumi.a100.yaml", "Pulumi.h100.yaml", "Pulumi.local.yaml"} <= names


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_stack_file_parses(path: Path):
    cfg = load_stack_file(path)
    assert len([h for h in cfg.hosts if "harbor" in h.roles]) == 1


def test_a100_is_the_seed_final_run():
    cfg = load_stack_file(ROOT / "Pulumi.a100.yaml")
    assert [h.gpus.count for h in cfg.gpu_hosts] == [8, 8]
    assert {h.gpus.model for h in cfg.gpu_hosts} == {"A100-SXM4-40GB"}
    assert (cfg.serving.tp_size, cfg.serving.dp_size, cfg.replicas) == (4, 2, 4)
    assert cfg.serving.context_length == 262144
    assert cfg.harbor.agent.max_input_tokens == 262144
    assert cfg.harbor.agent.max_output_tokens == 65536
    assert cfg.serving.max_running_requests == 5
    assert cfg.serving.max_mamba_cache_size == 25
    assert cfg.serving.mem_fraction_static == 0.90
    assert (cfg.serving.reasoning_parser, cfg.serving.tool_call_parser) == ("qwen3", "qwen3_coder")
    assert cfg.serving.max_total_tokens is None
    agent = cfg.harbor.agent
    assert (agent.temperature, agent.top_p, agent.top_k) == (1.0, 0.95, None)
    assert agent.record_terminal_session is True
    assert (cfg.router.bind_host, cfg.router.port, cfg.serving.port) == ("127.0.0.1", 30000, 30001)
    assert cfg.router.dp_aware and cfg.router.policy == "cache_aware"
    assert (cfg.router.balance_abs_threshold, cfg.router.balance_rel_threshold) == (1, 1.2)
    assert cfg.harbor.version == "0.21.0"
    assert cfg.harbor.wheel_sha256.startswith("c77d779a")
    assert cfg.dataset.commit == "7131e4375048a0e408a8fb404b5f499d726b695b"
    assert cfg.dataset.expected_tasks == 89
    assert (cfg.harbor.n_concurrent_trials, agent.n_concurrent) == (25, 20)
    assert (cfg.harbor.agent_timeout_multiplier, cfg.harbor.agent_setup_timeout_multiplier) == (
        6.0,
        5.0,
    )
    assert [(p.base, p.size) for p in cfg.docker.address_pools] == [("172.18.0.0/15", 24)]
    assert (cfg.proxy.upstream, cfg.proxy.bridge_port) == ("127.0.0.1:27890", 27891)
    assert cfg.harbor_host.name == cfg.hosts[1].name == "worker-b"


def test_local_serves_a_stand_in_model_on_cpu():
    """The rehearsal has the GPU stacks' serving plane and agent; only what a CPU host forces
    differs, one value each: the image and no GPUs."""
    cfg = load_stack_file(ROOT / "Pulumi.local.yaml")
    assert [h.name for h in cfg.gpu_hosts] == ["local"] and cfg.hosts[0].is_local
    assert cfg.serving.gpus is None and cfg.hosts[0].gpus is None
    assert cfg.serving.image.startswith("127.0.0.1:5000/benchstack/sglang-standin:")
    assert cfg.serving.dp_size >= 2 and cfg.replicas >= 2
    assert cfg.router.dp_aware and cfg.router.policy == "cache_aware"
    assert cfg.harbor.agent.name == "terminus-2"
    assert cfg.images.mirror
    a100 = load_stack_file(ROOT / "Pulumi.a100.yaml")
    assert a100.serving.gpus == "all"


def test_a_gpu_worker_without_gpus_needs_cpu_serving():
    values = a100()
    del values["hosts"][0]["gpus"]
    with pytest.raises(ConfigError, match=r"benchstack:hosts\[0\]\.gpus: worker-a has role "
                       r"gpu_worker but no gpus"):
        parse_stack_config(values)
    # A CPU stand-in rehearsing a GPU host: the host's GPUs are declared (and checked before its
    # worker starts, components/gpu_plane.py), the stand-in worker gets none.
    values = local()
    values["hosts"][0]["gpus"] = {"count": 2, "model": "A100", "memory_gb": 40}
    cfg = parse_stack_config(values)
    assert cfg.serving.gpus is None and cfg.hosts[0].gpus.count == 2


def _set(values: dict, path: str, value) -> None:
    keys = path.split(".")
    node = values
    for key in keys[:-1]:
        node = node[int(key)] if key.isdigit() else node[key]
    last = keys[-1]
    if value is DELETE:
        del node[last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value


DELETE = object()

# (id, base config, [(path, value)], text the error must contain)
INVALID = [
    ("tp-dp-vs-gpus", a100, [("serving.tp_size", 2)], "benchstack:serving.tp_size"),
    ("gpu-count", a100, [("hosts.0.gpus.count", 4)], "benchstack:hosts[0].gpus.count"),
    (
        "model-too-big",
        a100,
        [("model.params_billion", 235)],
        "benchstack:serving.tp_size: Qwen/Qwen3.8-27B (235B bf16) needs",
    ),
    ("mem-fraction", a100, [("serving.mem_fraction_static", 0.3)], "mem_fraction_static 0.3"),
    (
        "agents-above-capacity",
        a100,
        [("harbor.agent.n_concurrent", 21)],
        "benchstack:harbor.agent.n_concurrent: 21 concurrent agents exceed",
    ),
    (
        "agents-above-trials",
        local,
        [("harbor.agent.n_concurrent", 4)],
        "benchstack:harbor.n_concurrent_trials 3",
    ),
    (
        "trials-above-pools",
        a100,
        [("docker.address_pools", [{"base": "172.18.0.0/20", "size": 24}])],
        "benchstack:docker.address_pools: they give 16 networks",
    ),
    (
        "input-above-context",
        a100,
        [("harbor.agent.max_input_tokens", 300000)],
        "benchstack:harbor.agent.max_input_tokens: 300000 is above",
    ),
    (
        "no-gpu-hosts-for-model",
        a100,
        [("hosts.0.roles", ["harbor"]), ("hosts.1.roles", ["harbor"])],
        "no host has the role gpu_worker",
    ),
    (
        "two-harbor-hosts",
        a100,
        [("hosts.0.roles", ["gpu_worker", "harbor"])],
        "exactly one host needs the role harbor, found 2",
    ),
    ("no-harbor-host", local, [("hosts.0.roles", ["gpu_worker"])], "benchstack:hosts"),
    (
        "router-port-clash",
        a100,
        [("router.port", 30001)],
        "benchstack:router.port: port 30001 on worker-b is already used by benchstack:serving.port",
    ),
    (
        "proxy-port-clash",
        a100,
        [("proxy.bridge_port", 27890)],
        "benchstack:proxy.bridge_port: port 27890",
    ),
    ("non-amd64", a100, [("hosts.0.arch", "arm64")], "benchstack:hosts[0].arch"),
    ("unknown-key", a100, [("serving.tp", 4)], "benchstack:serving.tp: unknown key"),
    ("unknown-top-key", local, [("servng", {})], "benchstack:servng: unknown key"),
    ("missing-serving", a100, [("serving", DELETE)], "benchstack:serving"),
    ("bad-pool-cidr", local, [("docker.address_pools.0.base", "10.213.0.1/16")], "address_pools"),
    ("unpinned-dataset", a100, [("dataset.commit", DELETE)], "benchstack:dataset.commit"),
    (
        "repo-and-path",
        a100,
        [("dataset.path", "/data/tb")],
        "benchstack:dataset: set exactly one",
    ),
    ("short-commit", a100, [("dataset.commit", "7131e43")], "benchstack:dataset.commit"),
    ("relative-dataset-on-remote-harbor", a100,
     [("dataset.repo", DELETE), ("dataset.commit", DELETE), ("dataset.path", "datasets/tb")],
     "benchstack:dataset.path: 'datasets/tb' is relative (to the project directory, which only "
     "the local host has), but the Harbor host"),
    ("bad-agent", local, [("harbor.agent.name", "terminus")], "benchstack:harbor.agent.name"),
    ("ssh-without-user", a100, [("hosts.0.user", DELETE)], "benchstack:hosts[0].user"),
    ("bad-sha", local, [("harbor.wheel_sha256", "abc")], "benchstack:harbor.wheel_sha256"),
    ("top-p-range", a100, [("harbor.agent.top_p", 1.5)], "benchstack:harbor.agent.top_p"),
    ("bad-proxy", local, [("proxy.upstream", "27890")], "benchstack:proxy.upstream"),
    (
        "https-check-url",
        a100,
        [("proxy.check_url", "https://example.com/")],
        "benchstack:proxy.check_url",
    ),
    # What users mistype: each is caught at load under its own key, before any resource.
    ("pool-on-loopback", local, [("docker.address_pools.0.base", "127.16.0.0/16")],
     "benchstack:docker.address_pools[0]: 127.16.0.0/16 overlaps loopback"),
    ("pool-on-docker-bridge", local, [("docker.address_pools.0.base", "172.16.0.0/12")],
     "benchstack:docker.address_pools[0]: 172.16.0.0/12 overlaps 172.17.0.0/16"),
    ("pool-holds-a-host", a100, [("docker.address_pools", [{"base": "10.0.0.0/16", "size": 24}])],
     "holds 10.0.0.11, the address in benchstack:hosts[0].address"),
    ("bad-ip", a100, [("hosts.0.address", "10.0.0.300")], "benchstack:hosts[0].address"),
    ("bad-ipv6", a100, [("hosts.0.address", "fd00::1::2")], "benchstack:hosts[0].address"),
    ("unspecified-ipv6", a100, [("hosts.0.private_ip", "::")], "benchstack:hosts[0].private_ip"),
    ("bad-private-ip", a100, [("hosts.0.private_ip", "10.0.0")], "benchstack:hosts[0].private_ip"),
    ("empty-address", a100, [("hosts.0.address", "")], "benchstack:hosts[0].address"),
    ("bad-router-bind", a100, [("router.bind_host", "localhost:30000")],
     "benchstack:router.bind_host"),
    ("privileged-port", a100, [("serving.port", 80), ("router.port", 30000)],
     "benchstack:serving.port: 80 is a privileged port, which uid 1000"),
    ("temperature-range", a100, [("harbor.agent.temperature", 3.0)],
     "benchstack:harbor.agent.temperature"),
    ("top-k-range", a100, [("harbor.agent.top_k", 0)], "benchstack:harbor.agent.top_k"),
    ("proof-above-pools", local, [("docker.address_pools.0.base", "10.213.0.0/20"),
                                  ("docker.proof_networks", 40)],
     "benchstack:docker.proof_networks: 40 proof networks, but"),
    ("total-tokens-below-context", a100, [("serving.max_total_tokens", 131072)],
     "benchstack:serving.max_total_tokens: 131072 is below"),
    ("harbor-version-vs-sha", local, [("harbor.version", "0.26.0")],
     "benchstack:harbor.wheel_sha256: it is not the sha256 of the harbor 0.26.0 wheel "
     "(it is 0.21.0's)"),
    ("harbor-version-unknown", local, [("harbor.version", "0.23.0")],
     "benchstack:harbor.version: Value error, Harbor '0.23.0' has no profile here; the known "
     "versions are 0.21.0, 0.26.0"),
    ("max-job-hours-zero", local, [("harbor.max_job_hours", 0)],
     "benchstack:harbor.max_job_hours"),
    ("empty-model-name", a100, [("model.name", "")], "benchstack:model.name"),
    ("blank-model-name", a100, [("model.name", "  ")], "benchstack:model.name"),
    ("dataset-escapes", local, [("dataset.path", "../../etc")],
     "benchstack:dataset.path: '../../etc' leaves the project directory"),
    ("manifest-escapes", local, [("dataset.manifest_path", "demo/../../x")],
     "benchstack:dataset.manifest_path"),
    ("subdir-escapes", a100, [("dataset.tasks_subdir", "../tasks")],
     "benchstack:dataset.tasks_subdir"),
    ("empty-dataset-path", local, [("dataset.path", "")], "benchstack:dataset.path"),
    ("short-stop-timeout", local, [("harbor.stop_timeout_s", 5)],
     "benchstack:harbor.stop_timeout_s"),
    ("relative-workspace", local, [("workspace", "work/local")], "benchstack:workspace"),
    ("relative-model-path", a100, [("model.path", "models/qwen")],
     "benchstack:model.path: 'models/qwen' is relative (to the project directory, which only the "
     "local host has), but GPU hosts worker-a, worker-b are remote"),
    ("relative-host-workspace", a100, [("hosts.0.workspace", "work")],
     "benchstack:hosts[0].workspace"),
    ("worker-port-on-the-router", a100, [("hosts.1.serving_port", 30000)],
     "port 30000 on worker-b is already used by benchstack:hosts[1].serving_port"),
    ("user-name-not-uid", a100, [("serving.user", "bench")],
     "benchstack:serving.user: Value error, must be a numeric uid:gid"),
    ("mirror-with-scheme", local, [("images.mirror", "http://127.0.0.1:5000")],
     "benchstack:images.mirror"),
    ("reference-in-an-unknown-convention", a100,
     [("harbor.reference_score", {"score": 73.0, "convention": "hub"})],
     "benchstack:harbor.reference_score.convention: Value error, unknown convention 'hub'"),
    ("reference-above-100", a100, [("harbor.reference_score", 173.0)],
     "benchstack:harbor.reference_score.score"),
]


@pytest.mark.parametrize("case", INVALID, ids=[c[0] for c in INVALID])
def test_invalid_config_names_the_key(case):
    _, base, edits, expected = case
    values = base()
    for path, value in edits:
        _set(values, path, value)
    with pytest.raises(ConfigError) as info:
        parse_stack_config(values)
    assert expected in str(info.value)


def test_the_reference_score_carries_its_convention():
    """A bare number was published on the board; an object names its convention and ±."""
    assert load_stack_file(ROOT / "Pulumi.a100.yaml").harbor.reference_score.model_dump() == {
        "score": 73.0, "plus_minus": None, "convention": "leaderboard"}
    values = a100()
    values["harbor"]["reference_score"] = {"score": 68.5, "plus_minus": 3.0,
                                           "convention": "harbor-0.21"}
    reference = parse_stack_config(values).harbor.reference_score
    assert (reference.score, reference.plus_minus, reference.convention) == (
        68.5, 3.0, "harbor-0.21")


def test_host_names_and_ipv6_addresses_are_addresses_too():
    values = a100()
    _set(values, "hosts.0.address", "gpu-a.lab")
    _set(values, "hosts.1.private_ip", "fd00::11")
    cfg = parse_stack_config(values)
    assert [h.reach_address for h in cfg.hosts] == ["gpu-a.lab", "fd00::11"]


def test_unknown_top_level_key_is_rejected_when_read_from_file(tmp_path):
    text = (ROOT / "Pulumi.local.yaml").read_text() + "  benchstack:hostz: []\n"
    path = tmp_path / "Pulumi.typo.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"benchstack:hostz: unknown key"):
        load_stack_file(path)


def test_not_yaml_names_the_file(tmp_path):
    path = tmp_path / "Pulumi.broken.yaml"
    path.write_text("config: [unclosed\n")
    with pytest.raises(ConfigError, match="Pulumi.broken.yaml"):
        load_stack_file(path)


def test_all_problems_are_reported_at_once():
    values = a100()
    values["serving"]["tp_size"] = 2
    values["router"]["port"] = 30001
    with pytest.raises(ConfigError) as info:
        parse_stack_config(values)
    text = str(info.value)
    assert "serving.tp_size" in text and "router.port" in text


def test_pinned_policy_needs_every_remote_host_key():
    values = a100()
    values["ssh"] = {"host_key_policy": "pinned"}
    with pytest.raises(ConfigError) as err:
        parse_stack_config(values)
    assert "benchstack:hosts[0].host_key" in str(err.value)
    assert "ssh-keyscan -t ed25519 10.0.0.11" in str(err.value)
    for host in values["hosts"]:
        host["host_key"] = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHBpbm5lZC1rZXktZm9yLXRoZS10ZXN0"
    assert parse_stack_config(values).ssh.host_key_policy == "pinned"


def test_a_host_key_that_is_not_a_public_key_line_is_rejected():
    values = a100()
    values["hosts"][0]["host_key"] = "10.0.0.11 ssh-ed25519 AAAA"
    with pytest.raises(ConfigError, match=r"benchstack:hosts\[0\]\.host_key"):
        parse_stack_config(values)


def test_secret_written_in_plain_text_is_rejected(tmp_path):
    text = (ROOT / "Pulumi.local.yaml").read_text() + "  benchstack:apiKey: sk-plain-text\n"
    path = tmp_path / "Pulumi.leak.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_stack_file(path)
    assert "benchstack:apiKey: written in plain text" in str(info.value)
    assert "sk-plain-text" not in str(info.value)
    stack_file = (ROOT / "Pulumi.local.yaml").read_text()
    path.write_text(stack_file + "  benchstack:apiKey:\n    secure: v1:abc\n")
    assert load_stack_file(path).harbor.agent.name == "terminus-2"


def local_k8s() -> dict:
    values, _ = split_stack_file(ROOT / "Pulumi.local-k8s.yaml")
    return copy.deepcopy(values)


K8S = "harbor.environment.kubernetes"
# Trials as pods: each refusal names the key to change, before anything exists.
INVALID_K8S = [
    ("proxy on a cluster", [("proxy", {"upstream": "127.0.0.1:27890"})], "benchstack:proxy"),
    ("docker network mode on a cluster", [("harbor.container_network", "none")],
     "benchstack:harbor.container_network"),
    ("kind without its section", [(K8S, DELETE)], "kind is kubernetes"),
    ("a namespace that is no DNS label", [(f"{K8S}.namespace", "Bench_Stack")],
     f"benchstack:{K8S}.namespace"),
    ("a quota that is no quantity", [(f"{K8S}.quota.cpu", "two")],
     f"benchstack:{K8S}.quota.cpu"),
    ("a GPU worker with no docker section", [("hosts.0.roles", ["harbor", "gpu_worker"])],
     "benchstack:docker: missing; host 'local' runs the stack's containers (an SGLang worker)"),
    ("a Harbor whose ack is not rehearsed",
     [("harbor.version", "0.26.0"),
      ("harbor.wheel_sha256", "b7c752c5b51ae2ee1fc2ea30621493c7dc0b5a3d0157295bed4552115027baee")],
     "benchstack:harbor.version: trials on kubernetes are rehearsed with Harbor 0.21.0 only"),
]


@pytest.mark.parametrize("case", INVALID_K8S, ids=[c[0] for c in INVALID_K8S])
def test_invalid_kubernetes_config_names_the_key(case):
    _, edits, expected = case
    values = local_k8s()
    for path, value in edits:
        _set(values, path, value)
    with pytest.raises(ConfigError) as info:
        parse_stack_config(values)
    assert expected in str(info.value)


def test_trials_on_docker_need_the_docker_section():
    values = local()
    del values["docker"]
    with pytest.raises(ConfigError) as info:
        parse_stack_config(values)
    assert "benchstack:docker: missing" in str(info.value)
    # On a cluster the Harbor host runs no container of the stack: no docker section needed.
    cfg = parse_stack_config(local_k8s())
    assert cfg.docker is None and cfg.docker_hosts == []


def test_each_version_is_a_profile_with_its_pin_and_its_sidecar():
    """harbor.version picks the profile: its pinned wheel, and (unless given) the egress
    sidecar tag that version looks up."""
    values = local()
    _set(values, "harbor.version", "0.26.0")
    _set(values, "harbor.wheel_sha256", PROFILES["0.26.0"].wheel_sha256)
    cfg = parse_stack_config(values)
    assert cfg.harbor.profile is PROFILES["0.26.0"]
    assert cfg.images.sidecar_image == PROFILES["0.26.0"].sidecar_image
    assert parse_stack_config(local()).images.sidecar_image == PROFILES["0.21.0"].sidecar_image
    _set(values, "images.sidecar_image", "mine:1")
    assert parse_stack_config(values).images.sidecar_image == "mine:1"
    assert KNOWN_HARBOR_WHEELS == {v: p.wheel_sha256 for v, p in PROFILES.items()}


def test_the_setup_defaults_pin_the_same_wheels_as_the_profiles():
    """The tests' own Harbor venvs (setup/defaults.env) are the profiles' wheels."""
    assert setting("HARBOR_VERSION") == "0.21.0"
    assert setting("HARBOR_WHEEL_SHA256") == PROFILES["0.21.0"].wheel_sha256
    assert setting("HARBOR_LATEST_VERSION") == "0.26.0"
    assert setting("HARBOR_LATEST_WHEEL_SHA256") == PROFILES["0.26.0"].wheel_sha256
    for stack in STACK_FILES:
        harbor = split_stack_file(stack)[0]["harbor"]
        assert harbor["wheel_sha256"] == PROFILES[harbor["version"]].wheel_sha256, stack.name
