"""Fixtures for the image set: a private docker-registry per test module, and test images.

Every test talks to its OWN `docker-registry` on a free loopback port (storage and log in a
temp dir), never to the shared 127.0.0.1:5000 one, so it can stop, restart or require a login
without disturbing anyone. The registry's access log counts the requests it served.

Test images are derived from the canary (one tiny committed layer each, so digests differ),
pushed under a unique `bstest-<hex>/` prefix and removed locally, so the script has to pull
them. Teardown removes every local image under that prefix, also when a test failed.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import tarfile
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.conftest import docker

_ACCESS_LINE = re.compile(r'"(GET|HEAD|POST|PUT|PATCH|DELETE) (/v2/\S*) HTTP/')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bcrypt_hash(password: str) -> str:
    """htpasswd line for docker-registry (bcrypt) via libxcrypt, without extra packages."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt

        return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))


@dataclass
class LocalRegistry:
    """A docker-registry process on 127.0.0.1:<free port>, storage in `root`."""

    root: Path
    port: int = field(default_factory=free_port)
    htpasswd: tuple[str, str] | None = None
    proc: subprocess.Popen | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.root / "registry.log"

    def _write_config(self) -> Path:
        storage = self.root / "storage"
        storage.mkdir(parents=True, exist_ok=True)
        auth = ""
        if self.htpasswd:
            user, password = self.htpasswd
            (self.root / "htpasswd").write_text(f"{user}:{bcrypt_hash(password)}\n")
            auth = f"auth:\n  htpasswd: {{realm: bstest, path: {self.root / 'htpasswd'}}}\n"
        cfg = self.root / "registry.yml"
        cfg.write_text(
            "version: 0.1\n"
            "log: {level: info}\n"
            f"storage:\n  filesystem: {{rootdirectory: {storage}}}\n  delete: {{enabled: true}}\n"
            f"http:\n  addr: {self.addr}\n" + auth
        )
        return cfg

    def start(self) -> None:
        if shutil.which("docker-registry") is None:
            pytest.fail("docker-registry not installed: run `make setup`")
        cfg = self._write_config()
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                ["docker-registry", "serve", str(cfg)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60  # a registry on a loaded CI machine starts late
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://{self.addr}/v2/", timeout=1).status_code in (200, 401):
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        pytest.fail(f"own docker-registry did not answer on {self.addr}; see {self.log_path}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def requests(self) -> list[str]:
        """Every request served so far, as 'METHOD /v2/path' (the registry's access log)."""
        if not self.log_path.exists():
            return []
        text = self.log_path.read_text(errors="replace")
        return [f"{m.group(1)} {m.group(2)}" for m in _ACCESS_LINE.finditer(text)]


@dataclass
class ImageFactory:
    """Creates images in a registry under a unique prefix; removes their local copies."""

    registry: LocalRegistry
    canary: str
    prefix: str = field(default_factory=lambda: f"bstest-{uuid.uuid4().hex[:10]}")
    login: tuple[str, str] | None = None

    def name(self, short: str) -> str:
        return f"{self.prefix}/{short}"

    def _push(self, local_ref: str) -> str:
        """docker push `local_ref` (ADDR/...), remove the local tag; return the repo digest."""
        if self.login:
            user, password = self.login
            subprocess.run(
                ["docker", "login", "-u", user, "--password-stdin", self.registry.addr],
                input=password,
                text=True,
                capture_output=True,
                check=True,
            )
        try:
            docker("push", "-q", local_ref)
            repo_digests = json.loads(
                docker("image", "inspect", "--format", "{{json .RepoDigests}}", local_ref).stdout
            )
        finally:
            if self.login:
                docker("logout", self.registry.addr, check=False)
        docker("rmi", local_ref, check=False)
        repo = local_ref.rsplit(":", 1)[0]
        return next(d for d in repo_digests if d.startswith(repo + "@")).split("@", 1)[1]

    def push(self, short: str) -> str:
        """A distinct amd64 image `prefix/short` in the registry; returns its repo digest."""
        ref = f"{self.registry.addr}/{self.name(short)}"
        cid = docker(
            "run", "-d", self.canary, "bash", "-c", f"echo {uuid.uuid4().hex} > /bstest-marker"
        ).stdout.strip()
        try:
            docker("wait", cid)
            docker("commit", cid, ref)
        finally:
            docker("rm", "-f", cid, check=False)
        return self._push(ref)

    def push_arm64(self, short: str, workdir: Path) -> str:
        """An image whose config says arm64 (DESIGN.md recipe: save, edit, rename, load, push)."""
        ref = f"{self.registry.addr}/{self.name(short)}"
        cid = docker("run", "-d", self.canary, "bash", "-c", "echo arm > /bstest-marker").stdout
        cid = cid.strip()
        try:
            docker("wait", cid)
            image_id = docker("commit", cid).stdout.strip()
        finally:
            docker("rm", "-f", cid, check=False)
        unpacked = workdir / "arm64"
        unpacked.mkdir()
        saved = workdir / "amd64.tar"
        docker("save", "-o", str(saved), image_id)
        with tarfile.open(saved) as tar:
            tar.extractall(unpacked, filter="tar")
        saved.unlink()
        manifest = json.loads((unpacked / "manifest.json").read_text())
        old_config = unpacked / manifest[0]["Config"]
        config = json.loads(old_config.read_text())
        config["architecture"] = "arm64"
        data = json.dumps(config).encode()
        import hashlib

        new_name = hashlib.sha256(data).hexdigest() + ".json"
        old_config.unlink()
        (unpacked / new_name).write_bytes(data)
        manifest[0]["Config"] = new_name
        manifest[0]["RepoTags"] = [ref]
        (unpacked / "manifest.json").write_text(json.dumps(manifest))
        edited = workdir / "arm64.tar"
        with tarfile.open(edited, "w") as tar:
            for child in sorted(unpacked.iterdir()):
                tar.add(child, arcname=child.name)
        shutil.rmtree(unpacked)
        docker("load", "-q", "-i", str(edited))
        edited.unlink()
        docker("rmi", image_id, check=False)
        arch = docker("image", "inspect", "--format", "{{.Architecture}}", ref).stdout.strip()
        if arch != "arm64":
            pytest.fail(f"could not make an arm64-labelled test image (got {arch})")
        return self._push(ref)

    def local_id(self, short: str) -> str | None:
        proc = docker("image", "inspect", "--format", "{{.Id}}", self.name(short), check=False)
        return proc.stdout.strip() if proc.returncode == 0 else None

    def cleanup(self) -> None:
        listing = docker("images", "--format", "{{.Repository}}:{{.Tag}}", check=False).stdout
        refs = [ref for ref in listing.split() if self.prefix in ref]
        if refs:
            docker("rmi", "-f", *refs, check=False)


@pytest.fixture(scope="session")
def registry(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: None
) -> Iterator[LocalRegistry]:
    """One private registry for the tests that do not break it (the canary's big layer is then
    uploaded once and mounted across repositories); tests count request deltas."""
    reg = LocalRegistry(root=tmp_path_factory.mktemp("registry"))
    reg.start()
    try:
        yield reg
    finally:
        reg.stop()


@pytest.fixture
def own_registry(tmp_path: Path, docker_engine: None) -> Iterator[LocalRegistry]:
    """A registry for one test alone: stopped, restarted or locked by that test."""
    reg = LocalRegistry(root=tmp_path / "own-registry")
    reg.root.mkdir()
    reg.start()
    try:
        yield reg
    finally:
        reg.stop()


@pytest.fixture
def test_images(registry: LocalRegistry, canary_image: str) -> Iterator[ImageFactory]:
    images = ImageFactory(registry=registry, canary=canary_image)
    try:
        yield images
    finally:
        images.cleanup()
