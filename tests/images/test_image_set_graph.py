"""ImageSet in the graph, with Pulumi mocks: what it declares and what it hands the host seam.

The mock monitor records the raw registration requests, so the tests see what the engine
would: the rendered script, its triggers, and whether the password travels only as a secret.
"""

from __future__ import annotations

import json
import shlex

import pulumi
import pytest
from google.protobuf import json_format
from pulumi.runtime.mocks import MockMonitor

from components.config import ImagesConfig
from components.image_set import (
    HARBOR_0_21_0_SIDECAR_IMAGE,
    ImageSet,
    ImageSetArgs,
    RegistryCredentials,
)
from components.manifest import load_manifest
from components.seam.code import code_digest, module_closure
from components.seam.host import Host
from tests.conftest import TB21_TASKS
from tests.graph.program import shipped
from tests.harbor.conftest import called_module, step_inputs

SECRET_SIG = "4dabf18193072939515e22adb298388d"
PASSWORD = "hunter2-" + "x" * 12
MANIFEST = load_manifest(TB21_TASKS)


class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        state = dict(args.inputs)
        if args.typ == "command:local:Command":
            digests = {image: "sha256:" + "ab" * 32 for image in MANIFEST.image_names}
            out = {
                "ready": 89,
                "total": 89,
                "pulled": 0,
                "present": 89,
                "digests": digests,
                "repo_digests": {},
                "sidecar": {"status": "present", "image": "x"},
            }
            state["stdout"] = "progress is on stderr\n" + json.dumps(out)
            state["stderr"] = ""
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class RecordingMonitor(MockMonitor):
    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.registered: list = []
        self.outputs: list = []

    def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
        self.registered.append(request)
        return super().RegisterResource(request)

    def RegisterResourceOutputs(self, request):  # noqa: N802
        self.outputs.append(request)
        return super().RegisterResourceOutputs(request)


@pytest.fixture
def monitor() -> RecordingMonitor:
    mocks = Mocks()
    mon = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="benchstack", stack="test", preview=False, monitor=mon)
    return mon


def as_dict(struct) -> dict:
    return json_format.MessageToDict(struct)


def unwrap(value):
    """A property value with secrets replaced by '<secret>' (what plain state would show)."""
    if isinstance(value, dict):
        if value.get(SECRET_SIG) == "1b47061264138c4ac30d75fd1eb44270":
            return "<secret>"
        return {k: unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    return value


def args(**overrides) -> ImageSetArgs:
    """The images section and the Args; `overrides` go to whichever has the key."""
    images = {"mirror": "127.0.0.1:5000", "concurrency": 3, "retries": 2, "pin_digests": True}
    base = {
        "host": shipped(Host(name="harbor", address="local")),
        "manifest": MANIFEST,
        "credentials": RegistryCredentials(
            username="bench", password=pulumi.Output.secret(PASSWORD)
        ),
    }
    for key, value in overrides.items():
        (images if key in ImagesConfig.model_fields else base)[key] = value
    return ImageSetArgs(images=ImagesConfig(**images), **base)


@pulumi.runtime.test
def test_one_pull_command_with_the_rendered_manifest(monitor: RecordingMonitor):
    images = ImageSet("tb21", args())

    def check(values):
        ready, digests, manifest, sidecar = values
        commands = [r for r in monitor.registered if r.type == "command:local:Command"
                    and not r.name.endswith("-code-copy")]
        assert [c.name for c in commands] == ["tb21-pull"]
        component = next(r for r in monitor.registered if r.name == "tb21")
        assert component.type == "benchstack:components:ImageSet"
        assert commands[0].parent.endswith("::tb21")
        inputs = as_dict(commands[0].object)
        create = inputs["create"]
        # The command holds no secret (the password travels on stdin): it is plain, and shows
        # in `preview --diff`.
        assert isinstance(create, str) and PASSWORD not in create
        given = step_inputs(create)
        assert given["images"] == list(MANIFEST.image_names)
        assert "regex-log" in given["no_network_tasks"]
        # Every value from the images section, once (the host module defaults nothing).
        assert (given["mirror"], given["concurrency"], given["retries"]) == ("127.0.0.1:5000", 3, 2)
        assert given["retry_backoff_s"] == ImagesConfig().retry_backoff_s
        assert given["pull_timeout_s"] == ImagesConfig().pull_timeout_s
        assert given["scratch_dir"] == ImagesConfig().scratch_dir == "/var/tmp"
        assert (given["pin_digests"], given["require_sidecar"]) == (True, True)
        assert given["sidecar_image"] == HARBOR_0_21_0_SIDECAR_IMAGE
        assert given["registry_username"] == "bench" and "registry_password" not in given
        # The host runs hostside/image_set.py (and its pull engine) from the host code: the
        # command names their digest, so an edit of either is an update of this step.
        argv = shlex.split(create)
        assert argv[:2] == ["bash", "-c"] and called_module(create) == "image_set create"
        assert create.endswith(f"# code {code_digest(module_closure('image_set'))}")
        assert {"hostside/image_pull.py", "hostside/image_sidecar.py"} <= set(
            module_closure("image_set"))
        # A new manifest re-pulls (a replace); an edited script only re-runs (an update).
        assert inputs["triggers"] == [MANIFEST.content_hash()]
        # Output values parsed from the script's last stdout line.
        assert ready == 89 and len(digests) == 89 and sidecar == "present"
        assert manifest == MANIFEST.as_dict()

    return pulumi.Output.all(
        images.images_ready, images.image_digests, images.manifest, images.sidecar_status
    ).apply(check)


@pulumi.runtime.test
def test_password_only_travels_as_a_secret(monitor: RecordingMonitor):
    images = ImageSet("tb21", args())

    def check(_):
        command = next(r for r in monitor.registered if r.type == "command:local:Command"
                       and not r.name.endswith("-code-copy"))
        inputs = as_dict(command.object)
        assert inputs["logging"] == "none", "stdout/stderr logging must be off with a secret"
        assert {"stdout", "stderr"} <= set(command.additionalSecretOutputs)
        for request in monitor.registered:
            assert PASSWORD not in json.dumps(unwrap(as_dict(request.object)))
        for request in monitor.outputs:
            assert PASSWORD not in json.dumps(unwrap(as_dict(request.outputs)))

    return images.images_ready.apply(check)


@pulumi.runtime.test
def test_without_credentials_nothing_is_secret_and_manifest_hash_is_exported(
    monitor: RecordingMonitor,
):
    images = ImageSet(
        "plain",
        args(credentials=None, pin_digests=False, require_sidecar=False, rerun_token="2026-11-30"),
    )

    def check(values):
        manifest_hash, _ = values
        command = next(r for r in monitor.registered if r.type == "command:local:Command"
                       and not r.name.endswith("-code-copy"))
        create = as_dict(command.object)["create"]
        given = step_inputs(create)
        assert given["registry_username"] is None and given["registry_password"] is None
        assert (given["require_sidecar"], given["pin_digests"]) == (False, False)
        assert "stdin" not in as_dict(command.object), "no secret: nothing on standard input"
        assert manifest_hash == MANIFEST.content_hash()
        assert as_dict(command.object)["triggers"][-1] == "2026-11-30"

    # images_ready resolves only after the command is registered.
    return pulumi.Output.all(images.manifest_hash, images.images_ready).apply(check)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("concurrency", 0, "concurrency"),
        ("retries", -1, "retries"),
        ("mirror", "http://127.0.0.1:5000", "mirror"),
        ("harbor_python", "venv/bin/python", "ImageSetArgs.harbor_python"),
        ("manifest", MANIFEST.model_copy(update={"images": []}), "ImageSetArgs.manifest"),
    ],
)
def test_bad_args_name_the_field(monitor: RecordingMonitor, field: str, value, message: str):
    """The images section rejects its own bad values (naming the field); the Args only what
    comes from elsewhere."""
    with pytest.raises(ValueError, match=message):
        ImageSet("bad", args(**{field: value}))
