"""Task images that run as a user other than root, as a dataset's Dockerfile makes them.

- `uid`: `USER 1000:1000`, a uid with no passwd entry: Docker gives it HOME=/, so it can write
  nothing of its own but /tmp (and what a trial mounts for it);
- `named`: a user `agent` (uid 1001) with a passwd entry and a writable home.

Built from the canary (glibc, no tmux, no python) and the static image (no glibc, no locales) by
a real Dockerfile with the classic builder (this engine has no buildx), tagged with a hash of
the base image and the Dockerfile, so each is built once per machine.
"""

from __future__ import annotations

import hashlib
import os
import subprocess

from tests.conftest import docker

# The uid each kind runs as.
UIDS = {"uid": 1000, "named": 1001}
BODIES = {
    "uid": "USER 1000:1000\n",
    "named": (
        "RUN echo 'agent:x:1001:1001:agent:/home/agent:/bin/bash' >>/etc/passwd \\\n"
        "  && echo 'agent:x:1001:' >>/etc/group \\\n"
        "  && mkdir -p /home/agent && chown 1001:1001 /home/agent\n"
        "USER agent\n"
        "WORKDIR /home/agent\n"
    ),
}


def user_image(base: str, kind: str) -> str:
    """`base` run as the `kind` user; its tag."""
    base_id = docker("image", "inspect", "--format", "{{.Id}}", base).stdout.strip()
    dockerfile = f"FROM {base}\n{BODIES[kind]}"
    digest = hashlib.sha256(f"{base_id}\n{dockerfile}".encode()).hexdigest()[:12]
    tag = f"benchstack/user-{kind}:{digest}"
    if docker("image", "inspect", tag, check=False).returncode == 0:
        return tag
    built = subprocess.run(
        ["docker", "build", "-q", "-t", tag, "-"], input=dockerfile, capture_output=True,
        text=True, timeout=300, env={**os.environ, "DOCKER_BUILDKIT": "0"},
    )
    if built.returncode != 0:
        raise AssertionError(f"docker build of {tag} failed: {built.stderr[-2000:]}")
    user = docker("image", "inspect", "--format", "{{.Config.User}}", tag).stdout.strip()
    if user != {"uid": "1000:1000", "named": "agent"}[kind]:
        raise AssertionError(f"{tag} runs as {user!r}")
    return tag
