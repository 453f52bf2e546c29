"""A test program run by the real engine in place of the project's `__main__.py`: the serving
plane alone, through the project's own components, on two hosts that are this machine: `local`
(the Docker provider on the unix socket) and `loop`, the test sshd on 127.0.0.1 (the Docker
provider over ssh://, commands over SSH, the stack's host-key policy). One SGLangWorker on each,
the Router in front of both on `local`, from the local stack's serving, model and router
sections (tests/engine/test_docker_provider.py).

Test config (namespace `test`): `workspace` (local host), `loopWorkspace`, `loopPort`, `knownHosts`,
`keyPath` (the loop host's key file, for the Docker provider's ssh), `sshKey` (secret: the same
key, for commands over SSH), `loopMaxRunning` (that worker's max_running_requests, to change
one worker's flag).
"""

from __future__ import annotations

from pathlib import Path

import pulumi

from components.config import load_pulumi_config
from components.host_code import HostCode, HostCodeArgs
from components.router import Router, RouterArgs
from components.seam.host import Host
from components.sglang_worker import SGLangWorker, SGLangWorkerArgs

# This file runs as the project copy's __main__.py.
ROOT = Path(__file__).resolve().parent

cfg, _ = load_pulumi_config()
test = pulumi.Config("test")
if cfg.serving is None or cfg.model is None or cfg.router is None:
    raise pulumi.RunError("the serving program needs the local stack's serving sections")
model_path = str(ROOT / cfg.model.path)

local = HostCode("local-code", HostCodeArgs(
    host=Host(name="local", address="local"), workspace=test.require("workspace"))).host
loop = HostCode("loop-code", HostCodeArgs(
    host=Host(name="loop", address="127.0.0.1", port=test.require_int("loopPort"), user="root",
              private_key=test.require_secret("sshKey"), key_path=test.require("keyPath"),
              known_hosts=test.require("knownHosts")),
    workspace=test.require("loopWorkspace"))).host

workers = []
for host, port, serving in (
    (local, 30011, cfg.serving),
    (loop, 30012, cfg.serving.model_copy(
        update={"max_running_requests": test.get_int("loopMaxRunning") or 4})),
):
    workers.append(SGLangWorker(f"{host.name}-sglang", SGLangWorkerArgs(
        host=host, serving=serving, model=cfg.model.model_copy(update={"path": model_path}),
        bind_host="127.0.0.1", port=port, container_name=f"benchstack-test-sglang-{host.name}",
        workspace=test.require("workspace" if host is local else "loopWorkspace"),
    )))
router = Router("router", RouterArgs(
    # Its own ports: a local stack running beside it binds the default ones (30000, 29000).
    host=local, router=cfg.router.model_copy(update={"port": 30010, "metrics_port": 29010}),
    serving=cfg.serving,
    model=cfg.model.model_copy(update={"path": model_path}),
    worker_urls=[w.args.url for w in workers], container_name="benchstack-test-sglang-router",
    workspace=test.require("workspace")),
    opts=pulumi.ResourceOptions(depends_on=workers))

pulumi.export("router_url", router.router_url)
pulumi.export("worker_urls", [w.url for w in workers])
pulumi.export("server_info", [w.server_info for w in workers])
pulumi.export("image_ids", [w.image_id for w in workers])
