"""The resource graph of every shipped stack file, evaluated under Pulumi mocks.

Each test loads a `Pulumi.<stack>.yaml` as-is, runs `__main__.py`, and asserts on what was
declared: which components, how many, their dependency edges, their children's parents, the
stack outputs, and that secrets stay out of plain outputs.
"""

from __future__ import annotations

import functools
import json
import shlex

import pytest

from components.config import load_stack_file
from components.manifest import load_manifest
from components.seam.step import content_hash
from contracts import outputs as keys
from tests.conftest import PROBES, ROOT
from tests.graph.program import ProgramRun, run_program

STACKS = sorted(p.name.split(".")[1] for p in ROOT.glob("Pulumi.*.yaml"))
# The GPU stacks: every host reached over ssh (the local rehearsals run on this machine).
REMOTE_STACKS = [s for s in STACKS if not s.startswith("local")]
K8S_STACKS = [s for s in STACKS
              if load_stack_file(ROOT / f"Pulumi.{s}.yaml").harbor.kubernetes is not None]
SECRETS = {
    "apiKey": "sk-benchstack-test-SECRET",
    "sshPrivateKey": "-----KEY-SECRET-----",
    # Read only by stacks whose trials are pods (harbor.environment kubernetes).
    "kubeconfig": json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:16443"}}],
        "users": [{"name": "u", "user": {"token": "k8s-token-SECRET"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }),
}

COMPONENT = "benchstack:components:"


@functools.cache
def program(stack: str) -> ProgramRun:
    return run_program(stack, secrets=SECRETS)


def components(run: ProgramRun, kind: str):
    return [d for d in run.declared if d.type == COMPONENT + kind]


@pytest.mark.parametrize("stack", STACKS)
def test_component_counts(stack):
    cfg = load_stack_file(ROOT / f"Pulumi.{stack}.yaml")
    run = program(stack)
    on_host = cfg.harbor.kubernetes is None
    expected = {
        "DockerDaemonConfig": len(cfg.docker_hosts),
        "SGLangWorker": len(cfg.gpu_hosts),
        "Router": 1 if cfg.gpu_hosts else 0,
        "ImageSet": 1 if on_host else 0,
        "ToolBundle": 1 if on_host else 0,
        "ProxyBridge": 1 if cfg.proxy else 0,
        "TrialNamespace": 0 if on_host else 1,
        "HarborJob": 1,
    }
    got = {kind: len(components(run, kind)) for kind in expected}
    assert got == expected


@pytest.mark.parametrize("stack", STACKS)
def test_every_child_has_a_component_parent(stack):
    run = program(stack)
    for declared in run.declared:
        if declared.type.startswith(COMPONENT) or declared.type == "pulumi:pulumi:Stack":
            continue
        assert declared.parent is not None, f"{declared.type} {declared.name} has no parent"
        assert declared.parent.__class__.__module__.startswith("components."), declared.name
        parent_name = next(d.name for d in run.declared if d.resource is declared.parent)
        assert declared.name.startswith(parent_name), (declared.name, parent_name)


@pytest.mark.parametrize("stack", STACKS)
def test_dependency_edges(stack):
    cfg = load_stack_file(ROOT / f"Pulumi.{stack}.yaml")
    run = program(stack)
    daemons = {d.name: d.resource for d in components(run, "DockerDaemonConfig")}
    harbor_daemon = daemons.get(f"{cfg.harbor_host.name}-docker-daemon")
    # The Harbor host's daemon is the stack's exactly when the trials are containers there.
    assert (harbor_daemon is None) == (cfg.harbor.kubernetes is not None)

    workers = components(run, "SGLangWorker")
    for worker in workers:
        host = worker.name.removesuffix("-sglang")
        assert daemons[f"{host}-docker-daemon"] in worker.depends_on, worker.name

    job = components(run, "HarborJob")[0]
    steps = {d.name: d for d in run.children(job.name)}
    needed = [c.resource for kind in ("ImageSet", "ToolBundle", "ProxyBridge", "Router",
                                      "TrialNamespace")
              for c in components(run, kind)]
    # The component itself waits for nothing (its children could not register before what it
    # waits for is done): the steps that read the planes wait for them, Harbor's install does not.
    assert job.depends_on == []
    for resource in needed:
        assert resource in steps["job-preflight"].depends_on, type(resource).__name__
        assert resource not in steps["job-install"].depends_on, type(resource).__name__

    for router in components(run, "Router"):
        for worker in workers:
            assert worker.resource in router.depends_on

    for images in components(run, "ImageSet"):
        assert harbor_daemon in images.depends_on


@pytest.mark.parametrize("stack", STACKS)
def test_stack_outputs(stack):
    cfg = load_stack_file(ROOT / f"Pulumi.{stack}.yaml")
    run = program(stack)
    for key in (keys.ROUTER_URL, keys.WORKER_URLS, keys.HARBOR_HOST, keys.JOB_NAME,
                keys.JOBS_DIR, keys.JOB_LOG, keys.TOOLS_DIR, keys.PROXY_URL, keys.JOB_DIR):
        assert key in run.exports, key
    assert run.exports[keys.HARBOR_HOST] == cfg.harbor_host.name
    assert run.exports[keys.JOBS_DIR].startswith(cfg.workspace)
    assert run.exports[keys.TRIALS_ENVIRONMENT] == cfg.harbor.environment.kind
    if cfg.harbor.kubernetes is None:
        assert run.exports[keys.TOOLS_DIR].startswith(cfg.workspace)
        assert run.exports[keys.K8S_NAMESPACE] is None
    else:
        # No bundle to mount into pods; the namespace is the stack's.
        assert run.exports[keys.TOOLS_DIR] is None
        assert run.exports[keys.K8S_NAMESPACE] == cfg.harbor.kubernetes.namespace
    if cfg.gpu_hosts:
        assert run.exports[keys.ROUTER_URL] == f"http://127.0.0.1:{cfg.router.port}"
        assert run.exports[keys.WORKER_URLS] == [
            f"http://{h.reach_address}:{cfg.serving.port}" for h in cfg.gpu_hosts
        ]
    else:
        assert run.exports[keys.ROUTER_URL] is None and run.exports[keys.WORKER_URLS] == []


@pytest.mark.parametrize("stack", STACKS)
def test_secrets_stay_secret(stack):
    run = program(stack)
    for key, value in run.exports.items():
        text = repr(value)
        for secret in SECRETS.values():
            assert secret not in text, f"output {key} carries a secret"
        # An output derived from a secret is shown as [secret] to the audit: none may be.
        assert run.secret_exports[key] is False, f"output {key} is tainted by a secret"
    commands = run.of_type("command:local:Command") + run.of_type("command:remote:Command")
    for command in commands:
        for field in ("create", "delete", "triggers", "environment"):
            # Arguments are readable by anyone on the host: secrets go through stdin only.
            assert SECRETS["apiKey"] not in str(command.inputs.get(field)), (command.name, field)
    fed = [c for c in commands if SECRETS["apiKey"] in str(c.inputs.get("stdin", ""))]
    assert fed, "the API key reaches the Harbor launch script"
    for command in fed:
        assert command.inputs.get("logging") == "none", command.name


def test_local_serves_through_the_same_components_on_the_unix_socket():
    """The rehearsal's serving plane: one SGLangWorker and the Router, as on a GPU stack, on the
    local engine's socket; what a CPU host forces is config (no `gpus`, the stand-in image)."""
    run = program("local")
    providers = run.of_type("pulumi:providers:docker")
    assert providers and {p.inputs["host"] for p in providers} == {"unix:///var/run/docker.sock"}
    assert run.of_type("command:remote:Command") == []
    assert len(components(run, "SGLangWorker")) == 1 and len(components(run, "Router")) == 1
    worker = run.named("local-sglang-container").inputs
    assert "gpus" not in worker, "a CPU host's worker asks for no GPU"
    assert worker["command"][:2] == ["sglang", "serve"]
    assert worker["command"][worker["command"].index("--dp-size") + 1] == "2"
    mounts = worker["volumes"]
    assert mounts[0]["hostPath"] == str(ROOT / "demo" / "model") and mounts[0]["readOnly"]
    router = run.named("router-container").inputs
    assert "http://127.0.0.1:30001" in router["command"]
    assert "--dp-aware" in router["command"]
    images = {r.inputs["name"] for r in run.of_type("docker:index/remoteImage:RemoteImage")}
    assert images == {"127.0.0.1:5000/benchstack/sglang-standin:0.3.2"}


@pytest.mark.parametrize("stack", REMOTE_STACKS)
def test_gpu_stacks_name_a_docker_provider_per_host(stack):
    run = program(stack)
    providers = run.of_type("pulumi:providers:docker")
    assert providers, "no explicit docker provider"
    for provider in providers:
        assert provider.inputs["host"].startswith("ssh://"), provider.inputs
    for registration in run.registrations:
        if registration.type.startswith("docker:"):
            assert registration.provider, f"{registration.name} uses a default provider"
    # Only the copies of the host code run here (tar piped to the host over ssh).
    hosts = [h.name for h in load_stack_file(ROOT / f"Pulumi.{stack}.yaml").hosts]
    local = [r.name for r in run.of_type("command:local:Command")]
    assert sorted(local) == sorted(f"{h}-code-copy" for h in hosts), "a script ran locally"
    for reg in run.of_type("command:local:Command"):
        create = reg.inputs["create"]
        assert "| ssh " in (create["value"] if isinstance(create, dict) else create), reg.name


@pytest.mark.parametrize("stack", REMOTE_STACKS)
def test_gpu_stacks_prove_the_proxy_from_a_task_image(stack):
    cfg = load_stack_file(ROOT / f"Pulumi.{stack}.yaml")
    run = program(stack)
    (socat,) = [r for r in run.registrations if r.name == "proxy-socat"]
    inputs = step_inputs(socat.inputs["create"])
    assert inputs["check_url"] == cfg.proxy.check_url
    canary = load_manifest(ROOT / cfg.dataset.manifest_path).images[0].image
    assert inputs["check_image"] == canary


def step_inputs(create) -> dict:
    """The inputs a host step's command gives its module (components/seam/step.py, render_step)."""
    text = create["value"] if isinstance(create, dict) else create
    inner = shlex.split(text)[2]
    for line in inner.splitlines():
        if line.startswith("export BENCHSTACK_INPUTS="):
            return json.loads(shlex.split(line)[1].partition("=")[2])
    raise AssertionError(f"not a host step: {text[:200]}")


@pytest.mark.parametrize("stack", STACKS)
def test_commands_are_safe_under_replacement_and_upgrade(stack):
    """pulumi-command's rules: only `triggers` replace, new first and old deleted after unless
    delete_before_replace. Every command with a delete runs it before its replacement (the old
    delete would undo the new create), and no trigger is a script's text: an edited script (an
    upgrade of benchstack) is an update that re-runs the create and deletes nothing."""
    options = {}
    run = run_program(stack, secrets=SECRETS,
                      on_declare=lambda d, opts: options.__setitem__(d.name, opts))
    script_hashes = {content_hash(p.read_text()) for p in PROBES.glob("*.sh")}
    commands = [r for r in run.registrations if r.type.startswith("command:")
                and r.type.endswith(":Command")]
    assert commands
    for reg in commands:
        if reg.inputs.get("delete"):
            opts = options[reg.name]
            assert opts is not None and opts.delete_before_replace, reg.name
        assert not script_hashes & set(map(str, reg.inputs.get("triggers") or [])), reg.name


@pytest.mark.parametrize("stack", STACKS)
def test_host_plane_steps_take_their_inputs_from_the_config(stack):
    """The daemon config, tool bundle and proxy bridge steps: their modules' inputs are the
    config's values, and each delete gets what it needs (the daemon config: the same inputs)."""
    cfg = load_stack_file(ROOT / f"Pulumi.{stack}.yaml")
    run = program(stack)
    for host in cfg.docker_hosts:
        step = run.named(f"{host.name}-docker-daemon-apply").inputs
        assert step_inputs(step["create"]) == {
            "daemon_json": cfg.docker.daemon_json,
            "address_pools": [p.model_dump() for p in cfg.docker.address_pools],
            "restart_command": cfg.docker.restart_command,
            "allow_restart_with_running_containers":
                cfg.docker.allow_restart_with_running_containers,
            "proof_networks": cfg.docker.proof_networks, "docker_host": "",
        }
        assert step_inputs(step["delete"]) == step_inputs(step["create"])
        assert "hostside daemon_config delete" in str(step["delete"])
    if cfg.harbor.kubernetes is not None:
        return  # no bundle, no bridge: test_kubernetes_stack_declares_the_namespace
    tools = run.named("tools-build").inputs
    built = step_inputs(tools["create"])
    assert built["asciinema_sha256"] == cfg.tools.asciinema_sha256
    assert built["canary_image"] == (cfg.tools.canary_image
                                     or load_manifest(ROOT / cfg.dataset.manifest_path)
                                     .images[0].image)
    assert step_inputs(tools["delete"]) == {"tools_dir": built["tools_dir"]}
    if cfg.proxy:
        socat = run.named("proxy-socat").inputs
        bridge = step_inputs(socat["create"])
        assert (bridge["upstream"], bridge["bridge_port"], bridge["bind_address"]) == (
            cfg.proxy.upstream, cfg.proxy.bridge_port, cfg.proxy.bind_address)
        assert step_inputs(socat["delete"]) == {"name": bridge["name"],
                                                "state_dir": bridge["state_dir"]}


@pytest.mark.parametrize("stack", K8S_STACKS)
def test_kubernetes_stack_declares_the_namespace(stack):
    """Trials as pods: the namespace, its quota and the controller's rights on the cluster
    through an explicit provider holding the stack's kubeconfig; Harbor runs `ack` there with
    a kubeconfig of its own (the cluster-access step), after the cluster preflight with the
    task images; nothing of the Docker host's plane; the kubeconfig never in plain text."""
    cfg = load_stack_file(ROOT / f"Pulumi.{stack}.yaml")
    k8s = cfg.harbor.kubernetes
    run = program(stack)
    (namespace,) = run.of_type("kubernetes:core/v1:Namespace")
    assert namespace.inputs["metadata"]["name"] == k8s.namespace
    assert namespace.provider and "trials-cluster" in namespace.provider
    (quota,) = run.of_type("kubernetes:core/v1:ResourceQuota")
    hard = quota.inputs["spec"]["hard"]
    assert hard["requests.cpu"] == k8s.quota.cpu and hard["requests.memory"] == k8s.quota.memory
    (role,) = run.of_type("kubernetes:rbac.authorization.k8s.io/v1:Role")
    verbs = {r["resources"][0]: set(r["verbs"]) for r in role.inputs["rules"]}
    assert {"create", "delete", "watch"} <= verbs["pods"] and "create" in verbs["pods/exec"]
    assert run.of_type("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
    for registration in run.registrations:
        if registration.type.startswith("kubernetes:"):
            assert registration.provider, f"{registration.name} uses a default provider"

    access = step_inputs(run.named("job-cluster-access").inputs["create"])
    assert access["namespace"] == k8s.namespace and "kubeconfig" not in access
    preflight = step_inputs(run.named("job-cluster-preflight").inputs["create"])
    manifest = load_manifest(ROOT / cfg.dataset.manifest_path)
    assert preflight["images"] == manifest.as_dict()
    assert preflight["registry"] == k8s.registry
    assert preflight["kubeconfig"] == access["out_path"]
    config = step_inputs(run.named("job-configs").inputs["create"])["job_config_yaml"]
    assert "type: ack" in config and f"namespace: {k8s.namespace}" in config
    assert f"kubeconfig: {access['out_path']}" in config
    launch = step_inputs(run.named("job-launch").inputs["create"])
    assert launch["k8s_watch"] == {"kubeconfig": access["out_path"],
                                   "namespace": k8s.namespace}
    install = step_inputs(run.named("job-install").inputs["create"])
    assert install["extras"] == [k8s.client]

    for registration in run.registrations:
        plain = {k: v for k, v in registration.inputs.items() if k != "stdin"}
        if registration.type == "pulumi:providers:kubernetes":
            continue  # its kubeconfig input is the secret itself
        assert "k8s-token-SECRET" not in str(plain), registration.name


@pytest.mark.parametrize("stack", STACKS)
def test_every_gpu_host_checks_its_gpus_and_runtime_before_its_worker(stack):
    """components/gpu_plane.py on every GPU host: the GPU check where the worker gets GPUs or
    the host declares them, the runtime check where the worker gets GPUs, both before the
    container. Both are command resources (run by `up` when created or updated, never by a
    preview), not program-time probes."""
    cfg = load_stack_file(ROOT / f"Pulumi.{stack}.yaml")
    run = program(stack)
    for host in cfg.gpu_hosts:
        worker = f"{host.name}-sglang"
        children = {d.name: d for d in run.children(worker)}
        gets_gpus = cfg.serving.gpus is not None
        steps = ([f"{worker}-gpu-check"] if gets_gpus or host.gpus else []) + (
            [f"{worker}-gpu-runtime"] if gets_gpus else [])
        assert sorted(n for n in children if "-gpu-" in n) == sorted(steps)
        container = children[f"{worker}-container"]
        for step in steps:
            assert children[step].resource in container.depends_on, (worker, step)
            assert children[step].type.startswith("command:"), step
        if steps:
            inputs = step_inputs(run.named(steps[0]).inputs["create"])
            assert inputs["needed"] == cfg.serving.tp_size * cfg.serving.dp_size
            assert inputs["model"] == (host.gpus.model if host.gpus else None)
