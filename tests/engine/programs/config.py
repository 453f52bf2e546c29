"""A test program run by the real engine in place of the project's `__main__.py`: it loads the
stack config exactly as the project does and exports what it read, and the raw strings the CLI
handed over (tests/engine/test_cli.py)."""

from __future__ import annotations

import hashlib

import pulumi
from pulumi.runtime.config import CONFIG

from components.config import NAMESPACE, load_pulumi_config

cfg, secrets = load_pulumi_config()
pulumi.export("decoded", cfg.model_dump(mode="json"))
# What the engine handed the language runtime, before any decoding of ours.
raw = {k: v for k, v in CONFIG.get().items() if k.startswith(f"{NAMESPACE}:")}
pulumi.export("raw", {k: v for k, v in raw.items() if k != f"{NAMESPACE}:sshPrivateKey"})
if secrets.ssh_private_key is not None:
    pulumi.export("ssh_key", secrets.ssh_private_key)
    pulumi.export(
        "ssh_key_sha256",
        pulumi.Output.unsecret(secrets.ssh_private_key).apply(
            lambda k: hashlib.sha256(k.encode()).hexdigest()
        ),
    )
