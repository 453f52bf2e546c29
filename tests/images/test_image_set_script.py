"""The image_set step for real: own docker-registry on loopback as the mirror, the real engine.

Each test pushes its own canary-derived images under a unique prefix and removes what it
loaded. Faults: the registry stopped mid-set, an image that does not exist, an arm64 image,
a login-protected registry, a host without docker buildx for offline tasks.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from components.config import ImagesConfig
from components.image_set import HARBOR_0_21_0_SIDECAR_IMAGE, STATE_DIR
from components.manifest import load_manifest
from components.seam.step import render_step
from tests.conftest import CODE, HARBOR_VENV, TB21_TASKS, ScriptResult, docker
from tests.harbor.conftest import seam_step
from tests.images.conftest import ImageFactory, LocalRegistry

pytestmark = pytest.mark.real


IMAGES = ImagesConfig()


def inputs_for(registry: LocalRegistry | None, images: list[str], tmp_path: Path,
               **changes) -> dict:
    """The step's inputs as the component passes them (the config's defaults), with the test's
    own registry as the mirror, no backoff and one retry unless `changes` say otherwise."""
    return {
        "images": images, "no_network_tasks": [],
        "mirror": registry.addr if registry else None,
        "concurrency": IMAGES.concurrency, "retries": 1, "retry_backoff_s": 0,
        "pull_timeout_s": IMAGES.pull_timeout_s, "pin_digests": IMAGES.pin_digests,
        "require_sidecar": IMAGES.require_sidecar, "sidecar_image": IMAGES.sidecar_image,
        "sidecar_context": None, "harbor_python": None, "state_dir": str(tmp_path / "state"),
        "scratch_dir": IMAGES.scratch_dir, "registry_username": None, "registry_password": None,
        **changes,
    }


def run_set(inputs: dict, env: dict[str, str] | None = None) -> ScriptResult:
    """The step as the component runs it: the password (when there is one) on stdin."""
    secret = ("registry_password",) if inputs.get("registry_password") else ()
    return seam_step("image_set", "create", inputs, secret_inputs=secret, env=env)


def test_pulls_tags_records_digests_then_rerun_makes_no_registry_request(
    registry: LocalRegistry, test_images: ImageFactory, tmp_path: Path
) -> None:
    digests = {test_images.name(s): test_images.push(s) for s in ("alpha:1", "beta:2", "gamma:3")}
    names = sorted(digests)
    env = inputs_for(registry, names, tmp_path, concurrency=2, pin_digests=True)

    with ArgvWatcher([f"docker-daemon:{test_images.prefix}/"], program="skopeo") as copies:
        first = run_set(env)
    assert first.returncode == 0, first.stderr
    assert copies.peak == 2, f"concurrency 2 should run two copies at once, saw {copies.peak}"
    out = first.outputs
    assert (out["ready"], out["total"], out["pulled"], out["present"]) == (3, 3, 3, 0)
    for name in names:
        # Tagged under the plain name although pulled from MIRROR/name.
        assert out["digests"][name] == test_images.local_id(name.split("/", 1)[1])
        assert docker("image", "inspect", "-f", "{{.Architecture}}", name).stdout.strip() == "amd64"
        assert out["repo_digests"][name] == digests[name]
        assert out["pinned"][name] == f"{name.rsplit(':', 1)[0]}@{digests[name]}"
    assert "3/3 ready" in first.stderr

    before = len(registry.requests())
    again = run_set(env)
    assert again.returncode == 0, again.stderr
    assert len(registry.requests()) == before, "an all-present re-run must not ask the registry"
    assert (again.outputs["pulled"], again.outputs["present"]) == (0, 3)
    assert again.outputs["digests"] == out["digests"]
    # The registry digests were recorded at pull time: pinning needs no request either.
    assert again.outputs["pinned"] == out["pinned"]

    # A new dataset commit with one more image pulls only that one.
    new = test_images.name("delta:4")
    digests[new] = test_images.push("delta:4")
    before = len(registry.requests())
    grown = run_set({**env, "images": [*names, new]})
    assert grown.returncode == 0, grown.stderr
    assert (grown.outputs["pulled"], grown.outputs["present"], grown.outputs["ready"]) == (1, 3, 4)
    paths = [line.split(" ", 1)[1] for line in registry.requests()[before:]]
    assert paths and all(
        p == "/v2/" or p.startswith(f"/v2/{test_images.prefix}/delta/") for p in paths
    ), paths


def test_image_pulled_by_hand_is_pinned_from_its_local_repo_digest(
    registry: LocalRegistry, test_images: ImageFactory, tmp_path: Path
) -> None:
    digest = test_images.push("byhand:1")
    name = test_images.name("byhand:1")
    docker("pull", "-q", f"{registry.addr}/{name}")
    docker("tag", f"{registry.addr}/{name}", name)
    before = len(registry.requests())
    result = run_set(inputs_for(registry, [name], tmp_path, pin_digests=True))
    assert result.returncode == 0, result.stderr
    assert (result.outputs["pulled"], result.outputs["present"]) == (0, 1)
    assert result.outputs["repo_digests"] == {name: digest}
    assert result.outputs["pinned"] == {name: f"{name.rsplit(':', 1)[0]}@{digest}"}
    assert len(registry.requests()) == before


def test_registry_stopped_mid_set_is_finished_by_the_retries(
    own_registry: LocalRegistry, canary_image: str, tmp_path: Path
) -> None:
    registry = own_registry
    test_images = ImageFactory(registry=registry, canary=canary_image)
    try:
        _stop_mid_set(registry, test_images, tmp_path)
    finally:
        test_images.cleanup()


def _stop_mid_set(registry: LocalRegistry, test_images: ImageFactory, tmp_path: Path) -> None:
    names = [test_images.name(f"img{i}:1") for i in range(6)]
    for name in names:
        test_images.push(name.split("/", 1)[1])
    inputs = inputs_for(registry, names, tmp_path, concurrency=1, retries=6, retry_backoff_s=1)
    proc = subprocess.Popen(
        # As the host seam runs it: from the host code.
        ["bash", "-c", render_step("image_set", "create", inputs, CODE)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stderr_lines: list[str] = []
    first_ready, retried = threading.Event(), threading.Event()

    def read_stderr() -> None:
        for line in proc.stderr:
            stderr_lines.append(line)
            if "1/6 ready (pulled" in line:
                first_ready.set()
            if "[image_set] retry " in line:
                retried.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert first_ready.wait(120), "".join(stderr_lines)
        # The registry down until a pull has failed on it and waits for its retry (not for a
        # fixed time: on a slow machine the set may not reach its next pull within it).
        registry.stop()
        assert retried.wait(120), "no pull retried while the registry was down:\n" + "".join(
            stderr_lines)
        registry.start()
        # The reader thread owns stderr; communicate() would close it under the thread.
        proc.wait(timeout=300)
        stdout = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    stderr = "".join(stderr_lines)
    assert proc.returncode == 0, stderr
    assert "retry " in stderr, "the outage should have cost at least one retry:\n" + stderr
    out = json.loads(stdout.strip().splitlines()[-1])
    assert (out["ready"], out["pulled"]) == (6, 6)
    assert all(test_images.local_id(n.split("/", 1)[1]) for n in names)


def test_missing_image_fails_naming_it_after_the_configured_retries(
    registry: LocalRegistry, test_images: ImageFactory, tmp_path: Path
) -> None:
    good = test_images.name("present:1")
    test_images.push("present:1")
    missing = test_images.name("nosuch:1")
    result = run_set(inputs_for(registry, [good, missing], tmp_path, retries=2))
    assert result.returncode != 0
    assert missing in result.reason and "after 3 attempts" in result.reason, result.stderr
    assert result.stderr.count(f"retry {missing}") == 2
    assert "1/2 images ready" in result.reason
    # The good image of the same set was still pulled: the next run only retries the missing one.
    assert test_images.local_id("present:1")
    assert not any(line.strip().startswith("{") for line in result.stdout.splitlines())


def test_arm64_image_is_rejected_naming_it_and_not_left_behind(
    registry: LocalRegistry, test_images: ImageFactory, tmp_path: Path
) -> None:
    test_images.push_arm64("armed:1", tmp_path)
    arm = test_images.name("armed:1")
    result = run_set(inputs_for(registry, [arm], tmp_path))
    assert result.returncode != 0
    assert arm in result.reason and "linux/arm64" in result.reason, result.stderr
    assert test_images.local_id("armed:1") is None


def test_credentials_from_an_authfile_never_printed(
    tmp_path: Path, canary_image: str, docker_engine: None
) -> None:
    password = "s3cret-Pa55-" + os.urandom(4).hex()
    reg = LocalRegistry(root=tmp_path / "authreg", htpasswd=("bench", password))
    reg.root.mkdir()
    reg.start()
    images = ImageFactory(registry=reg, canary=canary_image, login=("bench", password))
    try:
        images.push("locked:1")
        name = images.name("locked:1")
        scratch = tmp_path / "scratch"
        scratch.mkdir()
        base = inputs_for(reg, [name], tmp_path, scratch_dir=str(scratch))

        anonymous = run_set(base)
        assert anonymous.returncode != 0 and name in anonymous.reason
        assert "unauthorized" in anonymous.reason.lower() or "401" in anonymous.reason

        wrong = run_set({**base, "registry_username": "bench", "registry_password": "nope"})
        assert wrong.returncode != 0

        watcher = ArgvWatcher([password, base64.b64encode(f"bench:{password}".encode()).decode()])
        with watcher:
            ok = run_set({**base, "registry_username": "bench", "registry_password": password})
        assert ok.returncode == 0, ok.stderr
        assert watcher.seen == [], "the secret was on a command line: " + repr(watcher.seen)
        assert watcher.scans > 5
        assert ok.outputs["ready"] == 1 and images.local_id("locked:1")
        for result in (anonymous, wrong, ok):
            assert password not in result.stdout + result.stderr
        # The private authfile went with the scratch dir.
        assert list(scratch.iterdir()) == []

        half = run_set({**base, "registry_username": "bench"})
        assert half.returncode != 0 and "registry_password" in half.reason
    finally:
        images.cleanup()
        reg.stop()


class ArgvWatcher:
    """Scans every process's command line while active, recording those that hold a needle
    (run by `program`, if given) and the most seen in one scan."""

    def __init__(self, needles: list[str], program: str | None = None) -> None:
        self.secrets = [x.encode() for x in needles]
        self.program = program.encode() if program else None
        self.seen: list[str] = []
        self.peak = 0
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            hits = 0
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    argv = cmdline.read_bytes()
                except OSError:
                    continue
                if (
                    self.program
                    and Path(argv.split(b"\0", 1)[0].decode()).name != self.program.decode()
                ):
                    continue
                if any(secret in argv for secret in self.secrets):
                    hits += 1
                    self.seen.append(argv.replace(b"\0", b" ").decode(errors="replace")[:200])
            self.peak = max(self.peak, hits)
            self.scans += 1
            time.sleep(0.02)

    def __enter__(self) -> ArgvWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


# --- the egress-control sidecar for no-network tasks ---------------------------------------


@pytest.fixture
def docker_shim(tmp_path: Path) -> Path:
    """A PATH dir whose `docker` answers `buildx` as told and passes everything else on."""
    real = subprocess.run(["which", "docker"], capture_output=True, text=True, check=True)
    shim_dir = tmp_path / "shim"
    shim_dir.mkdir()
    shim = shim_dir / "docker"
    shim.write_text(
        "#!/usr/bin/env bash\n"
        'if [[ "${1:-}" == buildx ]]; then exit "${SHIM_BUILDX_RC:-1}"; fi\n'
        f'exec {real.stdout.strip()} "$@"\n'
    )
    shim.chmod(0o755)
    return shim_dir


def test_no_buildx_and_no_sidecar_fails_before_pulling_naming_the_21_tasks(
    registry: LocalRegistry, test_images: ImageFactory, tmp_path: Path, docker_shim: Path
) -> None:
    offline = load_manifest(TB21_TASKS).no_network_tasks
    assert len(offline) == 21
    test_images.push("one:1")
    before = len(registry.requests())
    env = inputs_for(
        registry,
        [test_images.name("one:1")],
        tmp_path,
        no_network_tasks=list(offline),
        sidecar_image=f"{test_images.prefix}/sidecar:absent",
    )
    shim = {"PATH": f"{docker_shim}:{os.environ['PATH']}"}
    result = run_set(env, shim)
    assert result.returncode != 0
    assert "buildx" in result.reason and "21 no-network tasks" in result.reason
    assert all(task in result.reason for task in offline)
    assert len(registry.requests()) == before, "it must fail before pulling anything"
    assert test_images.local_id("one:1") is None

    # images.require_sidecar false: the same host only warns, pulls, and reports it missing.
    relaxed = run_set({**env, "require_sidecar": False}, shim)
    assert relaxed.returncode == 0, relaxed.stderr
    assert relaxed.outputs["sidecar"]["status"] == "missing"
    assert "warning" in relaxed.stderr and "regex-log" in relaxed.stderr


def test_sidecar_present_or_buildable_passes(
    registry: LocalRegistry, test_images: ImageFactory, tmp_path: Path, docker_shim: Path
) -> None:
    test_images.push("two:1")
    sidecar = f"{test_images.prefix}/sidecar:prebuilt"
    env = inputs_for(
        registry,
        [test_images.name("two:1")],
        tmp_path,
        no_network_tasks=["regex-log", "extract-elf"],
        sidecar_image=sidecar,
    )
    shim = {"PATH": f"{docker_shim}:{os.environ['PATH']}"}
    buildx_only = run_set(env, {**shim, "SHIM_BUILDX_RC": "0"})
    assert buildx_only.returncode == 0, buildx_only.stderr
    assert buildx_only.outputs["sidecar"] == {"status": "build-at-launch", "image": sidecar}

    docker("tag", test_images.canary, sidecar)  # a pre-loaded sidecar: no buildx needed
    present = run_set(env, shim)
    assert present.returncode == 0, present.stderr
    assert present.outputs["sidecar"] == {"status": "present", "image": sidecar}

    # No offline task: nothing is checked.
    plain = run_set({**env, "no_network_tasks": []}, shim)
    assert plain.outputs["sidecar"]["status"] == "not-needed"


HARBOR_SIDECAR_CONTEXT = next(
    (HARBOR_VENV / "lib").glob(
        "python3*/site-packages/harbor/environments/docker/harbor-docker-egress-control-sidecar"
    ),
    None,
)
GOST_DIGEST = "sha256:afc0137758ab4ce399d47a299f9abbacbf522b52a17e59cbb4b4e7a1a66e9196"


def test_real_harbor_context_without_buildx_fetches_the_pinned_gost_base(
    registry: LocalRegistry,
    test_images: ImageFactory,
    tmp_path: Path,
    harbor_bin: Path,
    docker_shim: Path,
) -> None:
    """harbor_python: the tag comes from Harbor's code, and the assembly reads Harbor's real
    Dockerfile: its digest-pinned gost base is asked of the mirror (which lacks it here)."""
    if docker("image", "inspect", HARBOR_0_21_0_SIDECAR_IMAGE, check=False).returncode == 0:
        pytest.fail(f"{HARBOR_0_21_0_SIDECAR_IMAGE} exists on this engine: remove it first")
    test_images.push("three:1")
    env = inputs_for(
        registry,
        [test_images.name("three:1")],
        tmp_path,
        retries=0,
        no_network_tasks=["regex-log"],
        sidecar_image="wrong/on:purpose",
        harbor_python=str(HARBOR_VENV / "bin" / "python"),
    )
    shim = {"PATH": f"{docker_shim}:{os.environ['PATH']}"}
    before = registry.requests()
    strict = run_set(env, shim)
    assert strict.returncode != 0
    assert f"gogost/gost@{GOST_DIGEST}" in strict.reason, strict.stderr
    assert HARBOR_0_21_0_SIDECAR_IMAGE in strict.stderr
    asked = [r for r in registry.requests()[len(before) :] if "/manifests/" in r]
    assert asked == [f"GET /v2/gogost/gost/manifests/{GOST_DIGEST}"], asked
    assert test_images.local_id("three:1") is None, "nothing is pulled after a sidecar failure"

    relaxed = run_set({**env, "require_sidecar": False}, shim)
    assert relaxed.returncode == 0, relaxed.stderr
    assert relaxed.outputs["sidecar"] == {"status": "missing", "image": HARBOR_0_21_0_SIDECAR_IMAGE}


def fake_sidecar_context(tmp_path: Path, base: str, extra: str = "") -> Path:
    """Harbor's real sidecar context with FROM pointed at a test image (the real gost base
    cannot be fetched here)."""
    if HARBOR_SIDECAR_CONTEXT is None:
        pytest.fail(f"Harbor's sidecar context not found under {HARBOR_VENV}")
    context = tmp_path / "sidecar-context"
    shutil.copytree(HARBOR_SIDECAR_CONTEXT, context)
    dockerfile = context / "Dockerfile"
    lines = dockerfile.read_text().splitlines()
    assert lines[0].startswith("FROM gogost/gost:")
    dockerfile.write_text("\n".join([f"FROM {base}", *lines[1:], extra]) + "\n")
    return context


def test_without_buildx_the_sidecar_is_assembled_from_harbors_context(
    registry: LocalRegistry, test_images: ImageFactory, tmp_path: Path, docker_shim: Path
) -> None:
    base_digest = test_images.push("gost:3.2.7")
    base = f"{test_images.name('gost:3.2.7')}@{base_digest}"
    context = fake_sidecar_context(tmp_path, base)
    sidecar = f"{test_images.prefix}/sidecar:assembled"
    test_images.push("four:1")
    env = inputs_for(
        registry,
        [test_images.name("four:1")],
        tmp_path,
        no_network_tasks=["regex-log", "extract-elf"],
        sidecar_image=sidecar,
        sidecar_context=str(context),
    )
    shim = {"PATH": f"{docker_shim}:{os.environ['PATH']}"}
    result = run_set(env, shim)
    assert result.returncode == 0, result.stderr
    assert result.outputs["sidecar"] == {"status": "assembled", "image": sidecar}
    assert result.outputs["ready"] == 1

    files = [
        "/opt/egress-sidecar/entrypoint.sh",
        "/opt/egress-sidecar/gost.yaml",
        "/opt/egress-sidecar/allowlist.txt",
        "/usr/local/bin/network-policy",
    ]
    stat = docker("run", "--rm", "--entrypoint", "stat", sidecar, "-c", "%a %u:%g %n", *files)
    assert stat.stdout.split("\n")[:4] == [
        f"755 0:0 {files[0]}",  # COPY --chmod=755
        f"644 0:0 {files[1]}",
        f"644 0:0 {files[2]}",
        f"755 0:0 {files[3]}",
    ]
    gost = docker("run", "--rm", "--entrypoint", "cat", sidecar, files[1]).stdout
    assert gost == (context / "gost.yaml").read_text()
    label = docker(
        "image", "inspect", "-f", '{{index .Config.Labels "io.benchstack.sidecar.base"}}', sidecar
    )
    assert label.stdout.strip() == base
    assert docker("ps", "-a", "-q", "--filter", f"ancestor={sidecar}").stdout.strip() == ""

    again = run_set(env, shim)
    assert again.outputs["sidecar"]["status"] == "present"


def test_sidecar_dockerfile_beyond_from_and_copy_is_refused(
    registry: LocalRegistry, test_images: ImageFactory, tmp_path: Path, docker_shim: Path
) -> None:
    context = fake_sidecar_context(tmp_path, "debian:bookworm", extra="RUN apt-get update")
    env = inputs_for(
        registry,
        ["some/image:1"],
        tmp_path,
        no_network_tasks=["regex-log"],
        sidecar_image=f"{test_images.prefix}/sidecar:never",
        sidecar_context=str(context),
    )
    result = run_set(env, {"PATH": f"{docker_shim}:{os.environ['PATH']}"})
    assert result.returncode != 0
    assert "instruction RUN" in result.reason and "buildx" in result.reason


@pytest.mark.parametrize(
    ("key", "value"),
    [("concurrency", 0), ("retries", -1), ("pin_digests", "yes"), ("pull_timeout_s", 0)],
)
def test_bad_input_fails_in_one_line_naming_the_key(key: str, value, tmp_path: Path) -> None:
    result = run_set(inputs_for(None, ["a/b:1"], tmp_path, **{key: value}))
    assert result.returncode != 0 and result.reason.startswith(f"image_set: {key}=")
    assert result.stdout == ""


def test_empty_image_list_fails(tmp_path: Path) -> None:
    result = run_set(inputs_for(None, [" ", ""], tmp_path))
    assert result.returncode != 0 and "images is empty" in result.reason


def test_the_state_dir_is_the_hosts_own_by_default(
    registry: LocalRegistry, test_images: ImageFactory, tmp_path: Path
) -> None:
    """The component's default state dir is under the home of the host's user (`~`)."""
    test_images.push("home:1")
    name = test_images.name("home:1")
    home = tmp_path / "home"
    result = run_set(inputs_for(registry, [name], tmp_path, state_dir=STATE_DIR),
                     {"HOME": str(home)})
    assert result.returncode == 0, result.stderr
    state = home / ".local" / "state" / "benchstack" / "image-set" / "repo-digests.tsv"
    assert name in state.read_text()
