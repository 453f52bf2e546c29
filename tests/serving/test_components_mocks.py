"""SGLangWorker and Router under Pulumi mocks: the declared containers, flag by flag.

Mocks validate nothing: they record (type, name, inputs) and each resource's options, and the
tests assert on those records. Layout values come from the stack files, never retyped.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi.runtime
import pytest
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from components.config import (
    ConfigError,
    StackConfig,
    load_stack_file,
    parse_stack_config,
    split_stack_file,
)
from components.router import Router, RouterArgs
from components.seam.code import code_digest, module_closure
from components.seam.host import Host
from components.sglang_worker import SGLangWorker, SGLangWorkerArgs, startup_timeout_s
from hostside import gpu_check
from tests.conftest import ROOT
from tests.gpu import fixtures as gpu_fixtures
from tests.graph.program import mock_local_run, shipped

IMAGE_ID = "sha256:" + "ab" * 32


@dataclass
class Record:
    type: str
    name: str
    inputs: dict[str, Any]
    opts: pulumi.ResourceOptions | None = None
    resource: pulumi.Resource | None = None


@dataclass
class Recorded:
    records: list[Record] = field(default_factory=list)

    def named(self, name: str) -> Record:
        found = [r for r in self.records if r.name == name and r.type != "component"]
        assert len(found) == 1, f"{len(found)} registrations named {name!r}"
        return found[0]

    def resource(self, name: str) -> pulumi.Resource:
        found = [r.resource for r in self.records if r.name == name and r.resource is not None]
        assert len(found) == 1, f"{len(found)} resources named {name!r}"
        return found[0]

    def opts(self, name: str) -> pulumi.ResourceOptions:
        found = [r.opts for r in self.records if r.name == name and r.type == "component"]
        assert len(found) == 1
        return found[0] or pulumi.ResourceOptions()

    def of_type(self, type_: str) -> list[Record]:
        return [r for r in self.records if r.type == type_]


class Mocks(pulumi.runtime.Mocks):
    def __init__(self, recorded: Recorded) -> None:
        self.recorded = recorded

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        inputs = dict(args.inputs)
        self.recorded.records.append(Record(args.typ, args.name, inputs))
        outputs = dict(inputs)
        if args.typ == "docker:index/remoteImage:RemoteImage":
            outputs["imageId"] = IMAGE_ID
        if args.typ.startswith("command:"):
            outputs["stdout"] = stdout_for(args.name, inputs)
            outputs["stderr"] = ""
        return [f"{args.name}-id", outputs]

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token == "command:local:run":
            return mock_local_run(args.args.get("command", ""))
        return {}


SECRET_SIG = "4dabf18193072939515e22adb298388d"


def is_secret(value: object) -> bool:
    """Mocks see a secret input as Pulumi's wrapped form, not as the plain value."""
    return isinstance(value, dict) and SECRET_SIG in value


def exported(create: str | dict, key: str) -> str:
    """The value a rendered host script exports for `key` (what the script will see)."""
    if is_secret(create):
        create = create["value"]
    script = shlex.split(create)[2]
    # The seam renders `export KEY=<shlex-quoted value>` lines first, then the script text.
    lexer = shlex.shlex(script, posix=True)
    lexer.whitespace_split = True
    while lexer.get_token() == "export":
        name, _, value = lexer.get_token().partition("=")
        if name == key:
            return value
    raise AssertionError(f"{key} is not exported by the rendered script")


def step_inputs(create: str | dict) -> dict:
    """The inputs a host step's command gives its module (one JSON object, secrets left out)."""
    return json.loads(exported(create, "BENCHSTACK_INPUTS"))


def stdout_for(name: str, inputs: dict) -> str:
    if name.endswith("-gpu-check"):
        # What the step prints on a host whose nvidia-smi printed the recorded idle H100s.
        step = gpu_check.Inputs(**step_inputs(inputs["create"]))
        return json.dumps(gpu_check.facts(step, gpu_fixtures.reading("h100-idle")))
    if name.endswith("-gpu-runtime"):
        seen = step_inputs(inputs["create"])["uuids"]
        return json.dumps({"seen": seen, "runtimes": ["io.containerd.runc.v2", "nvidia", "runc"]})
    if name.endswith("-image-load"):
        return json.dumps({"image_id": "sha256:" + "cd" * 32, "architecture": "amd64"})
    if name.endswith("-ready"):
        spec = step_inputs(inputs["create"])["spec"]
        if spec["mode"] == "worker":
            return json.dumps({"url": spec["url"], "server_info": spec["expect"]})
        return json.dumps({"router_url": spec["url"], "reply": "READY"})
    return "{}"


def declare(build) -> Recorded:
    """Run `build()` in a fresh Pulumi program under mocks; wait for every registration."""
    recorded = Recorded()
    pulumi_settings.reset_options()
    pulumi.runtime.set_mocks(Mocks(recorded), project="benchstack", stack="test", preview=False)
    original_init = pulumi.Resource.__init__

    def recording_init(self, t, name, custom=False, props=None, opts=None, *args, **kwargs):
        recorded.records.append(Record("component", name, {}, opts, self))
        original_init(self, t, name, custom, props, opts, *args, **kwargs)

    async def program() -> None:
        outputs = build()
        for value in outputs or []:
            await pulumi.Output.from_input(value).future()

    pulumi.Resource.__init__ = recording_init
    try:
        _sync_await(run_pulumi_func(program))
    finally:
        pulumi.Resource.__init__ = original_init
    return recorded


def stack(name: str) -> StackConfig:
    return load_stack_file(ROOT / f"Pulumi.{name}.yaml")


def host_of(cfg: StackConfig, host_name: str) -> Host:
    h = next(h for h in cfg.hosts if h.name == host_name)
    return shipped(Host(name=h.name, address=h.address, user=h.user, port=h.port))


MODEL_ALIASES = {"model_path": "path", "served_model_name": "name"}


def _sections(sections: dict, changes: dict) -> dict:
    """Apply `changes` to whichever config section owns each key (the rest stay Args fields)."""
    updates: dict = {name: {} for name in sections}
    rest = {}
    for key, value in changes.items():
        key_in_model = MODEL_ALIASES.get(key, key)
        owner = next((n for n, sec in sections.items()
                      if (key_in_model if n == "model" else key) in type(sec).model_fields), None)
        if owner is None:
            rest[key] = value
        else:
            updates[owner][key_in_model if owner == "model" else key] = value
    return {n: sec.model_copy(update=updates[n]) for n, sec in sections.items()} | rest


def worker_args(cfg: StackConfig, host_name: str, **changes: Any) -> SGLangWorkerArgs:
    """The stack file's layout as SGLangWorkerArgs, the way __main__.py maps it; `changes`
    edit the serving or model section (or the Args themselves)."""
    h = next(h for h in cfg.hosts if h.name == host_name)
    fields = _sections({"serving": cfg.serving, "model": cfg.model}, changes)
    defaults = dict(host=host_of(cfg, host_name), bind_host=h.reach_address,
                    port=cfg.worker_port(h), container_name=f"benchstack-sglang-{h.name}",
                    workspace=cfg.workspace, gpu_spec=h.gpus,
                    gpu_spec_key=f"benchstack:hosts[{cfg.hosts.index(h)}].gpus")
    return SGLangWorkerArgs(**(defaults | fields))


def router_args(cfg: StackConfig, worker_urls: list, **changes: Any) -> RouterArgs:
    fields = _sections({"router": cfg.router, "serving": cfg.serving, "model": cfg.model},
                       changes)
    defaults = dict(host=host_of(cfg, cfg.harbor_host.name), worker_urls=worker_urls,
                    container_name="benchstack-sglang-router", workspace=cfg.workspace)
    return RouterArgs(**(defaults | fields))


def seed_argv(host_ip: str, tp: int, dp: int) -> list[str]:
    """The seed's `sglang serve` line for this layout (Launch the two SGLang workers)."""
    return [
        "sglang", "serve",
        "--model-path", "/models/Qwen3.8-27B",
        "--served-model-name", "Qwen/Qwen3.8-27B",
        "--host", host_ip,
        "--port", "30001",
        "--tp-size", str(tp),
        "--dp-size", str(dp),
        "--context-length", "262144",
        "--max-running-requests", "5",
        "--max-mamba-cache-size", "25",
        "--mem-fraction-static", "0.9",
        "--reasoning-parser", "qwen3",
        "--tool-call-parser", "qwen3_coder",
    ]


def assert_seed_run_options(inputs: dict, cfg: StackConfig) -> None:
    """The seed's `docker run` options for a worker, one by one."""
    assert inputs["gpus"] == "all"
    assert inputs["networkMode"] == "host"
    assert inputs["ipcMode"] == "host"
    assert inputs["ulimits"] == [
        {"name": "memlock", "soft": -1, "hard": -1},
        {"name": "stack", "soft": 67108864, "hard": 67108864},
    ]
    assert inputs["user"] == cfg.serving.user == "1000:1000"
    assert inputs["envs"] == ["HOME=/tmp", "HF_HOME=/tmp/huggingface"]
    assert inputs["volumes"] == [
        {"hostPath": cfg.model.path, "containerPath": "/models/Qwen3.8-27B", "readOnly": True}
    ]
    assert inputs["stopTimeout"] == 30
    assert inputs["destroyGraceSeconds"] == 30
    assert inputs["logDriver"] == "json-file"
    assert inputs["logOpts"] == {"max-size": "100m", "max-file": "10"}
    assert inputs["mustRun"] is True


@pytest.mark.parametrize(
    ("stack_name", "host_name", "ip", "tp", "dp"),
    [("a100", "worker-a", "10.0.0.11", 4, 2), ("a100", "worker-b", "10.0.0.12", 4, 2),
     ("h100", "h100", "10.0.0.21", 2, 4)],
)
def test_worker_container_flag_by_flag(stack_name, host_name, ip, tp, dp) -> None:
    cfg = stack(stack_name)
    name = f"{host_name}-sglang"
    rec = declare(lambda: [SGLangWorker(name, worker_args(cfg, host_name)).url])
    container = rec.named(f"{name}-container")
    inputs = container.inputs
    assert inputs["name"] == f"benchstack-sglang-{host_name}"
    # The seed's flags, and SGLang's metrics for the serving record (serving.enable_metrics).
    assert inputs["command"] == [*seed_argv(ip, tp, dp), "--enable-metrics"]
    assert "--max-total-tokens" not in inputs["command"]
    assert_seed_run_options(inputs, cfg)
    # The image by id, never the tag string.
    assert inputs["image"] == IMAGE_ID
    image = rec.named(f"{name}-image").inputs
    assert image["name"] == cfg.serving.image
    assert image["keepLocally"] is True
    assert image["platform"] == "linux/amd64"
    provider = rec.named(f"{name}-docker").inputs
    assert provider["host"] == f"ssh://bench@{ip}"
    assert "BatchMode=yes" in provider["sshOpts"]


def test_worker_options_order_and_readiness_spec() -> None:
    cfg = stack("a100")
    rec = declare(lambda: [SGLangWorker("w", worker_args(cfg, "worker-a")).url])
    container_opts = rec.opts("w-container")
    assert container_opts.delete_before_replace is True
    assert container_opts.provider is rec.resource("w-docker")
    # The checkpoint, then the host's GPUs and its container runtime, before the container.
    for step in ("w-model-check", "w-gpu-check", "w-gpu-runtime"):
        assert rec.resource(step) in container_opts.depends_on, step
    assert rec.resource("w-gpu-check") in rec.opts("w-gpu-runtime").depends_on
    assert rec.resource("w-container") in rec.opts("w-ready").depends_on
    for child in ("w-docker", "w-model-check", "w-image", "w-gpu-check", "w-gpu-runtime",
                  "w-container", "w-ready"):
        assert rec.opts(child).parent is rec.resource("w")

    check = rec.named("w-model-check").inputs
    assert step_inputs(check["create"]) == {"model_path": cfg.model.path, "user": "1000:1000"}
    assert "python3 -m hostside model_check create" in check["create"]

    ready = rec.named("w-ready").inputs
    probe = step_inputs(ready["create"])
    spec = probe["spec"]
    assert spec["mode"] == "worker"
    assert spec["url"] == "http://10.0.0.11:30001"
    # Unset in the stack: derived from the model and the layout (27B bf16 read by 2 replicas at
    # 0.2 GB/s, plus the fixed start and the graph capture: 1140 s).
    assert cfg.serving.health_timeout_s is None
    assert spec["timeout_s"] == startup_timeout_s(cfg.serving, cfg.model) == 1140
    assert spec["container"] == "benchstack-sglang-worker-a"  # fail fast if it exits
    assert spec["expect"] == {
        "served_model_name": "Qwen/Qwen3.8-27B", "tp_size": 4, "dp_size": 2,
        "context_length": 262144, "max_running_requests": 5, "max_mamba_cache_size": 25,
        "mem_fraction_static": 0.9, "reasoning_parser": "qwen3", "tool_call_parser": "qwen3_coder",
        "enable_metrics": True,
    }
    # The probe runs readiness.py from the host code: its digest is in the command.
    assert "python3 -m hostside serving_probe create" in ready["create"]
    assert "hostside/readiness.py" in module_closure("serving_probe")
    assert ready["create"].endswith(f"# code {code_digest(module_closure('serving_probe'))}")
    # Every value from the config: no python of its own (a venv under the workspace), the
    # pip arguments, and a backstop above the probe's own bound.
    assert probe["python"] is None and probe["pip_args"] == []
    assert probe["venvs_dir"] == f"{cfg.workspace}/.benchstack"
    assert probe["hard_timeout_s"] == 1140 + 600


def test_worker_outputs() -> None:
    cfg = stack("a100")
    results: dict = {}

    def build():
        w = SGLangWorker("w", worker_args(cfg, "worker-b"))
        return [
            w.url.apply(lambda v: results.__setitem__("url", v)),
            w.server_info.apply(lambda v: results.__setitem__("server_info", v)),
            w.container_id.apply(lambda v: results.__setitem__("container_id", v)),
        ]

    declare(build)
    assert results["url"] == "http://10.0.0.12:30001"
    assert results["server_info"]["tp_size"] == 4
    assert results["container_id"] == "w-container-id"


def test_max_total_tokens_only_when_configured() -> None:
    cfg = stack("a100")
    rec = declare(lambda: [SGLangWorker("w", worker_args(cfg, "worker-a",
                                                          max_total_tokens=300000)).url])
    command = rec.named("w-container").inputs["command"]
    assert command[-3:] == ["--max-total-tokens", "300000", "--enable-metrics"]
    spec = step_inputs(rec.named("w-ready").inputs["create"])["spec"]
    assert spec["expect"]["max_total_tokens"] == 300000


def test_unset_optional_flags_are_left_out() -> None:
    cfg = stack("a100")
    args = worker_args(cfg, "worker-a", max_mamba_cache_size=None, reasoning_parser=None,
                       tool_call_parser=None)
    rec = declare(lambda: [SGLangWorker("w", args).url])
    command = rec.named("w-container").inputs["command"]
    for flag in ("--max-mamba-cache-size", "--reasoning-parser", "--tool-call-parser"):
        assert flag not in command
    spec = step_inputs(rec.named("w-ready").inputs["create"])["spec"]
    assert set(spec["expect"]).isdisjoint({"max_mamba_cache_size", "reasoning_parser",
                                           "tool_call_parser"})


def test_image_archive_route_uses_the_loaded_image_id() -> None:
    cfg = stack("a100")
    args = worker_args(cfg, "worker-a", image_archive="/data/sglang.tar")
    rec = declare(lambda: [SGLangWorker("w", args).url])
    assert not rec.of_type("docker:index/remoteImage:RemoteImage")
    load = rec.named("w-image-load").inputs
    assert step_inputs(load["create"]) == {"archive": "/data/sglang.tar",
                                           "image": cfg.serving.image}
    assert "python3 -m hostside serving_image create" in load["create"]
    assert rec.named("w-container").inputs["image"] == "sha256:" + "cd" * 32


def test_s3_staging_runs_before_the_check_with_secret_credentials() -> None:
    cfg = stack("a100")
    args = worker_args(
        cfg, "worker-a", s3_uri="s3://models/qwen/Qwen3.8-27B",
        s3_access_key_id=pulumi.Output.secret("AKIA-TEST"),
        s3_secret_access_key=pulumi.Output.secret("very-secret"),
    )
    rec = declare(lambda: [SGLangWorker("w", args).url])
    stage = rec.named("w-model-stage").inputs
    inputs = step_inputs(stage["create"])
    assert inputs == {
        "s3_uri": "s3://models/qwen/Qwen3.8-27B", "model_path": cfg.model.path,
        "region": cfg.model.s3_region, "endpoint_url": None, "python": None,
        "venvs_dir": f"{cfg.workspace}/.benchstack", "pip_args": [],
    }
    # Credentials travel on the step's stdin, never in its arguments (readable in `ps`).
    assert is_secret(stage["stdin"])  # never in plain state
    assert json.loads(stage["stdin"]["value"]) == {"aws_access_key_id": "AKIA-TEST",
                                                   "aws_secret_access_key": "very-secret"}
    # The command itself holds no secret, so it stays plain (diffs show it).
    assert not is_secret(stage["create"]) and "very-secret" not in stage["create"]
    assert stage["logging"] == "none"  # nor in the logs
    assert rec.resource("w-model-stage") in rec.opts("w-model-check").depends_on


def test_s3_staging_without_credentials_uses_boto3s_chain() -> None:
    cfg = stack("a100")
    args = worker_args(cfg, "worker-a", s3_uri="s3://models/q", stage_python="/opt/py/bin/python",
                       pip_args=["--index-url", "http://127.0.0.1:3141/simple"])
    rec = declare(lambda: [SGLangWorker("w", args).url])
    stage = rec.named("w-model-stage").inputs
    inputs = step_inputs(stage["create"])
    assert inputs["aws_access_key_id"] is None and inputs["aws_secret_access_key"] is None
    assert inputs["python"] == "/opt/py/bin/python"
    assert inputs["pip_args"] == ["--index-url", "http://127.0.0.1:3141/simple"]
    assert "stdin" not in stage and "logging" not in stage


def test_the_components_need_the_workspace() -> None:
    """Their venvs are cached in benchstack's own directory there (the host's last delete
    removes it)."""
    cfg = stack("a100")
    with pytest.raises(ValueError, match="SGLangWorkerArgs.workspace"):
        declare(lambda: [SGLangWorker("w", worker_args(cfg, "worker-a", workspace=None)).url])
    with pytest.raises(ValueError, match="RouterArgs.workspace"):
        declare(lambda: [Router("r", router_args(cfg, ["http://10.0.0.11:30001"],
                                                 workspace=None)).router_url])


def test_no_s3_no_staging() -> None:
    cfg = stack("a100")
    rec = declare(lambda: [SGLangWorker("w", worker_args(cfg, "worker-a")).url])
    assert not [r for r in rec.records if r.name == "w-model-stage"]


@pytest.mark.parametrize(
    ("edit", "key"),
    [(("serving", "tp_size", 0), "benchstack:serving.tp_size"),
     (("serving", "user", "bench"), "benchstack:serving.user"),
     (("model", "path", "models/q"), "benchstack:model.path"),
     (("serving", "mem_fraction_static", 1.5), "benchstack:serving.mem_fraction_static"),
     (("hosts", 0, "private_ip", "0.0.0.0"), "benchstack:hosts[0].private_ip"),
     (("model", "s3_uri", "models/q"), "benchstack:model.s3_uri")],
)
def test_bad_worker_settings_are_rejected_at_load(edit, key) -> None:
    """What the worker cannot run with never reaches it: the config names the key."""
    values, _ = split_stack_file(ROOT / "Pulumi.a100.yaml")
    *path, value = edit
    node = values
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    with pytest.raises(ConfigError, match=re.escape(key)):
        parse_stack_config(values)


# a100 is the seed's run: its own gateway; h100 takes the default, smg (the same flags, with
# smg's overload protection off as router.worker_overload_protection decides).
GATEWAY_ARGV = {
    "a100": (["python3", "-m", "sglang_router.launch_router"], [], "sglang-router", "0.3.2"),
    "h100": (["python3", "-m", "smg", "launch"], ["--disable-worker-overload-protection"], "smg",
             "1.13.0"),
}


@pytest.mark.parametrize("stack_name", ["a100", "h100"])
def test_router_container_flag_by_flag(stack_name) -> None:
    cfg = stack(stack_name)
    urls = [f"http://{h.reach_address}:{cfg.serving.port}" for h in cfg.gpu_hosts]

    def build():
        workers = [SGLangWorker(f"{h.name}-sglang", worker_args(cfg, h.name))
                   for h in cfg.gpu_hosts]
        router = Router("router", router_args(cfg, [w.args.url for w in workers]))
        return [router.router_url, router.worker_urls]

    rec = declare(build)
    inputs = rec.named("router-container").inputs
    launcher, tail, package, version = GATEWAY_ARGV[stack_name]
    assert cfg.router.implementation == package
    assert inputs["command"] == [
        *launcher,
        "--host", "127.0.0.1", "--port", "30000",
        "--worker-urls", *urls,
        "--dp-aware", "--policy", "cache_aware",
        "--balance-abs-threshold", "1", "--balance-rel-threshold", "1.2",
        # Bound on purpose: both gateways' own default is every interface.
        "--prometheus-host", "127.0.0.1", "--prometheus-port", "29000",
        *tail,
    ]
    assert inputs["name"] == "benchstack-sglang-router"
    assert inputs["networkMode"] == "host"
    assert "ipcMode" not in inputs
    assert inputs["ulimits"] == [{"name": "nofile", "soft": 65536, "hard": 65536}]
    assert inputs["user"] == "1000:1000"
    assert inputs["envs"] == ["HOME=/tmp"]
    assert inputs["stopTimeout"] == 180
    assert inputs["destroyGraceSeconds"] == 180
    assert inputs["logOpts"] == {"max-size": "100m", "max-file": "10"}
    assert inputs["image"] == IMAGE_ID
    opts = rec.opts("router-container")
    assert opts.delete_before_replace is True
    assert rec.resource("router-reach") in opts.depends_on
    assert rec.resource("router-container") in rec.opts("router-ready").depends_on

    reach_step = rec.named("router-reach").inputs
    reach = step_inputs(reach_step["create"])
    assert reach["spec"] == {"mode": "reach", "worker_urls": urls, "timeout_s": 60,
                             "interval_s": 2}
    assert reach["hard_timeout_s"] == 60 * len(urls) + 600
    # Another set of workers is another path to prove: the spec is the trigger.
    assert reach_step["triggers"] == [json.dumps(reach["spec"], sort_keys=True)]
    ready = step_inputs(rec.named("router-ready").inputs["create"])["spec"]
    assert ready["mode"] == "router"
    assert ready["url"] == "http://127.0.0.1:30000"
    assert ready["model"] == "Qwen/Qwen3.8-27B"
    assert ready["worker_urls"] == urls
    assert ready["timeout_s"] == cfg.router.health_timeout_s
    assert ready["dp_size"] == cfg.serving.dp_size
    assert ready["container"] == "benchstack-sglang-router"
    # The running gateway is held to its pin, read in the container.
    assert ready["gateway"] == {"package": package, "version": version}
    harbor = cfg.harbor_host
    assert rec.named("router-docker").inputs["host"] == f"ssh://{harbor.user}@{harbor.address}"


def test_router_outputs_and_policy_flags() -> None:
    cfg = stack("a100")
    results: dict = {}

    def build():
        r = Router("r", router_args(cfg, ["http://10.0.0.11:30001/", "http://10.0.0.12:30001"],
                                    dp_aware=False, policy="round_robin",
                                    balance_rel_threshold=1.5, model_path=cfg.model.path))
        return [r.router_url.apply(lambda v: results.__setitem__("router_url", v)),
                r.worker_urls.apply(lambda v: results.__setitem__("worker_urls", v))]

    rec = declare(build)
    assert results == {"router_url": "http://127.0.0.1:30000",
                       "worker_urls": ["http://10.0.0.11:30001", "http://10.0.0.12:30001"]}
    command = rec.named("r-container").inputs["command"]
    assert "--dp-aware" not in command
    assert command[command.index("--policy") + 1] == "round_robin"
    assert command[command.index("--balance-rel-threshold") + 1] == "1.5"
    assert rec.named("r-container").inputs["volumes"] == [
        {"hostPath": cfg.model.path, "containerPath": "/models/Qwen3.8-27B", "readOnly": True}
    ]


def test_router_needs_a_worker() -> None:
    cfg = stack("a100")
    with pytest.raises(ValueError, match="RouterArgs.worker_urls"):
        declare(lambda: [Router("r", router_args(cfg, [])).router_url])


@pytest.mark.parametrize(
    ("section", "field_name", "value"),
    [("router", "policy", "fastest"), ("router", "balance_rel_threshold", 0.5),
     ("serving", "user", "root")],
)
def test_bad_router_settings_are_rejected_at_load(section, field_name, value) -> None:
    values, _ = split_stack_file(ROOT / "Pulumi.a100.yaml")
    values[section][field_name] = value
    with pytest.raises(ConfigError, match=re.escape(f"benchstack:{section}.{field_name}")):
        parse_stack_config(values)


def test_a_second_up_declares_the_same_inputs() -> None:
    """Same config, same inputs, byte for byte: nothing for a second `up` to diff (the engine
    side of it is test_container_readback_real.py)."""
    cfg = stack("a100")

    def build():
        workers = [SGLangWorker(f"{h.name}-sglang", worker_args(cfg, h.name))
                   for h in cfg.gpu_hosts]
        return [Router("router", router_args(cfg, [w.args.url for w in workers])).router_url]

    def snapshot() -> list:
        return sorted(
            (r.type, r.name, json.dumps(r.inputs, sort_keys=True, default=str))
            for r in declare(build).records if r.type != "component"
        )

    first, second = snapshot(), snapshot()
    assert len(first) > 10
    assert first == second


def test_local_host_uses_the_unix_socket_without_ssh() -> None:
    cfg = stack("a100")
    local = Host(name="local", address="local")
    rec = declare(
        lambda: [SGLangWorker("w", worker_args(cfg, "worker-a", host=shipped(local))).url]
    )
    provider = rec.named("w-docker").inputs
    assert provider["host"] == "unix:///var/run/docker.sock"
    assert "sshOpts" not in provider
    assert rec.named("w-ready").type == "command:local:Command"
