"""The egress-control sidecar of Harbor's no-network tasks, checked before any image is pulled.

What it owns: whether the sidecar is needed and can be had (present, built by Harbor with
docker buildx, assembled here without buildx, built by Harbor at launch, or missing), the tag
Harbor looks up (derived by Harbor's own code when the Harbor venv's python is given), and the
assembly without buildx: Harbor's Dockerfile read as a recipe (one FROM and COPY lines only),
its files staged, its digest-pinned base fetched like a task image (pull engine: image_pull.py),
then docker create + cp + commit. Harbor 0.21.0 runs tasks whose network policy is not public
behind this image.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from .image_pull import AMD64, Engine, Fetcher, ImageRef, PullError, Run, last_line, log

SIDECAR_STATUSES = ("not-needed", "present", "built", "assembled", "build-at-launch", "missing")


def sidecar_action(
    *, needed: bool, present: bool, buildx: bool, harbor_python: bool, context: bool
) -> str:
    """What to do about the sidecar: not-needed, present, build (Harbor + buildx), assemble
    (no buildx, a build context), build-at-launch (buildx, no Harbor here) or missing."""
    if not needed:
        return "not-needed"
    if present:
        return "present"
    if buildx and harbor_python:
        return "build"
    if context:
        return "assemble"
    if buildx:
        return "build-at-launch"
    return "missing"


class Copy(NamedTuple):
    sources: tuple[str, ...]
    dest: str
    mode: int | None

    def targets(self) -> list[tuple[str, str]]:
        """(source, path in the image) for each source, as COPY places them."""
        into_dir = self.dest.endswith("/") or len(self.sources) > 1
        return [
            (src, f"{self.dest.rstrip('/')}/{src.rsplit('/', 1)[-1]}" if into_dir else self.dest)
            for src in self.sources
        ]


class Recipe(NamedTuple):
    base: str
    copies: tuple[Copy, ...]


_CHMOD = re.compile(r"--chmod=([0-7]{3,4})")


# Why a Dockerfile beyond FROM + COPY is refused.
_REFUSE = "cannot be assembled without docker buildx: install buildx"


def _copy_of(rest: str, name: str) -> Copy:
    """`COPY [--chmod=MODE] SRC... DEST`; any other flag is refused."""
    args = rest.split()
    mode = None
    while args and args[0].startswith("--"):
        match = _CHMOD.fullmatch(args[0])
        if not match:
            raise PullError(f"{name}: 'COPY {args[0]}' {_REFUSE}")
        mode = int(match.group(1), 8)
        args = args[1:]
    if len(args) < 2:
        raise PullError(f"{name}: 'COPY {rest}' names no source")
    return Copy(tuple(args[:-1]), args[-1], mode)


def _instructions(text: str, name: str) -> Iterator[tuple[str, str]]:
    """(instruction, the rest of its line) in order, comments and blank lines skipped."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            raise PullError(f"{name}: line continuations {_REFUSE}")
        op, rest = (stripped.split(None, 1) + [""])[:2]
        yield op.upper(), rest


def parse_dockerfile(text: str, name: str = "Dockerfile") -> Recipe:
    """A Dockerfile of only FROM (one, no flags) + COPY [--chmod=MODE] SRC... DEST: what
    `docker create` + `docker cp` + `docker commit` reproduce. Anything else (a future Harbor)
    is refused rather than guessed."""
    base = ""
    copies: list[Copy] = []
    for op, rest in _instructions(text, name):
        if op == "FROM":
            if base or len(rest.split()) != 1 or rest.startswith("--"):
                raise PullError(f"{name}: 'FROM {rest}' {_REFUSE}")
            base = rest
        elif op == "COPY":
            if not base:
                raise PullError(f"{name}: COPY before FROM")
            copies.append(_copy_of(rest, name))
        else:
            raise PullError(f"{name}: instruction {op} {_REFUSE}")
    if not base:
        raise PullError(f"{name} has no FROM")
    return Recipe(base, tuple(copies))


def stage_files(recipe: Recipe, context: Path, stage: Path) -> None:
    """The COPY sources under `stage` at their image paths (modes kept or set, dirs 755)."""
    stage.mkdir(mode=0o755, parents=True, exist_ok=True)
    for copy in recipe.copies:
        for src, dest in copy.targets():
            source = context / src
            if ".." in src or not source.is_file():
                raise PullError(f"{context / 'Dockerfile'}: COPY source {src} is not a file "
                                f"of {context}")
            target = stage / dest.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
            if copy.mode is not None:
                target.chmod(copy.mode)
    for directory in [stage, *(p for p in stage.rglob("*") if p.is_dir())]:
        directory.chmod(0o755)


# Harbor's own code names the sidecar (a hash of its build context and the engine's platform),
# so the tag stays right when the wheel changes. Run with harbor_python.
HARBOR_SIDECAR_TAG = """
import subprocess
from harbor.environments.docker import EGRESS_CONTROL_SIDECAR_CONTEXT_PATH as ctx
from harbor.environments.docker.docker import DockerEnvironment as env
from harbor.utils.container_cache import docker_build_context_hash
platform = subprocess.run(["docker", "version", "--format", "{{.Server.Os}}/{{.Server.Arch}}"],
                          check=True, capture_output=True, text=True).stdout.strip()
key = docker_build_context_hash(context=ctx, dockerfile_path=ctx / "Dockerfile", build_args={},
                                platform=platform)
print(f"{env._EGRESS_CONTROL_SIDECAR_DOCKER_NAME}--{key}")
print(ctx)
"""
HARBOR_SIDECAR_BUILD = """
import asyncio
from harbor.environments.docker import EGRESS_CONTROL_SIDECAR_CONTEXT_PATH as ctx
from harbor.environments.docker.docker import DockerEnvironment as env
from harbor.environments.docker.utils import default_docker_platform, ensure_docker_image_built
async def main():
    print(await ensure_docker_image_built(
        docker_name=env._EGRESS_CONTROL_SIDECAR_DOCKER_NAME, docker_build_context=ctx,
        dockerfile_path=ctx / "Dockerfile", build_args={},
        platform=await default_docker_platform()))
asyncio.run(main())
"""
NO_TELEMETRY = {"HARBOR_TELEMETRY": "0"}


@dataclass
class Sidecar:
    """Checked before any pull, so a host that cannot run the offline tasks fails in minutes,
    not after hours of pulling."""

    image: str
    context: str
    offline_tasks: tuple[str, ...]
    harbor_python: str
    require_sidecar: bool
    timeout_s: int
    engine: Engine
    fetcher: Fetcher
    run: Run
    work: Path

    def ensure(self) -> str:
        """The sidecar status; raises PullError when it is required and cannot be had."""
        tasks = self.offline_tasks
        if not tasks:
            return "not-needed"
        if self.harbor_python:
            self._from_harbor()
        action = sidecar_action(
            needed=True, present=self.engine.exists(self.image), buildx=self.engine.has_buildx(),
            harbor_python=bool(self.harbor_python), context=bool(self.context),
        )
        if action == "present":
            log(f"egress sidecar {self.image} present for {len(tasks)} no-network tasks")
            return "present"
        if action == "build":
            self._build()
            return "built"
        if action == "assemble":
            try:
                self.assemble()
            except PullError as exc:
                if self.require_sidecar:
                    raise
                log(f"image_set: {exc}")
                log(f"warning (images.require_sidecar false): the egress sidecar could not be "
                    f"assembled (above); {len(tasks)} no-network tasks will fail at launch")
                return "missing"
            return "assembled"
        if action == "build-at-launch":
            log(f"egress sidecar {self.image} absent; docker buildx is here, so Harbor will build "
                "it at launch (its gost base image must be reachable then); set harbor_python to "
                "build it now")
            return "build-at-launch"
        message = (
            f"docker buildx is missing and the egress sidecar {self.image} is not present, so "
            f"{len(tasks)} no-network tasks would fail at launch: {', '.join(tasks)}; set "
            "harbor_python (the sidecar is then assembled here), install the docker buildx "
            "plugin, or docker load that image"
        )
        if self.require_sidecar:
            raise PullError(message)
        log(f"warning (images.require_sidecar false): {message}")
        return "missing"

    def _from_harbor(self) -> None:
        python = self.harbor_python
        if not (os.path.isfile(python) and os.access(python, os.X_OK)):
            raise PullError(f"harbor_python={python} is not an executable: point it at the Harbor "
                            "venv's python or leave it empty")
        done = self.run([python, "-c", HARBOR_SIDECAR_TAG], timeout=300, env=NO_TELEMETRY)
        lines = done.stdout.decode().splitlines()
        if done.returncode != 0 or len(lines) < 2 or not lines[0]:
            raise PullError(f"could not derive the sidecar tag with harbor_python={python}: is "
                            f"Harbor installed in that venv? ({last_line(done.stderr)})")
        self.image = lines[0]
        self.context = self.context or lines[1]

    def _build(self) -> None:
        log(f"building egress sidecar {self.image} with Harbor's own builder (docker buildx)")
        done = self.run([self.harbor_python, "-c", HARBOR_SIDECAR_BUILD],
                        timeout=self.timeout_s, env=NO_TELEMETRY,
                        stdout_to_stderr=True)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise PullError(
                "building the egress sidecar failed (see the build log under "
                "~/.cache/harbor/docker_build/): Harbor needs its gost base image reachable; "
                f"pre-load {self.image} or fix the engine's registry access"
            )
        if not self.engine.exists(self.image):
            raise PullError(f"Harbor built the sidecar but {self.image} is not present: "
                            "harbor_python belongs to another Harbor version?")

    def assemble(self) -> None:
        """FROM + COPY without buildx: docker create + docker cp + docker commit (Harbor looks
        the image up by tag only)."""
        context = Path(self.context)
        dockerfile = context / "Dockerfile"
        if not dockerfile.is_file():
            raise PullError(f"sidecar_context={context} has no Dockerfile: point it at Harbor's "
                            "harbor-docker-egress-control-sidecar directory")
        recipe = parse_dockerfile(dockerfile.read_text(), str(dockerfile))
        stage = self.work / "sidecar-stage"
        stage_files(recipe, context, stage)
        base = ImageRef.parse(recipe.base)
        log(f"assembling egress sidecar {self.image} from {recipe.base} (no buildx here)")
        try:
            self.fetcher.fetch(f"sidecar base {recipe.base.split('@')[0]}", base,
                               base.local_name, self.work / "scratch" / "sidecar-base")
        except PullError as exc:
            raise PullError(f"egress sidecar base: {exc}; pre-load {self.image}, or serve "
                            f"{recipe.base.split('@')[0]} from images.mirror") from None
        found = self.engine.inspect([base.local_name])
        if not found:
            raise PullError(f"the sidecar base {recipe.base} is not in the engine after its copy")
        image_id, info = next(iter(found.items()))
        if info.platform != AMD64:
            raise PullError(f"egress sidecar base {recipe.base} is {info.platform}, not {AMD64}")
        self._commit(image_id, recipe.base, stage)

    def _commit(self, image_id: str, base: str, stage: Path) -> None:
        shape = self.run(["docker", "image", "inspect", "--format",
                          "{{json .Config.Entrypoint}}{{json .Config.Cmd}}", image_id], timeout=60)
        # create refuses an image with neither entrypoint nor command; compose sets the entrypoint.
        cmd = ["true"] if shape.stdout.decode().strip() == "nullnull" else []
        created = self.run(["docker", "create", image_id, *cmd], timeout=120)
        if created.returncode != 0:
            raise PullError(f"docker create from the sidecar base {base} failed: "
                            f"{last_line(created.stderr)}")
        container = created.stdout.decode().strip()
        try:
            done = self.run(["docker", "cp", f"{stage}/.", f"{container}:/"], timeout=300)
            if done.returncode == 0:
                done = self.run(
                    ["docker", "commit", "--change", f"LABEL io.benchstack.sidecar.base={base}",
                     container, self.image], timeout=300,
                )
            if done.returncode != 0:
                raise PullError(f"assembling the egress sidecar {self.image} failed (docker "
                                f"cp/commit): {last_line(done.stderr) or 'no message'}")
        finally:
            self.run(["docker", "rm", "-f", container], timeout=120)


