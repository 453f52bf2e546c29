"""Every task image of a manifest present in the local Docker engine as linux/amd64.

This file is shipped to the Harbor host: `components/scripts/image_set.sh` inlines it (a
`# benchstack:include` line) and runs it with the host's python3 (3.9 or newer, standard
library only). It imports nothing from the project and runs standalone, its inputs in the
environment (defaults in brackets):

    IMAGES=alexgshaw/fix-git:20260403 MIRROR=127.0.0.1:5000 python3 image_pull.py

  IMAGES              newline-separated image references [required]
  MIRROR              registry host[:port][/prefix] serving Docker Hub images: pull
                      MIRROR/repo:tag, tag locally as repo:tag. Images naming another registry
                      are pulled as is. [none]
  CONCURRENCY         images pulled at the same time [4]
  RETRIES             retries per image after its first attempt, then it is reported as failed [4]
  BACKOFF_SECONDS     wait after the first failed attempt; doubles per attempt, at most 60 s [5]
  PULL_TIMEOUT        seconds allowed for one attempt (manifest read + copy) [1800]
  REGISTRY_USERNAME   user for the registry pulled from (MIRROR, else Docker Hub) [none]
  REGISTRY_PASSWORD   its password or token; written only to a private authfile, never printed.
                      image_set.sh passes it on a descriptor instead, named by
                      REGISTRY_PASSWORD_FD, so it is in no process's arguments or environment [none]
  TLS_VERIFY          true|false|auto; auto = false for localhost/127.x (plain HTTP, as Docker
                      treats loopback registries) and true otherwise [auto]
  PIN_DIGESTS         1: also output `pinned` (image -> repo@sha256:...), asking the registry
                      only for images whose digest was never recorded here [0]
  SCRATCH_DIR         private work dir (skopeo's temp files, the authfile); on a disk rather
                      than a small tmpfs [${TMPDIR:-/var/tmp}]
  STATE_DIR           where registry digests of pulled images are kept between runs
                      [${XDG_STATE_HOME:-$HOME/.local/state}/benchstack/image-set]
  NO_NETWORK_TASKS    newline-separated tasks whose network policy is not public: Harbor 0.21.0
                      runs them behind its egress-control sidecar image [none]
  REQUIRE_SIDECAR     1: fail before pulling anything when the sidecar can neither be found nor
                      built here (naming those tasks); 0: only warn [1]
  SIDECAR_IMAGE       the sidecar tag Harbor looks up (Harbor 0.21.0, linux/amd64) [DEFAULT_SIDECAR]
  HARBOR_PYTHON       python of the Harbor venv on this host: when set, the sidecar tag is derived
                      by Harbor's own code; a missing sidecar is then built by Harbor (with docker
                      buildx) or, without buildx, assembled here from Harbor's build context, its
                      digest-pinned gost base fetched like the task images (mirror too) [none]
  SIDECAR_CONTEXT     the sidecar's build context directory [Harbor's, when HARBOR_PYTHON is set]

Why skopeo (as the seed) and not `docker pull`: skopeo takes the mirror, the credentials (a
private authfile) and the proxy (HTTPS_PROXY) per call, without touching the daemon's config or
~/.docker; --override-arch fetches the amd64 member of a multi-arch index whatever this host is;
and the manifest is read first, so the registry digest we record is the one we copied (copy by
digest). It streams into the engine (docker-daemon:): one disk pass, not three as the seed's
docker-archive + `docker load` (measured here: 0.9 s against 2.8 s for a 200 MB image).

Digests: `digests` holds each image's local image ID (the sha256 of its config), known for every
present image without asking any registry, identical whichever mirror served it, and what the
engine runs. `repo_digests` holds the registry manifest digest, which `docker load` forgets: it is
recorded in STATE_DIR when this program pulls the image. An all-present run asks no registry.

Progress goes to stderr; the result is ONE JSON object on the last stdout line:
{"ready", "total", "pulled", "present", "digests", "repo_digests", "sidecar": {"status",
"image"}, "pinned" (PIN_DIGESTS=1 only)}; sidecar.status is one of SIDECAR_STATUSES. On failure
the last stderr line (`image_set: ...`) says what to change and the exit code is 1.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

DEFAULT_SIDECAR = "harbor-prebuilt:harbor-docker-egress-control-sidecar--b1e6760734a9e6f6"
SIDECAR_STATUSES = ("not-needed", "present", "built", "assembled", "build-at-launch", "missing")
STATE_FILE = "repo-digests.tsv"
MAX_BACKOFF_S = 60
AMD64 = "linux/amd64"
HUB = "docker.io"


class PullError(Exception):
    """A failure whose message is the one line the user reads (after `image_set: `)."""


def log(message: str) -> None:
    print(f"[image_set] {message}", file=sys.stderr, flush=True)


# --- inputs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    images: tuple[str, ...]
    mirror: str = ""
    concurrency: int = 4
    retries: int = 4
    backoff_s: int = 5
    pull_timeout: int = 1800
    username: str = ""
    password: str = field(default="", repr=False)
    tls_verify: str = "auto"
    pin_digests: bool = False
    state_dir: Path = Path("/var/tmp/.local/state/benchstack/image-set")
    scratch_dir: Path = Path("/var/tmp")
    offline_tasks: tuple[str, ...] = ()
    require_sidecar: bool = True
    sidecar_image: str = DEFAULT_SIDECAR
    harbor_python: str = ""
    sidecar_context: str = ""

    @property
    def attempts(self) -> int:
        return self.retries + 1


def words(text: str) -> tuple[str, ...]:
    """One entry per non-blank line, whitespace removed, sorted and unique."""
    return tuple(sorted({"".join(line.split()) for line in text.splitlines()} - {""}))


def _whole(env: Mapping[str, str], key: str, default: str, minimum: int, hint: str) -> int:
    value = env.get(key) or default
    if not re.fullmatch(r"[0-9]+", value) or int(value) < minimum:
        raise PullError(f"{key}={value}: {hint}")
    return int(value)


def _flag(env: Mapping[str, str], key: str, default: str) -> bool:
    value = env.get(key) or default
    if value not in ("0", "1"):
        raise PullError(f"{key}={value}: set 0 or 1")
    return value == "1"


def settings_from_env(env: Mapping[str, str], password: str | None = None) -> Settings:
    """The inputs, checked: each bad one fails naming its key. `password` overrides the
    environment's REGISTRY_PASSWORD (image_set.sh passes it on a file descriptor)."""
    concurrency = _whole(env, "CONCURRENCY", "4", 1, "set a whole number >= 1")
    retries = _whole(env, "RETRIES", "4", 0, "set a whole number >= 0")
    backoff = _whole(env, "BACKOFF_SECONDS", "5", 0, "set a whole number of seconds")
    pull_timeout = _whole(env, "PULL_TIMEOUT", "1800", 1, "set seconds >= 1")
    pin = _flag(env, "PIN_DIGESTS", "0")
    require_sidecar = _flag(env, "REQUIRE_SIDECAR", "1")
    tls = env.get("TLS_VERIFY") or "auto"
    if tls not in ("auto", "true", "false"):
        raise PullError(f"TLS_VERIFY={tls}: set auto, true or false")
    username = env.get("REGISTRY_USERNAME", "")
    secret = env.get("REGISTRY_PASSWORD", "") if password is None else password
    both = "set both or neither"
    if username and not secret:
        raise PullError(f"REGISTRY_USERNAME is set but REGISTRY_PASSWORD is empty: {both}")
    if secret and not username:
        raise PullError(f"REGISTRY_PASSWORD is set but REGISTRY_USERNAME is empty: {both}")
    images = words(env.get("IMAGES", ""))
    if not images:
        raise PullError("IMAGES is empty: pass the manifest's images, one per line")
    for image in images:
        if "@" in image:
            raise PullError(
                f"image {image} is pinned by digest in the dataset: use its tag "
                "(pinning is PIN_DIGESTS=1)"
            )
    home = env.get("HOME") or "/var/tmp"
    state_home = env.get("XDG_STATE_HOME") or f"{home}/.local/state"
    return Settings(
        images=images,
        mirror=env.get("MIRROR", ""),
        concurrency=concurrency,
        retries=retries,
        backoff_s=backoff,
        pull_timeout=pull_timeout,
        username=username,
        password=secret,
        tls_verify=tls,
        pin_digests=pin,
        state_dir=Path(env.get("STATE_DIR") or f"{state_home}/benchstack/image-set"),
        scratch_dir=Path(env.get("SCRATCH_DIR") or env.get("TMPDIR") or "/var/tmp"),
        offline_tasks=words(env.get("NO_NETWORK_TASKS", "")),
        require_sidecar=require_sidecar,
        sidecar_image=env.get("SIDECAR_IMAGE") or DEFAULT_SIDECAR,
        harbor_python=env.get("HARBOR_PYTHON", ""),
        sidecar_context=env.get("SIDECAR_CONTEXT", ""),
    )


# --- image names: Docker Hub names get the mirror, the local tag is the normal form ---------------


class ImageRef(NamedTuple):
    registry: str  # HUB for Docker Hub
    path: str  # library/debian for Hub's official images
    tag: str
    digest: str = ""  # sha256:... when the reference is pinned

    @classmethod
    def parse(cls, ref: str) -> ImageRef:
        name, _, digest = ref.partition("@")
        first, slash, rest = name.partition("/")
        if slash and ("." in first or ":" in first or first == "localhost"):
            registry = HUB if first == "index.docker.io" else first
        else:
            registry, rest = HUB, name
        last = rest.rsplit("/", 1)[-1]
        if ":" in last:
            path, _, tag = rest.rpartition(":")
        else:
            path, tag = rest, "latest"
        if registry == HUB and "/" not in path:
            path = f"library/{path}"
        return cls(registry, path, tag, digest)

    @property
    def local_name(self) -> str:
        """The name `docker images` shows (docker.io/ and library/ dropped, :latest added)."""
        if self.registry == HUB:
            path = self.path[len("library/"):] if self.path.startswith("library/") else self.path
            return f"{path}:{self.tag}"
        return f"{self.registry}/{self.path}:{self.tag}"

    @property
    def local_repo(self) -> str:
        return self.local_name.rsplit(":", 1)[0]

    def source_repo(self, mirror: str) -> str:
        """Where it is fetched from, without the tag: host[/prefix]/path."""
        if self.registry == HUB and mirror:
            return f"{mirror.rstrip('/')}/{self.path}"
        return f"{self.registry}/{self.path}"


def tls_verify(source: str, setting: str) -> bool:
    """skopeo's TLS verification for a source repo: auto is off only for loopback registries."""
    if setting != "auto":
        return setting == "true"
    host = source.split("/", 1)[0]
    return not (host == "localhost" or host.startswith(("localhost:", "127.")))


def auth_host(mirror: str) -> str:
    """The registry the credentials belong to: the mirror's host, else Docker Hub."""
    return mirror.split("/", 1)[0] if mirror else HUB


def authfile_text(host: str, username: str, password: str) -> str:
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    return json.dumps({"auths": {host: {"auth": token}}}) + "\n"


def write_private(path: Path, text: str) -> None:
    """A file only its owner can read, from its creation on."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


# --- running commands -----------------------------------------------------------------------


class Stopped(Exception):
    """This program was told to stop: no new command starts, no retry waits."""


class Done(NamedTuple):
    returncode: int
    stdout: bytes
    stderr: str


Run = Callable[..., Done]


class Runner:
    """subprocess.run that remembers its children, so a stop signal can end them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._children: set[subprocess.Popen] = set()
        self._stopping = threading.Event()

    def __call__(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        stdout_to_stderr: bool = False,
    ) -> Done:
        """Run argv; a timeout is reported as returncode 124 (as `timeout` does)."""
        with self._lock:
            if self._stopping.is_set():
                raise Stopped()
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=sys.stderr.fileno() if stdout_to_stderr else subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=None if env is None else {**os.environ, **env},
            )
            self._children.add(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            return Done(124, out or b"", (err or b"").decode(errors="replace"))
        finally:
            with self._lock:
                self._children.discard(proc)
        return Done(proc.returncode, out or b"", (err or b"").decode(errors="replace"))

    def stop(self) -> None:
        with self._lock:
            self._stopping.set()
            for proc in self._children:
                proc.kill()

    def sleep(self, seconds: float) -> None:
        """time.sleep that ends early, raising Stopped, once the program is told to stop."""
        if self._stopping.wait(seconds):
            raise Stopped()


def last_line(text: str, limit: int = 300) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:limit] if lines else ""


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --- retries --------------------------------------------------------------------------------


def backoff_seconds(failed_attempt: int, base_s: int, cap_s: int = MAX_BACKOFF_S) -> int:
    """The wait after attempt N (1-based) failed: base, 2 x base, 4 x base... at most cap."""
    return min(base_s * (1 << (failed_attempt - 1)), cap_s)


def with_retries(
    attempt: Callable[[], str],
    *,
    attempts: int,
    base_s: int,
    label: str,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """`attempt()` until it returns, up to `attempts` times; each failure raises PullError
    with one line. The last failure becomes `could not fetch WHAT after N attempts: ...`."""
    number = 1
    while True:
        try:
            return attempt()
        except PullError as exc:
            if number >= attempts:
                raise PullError(f"could not fetch {what} after {number} attempts: {exc}") from None
            wait_s = backoff_seconds(number, base_s)
            log(f"retry {label}: attempt {number}/{attempts} failed ({exc}); next in {wait_s}s")
            sleep(wait_s)
            number += 1


# --- fetching one image into the engine -------------------------------------------------------


@dataclass
class Fetcher:
    """skopeo with the credentials, TLS policy, timeout and retries of these settings."""

    settings: Settings
    run: Run
    authfile: Path | None = None
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def _auth(self) -> list[str]:
        return ["--authfile", str(self.authfile)] if self.authfile else []

    def _tls(self, source: str) -> str:
        return "true" if tls_verify(source, self.settings.tls_verify) else "false"

    def manifest_digest(self, source: str, tag: str, timeout: float) -> str:
        """The registry's digest of source:tag: the sha256 of its raw manifest."""
        done = self.run(
            ["skopeo", "inspect", "--raw", f"--tls-verify={self._tls(source)}", *self._auth(),
             "--retry-times", "0", f"docker://{source}:{tag}"],
            timeout=timeout,
        )
        if done.returncode != 0:
            raise PullError(self._why(done))
        return sha256_digest(done.stdout)

    def _why(self, done: Done) -> str:
        if done.returncode == 124:
            return f"timed out after {self.settings.pull_timeout}s"
        return last_line(done.stderr) or f"skopeo exited with code {done.returncode}, no message"

    def fetch(self, label: str, ref: ImageRef, local_ref: str, tmpdir: Path) -> str:
        """ref into the engine as local_ref; returns the registry digest that was copied (read
        first, then copied by digest, so it is the one we got; a pinned ref is copied as is).
        skopeo streams into the engine, where a cut stream leaves no image behind."""
        source = ref.source_repo(self.settings.mirror)
        tmpdir.mkdir(parents=True, exist_ok=True)

        def attempt() -> str:
            deadline = self.clock() + self.settings.pull_timeout
            digest = ref.digest or self.manifest_digest(source, ref.tag, self.settings.pull_timeout)
            done = self.run(
                ["skopeo", "copy", "-q", f"--src-tls-verify={self._tls(source)}", *self._auth(),
                 "--retry-times", "0", "--override-os", "linux", "--override-arch", "amd64",
                 f"docker://{source}@{digest}", f"docker-daemon:{local_ref}"],
                timeout=max(1.0, deadline - self.clock()),
                env={"TMPDIR": str(tmpdir)},
            )
            if done.returncode != 0:
                raise PullError(self._why(done))
            return digest

        what = f"{source}@{ref.digest}" if ref.digest else f"{source}:{ref.tag}"
        return with_retries(attempt, attempts=self.settings.attempts,
                            base_s=self.settings.backoff_s, label=label, what=what,
                            sleep=self.sleep)


# --- the engine ------------------------------------------------------------------------------


def docker_json_lines(text: str) -> list[dict]:
    """`docker ... --format '{{json .}}'` output: one object per line."""
    rows = []
    for line in text.splitlines():
        if line.strip():
            value = json.loads(line)
            if isinstance(value, dict):
                rows.append(value)
    return rows


def local_image_ids(rows: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """repo:tag -> image ID from `docker images --no-trunc --format '{{json .}}'`."""
    ids = {}
    for row in rows:
        repo, tag = row.get("Repository", ""), row.get("Tag", "")
        if repo and tag and repo != "<none>" and tag != "<none>":
            ids[f"{repo}:{tag}"] = row.get("ID", "")
    return ids


class Inspected(NamedTuple):
    platform: str  # os/architecture
    repo_digests: tuple[str, ...]


def inspected(objects: Iterable[Mapping]) -> dict[str, Inspected]:
    """image ID -> platform and RepoDigests from `docker image inspect` (its JSON array)."""
    return {
        str(obj.get("Id", "")): Inspected(
            f"{obj.get('Os', '')}/{obj.get('Architecture', '')}",
            tuple(obj.get("RepoDigests") or ()),
        )
        for obj in objects
        if obj.get("Id")
    }


@dataclass
class Engine:
    """The few Docker CLI calls this program makes."""

    run: Run

    def answers(self) -> bool:
        return self.run(["docker", "info"], timeout=60).returncode == 0

    def has_buildx(self) -> bool:
        return self.run(["docker", "buildx", "version"], timeout=60).returncode == 0

    def exists(self, ref: str) -> bool:
        return self.run(["docker", "image", "inspect", ref], timeout=60).returncode == 0

    def listing(self) -> dict[str, str]:
        done = self.run(["docker", "images", "--no-trunc", "--format", "{{json .}}"], timeout=300)
        if done.returncode != 0:
            raise PullError(f"docker images failed: {last_line(done.stderr)}")
        return local_image_ids(docker_json_lines(done.stdout.decode()))

    def inspect(self, refs: Sequence[str]) -> dict[str, Inspected]:
        if not refs:
            return {}
        # With one of several refs gone it fails, yet still prints the others.
        done = self.run(["docker", "image", "inspect", *refs], timeout=300)
        try:
            objects = json.loads(done.stdout or b"[]")
        except ValueError:
            return {}
        return inspected(objects) if isinstance(objects, list) else {}

    def remove(self, ref: str) -> None:
        self.run(["docker", "rmi", ref], timeout=120)


# --- the result table and the recorded registry digests ---------------------------------------


class Result(NamedTuple):
    ok: bool
    image_id: str = ""
    how: str = ""  # present | pulled
    digest: str = ""  # the registry digest, for pulled images
    reason: str = ""  # for failures


def parse_state(text: str) -> dict[str, tuple[str, str]]:
    """image -> (image ID, registry digest) from repo-digests.tsv; malformed lines skipped."""
    state = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[0] and parts[2]:
            state[parts[0]] = (parts[1], parts[2])
    return state


def merge_state(old: Mapping[str, tuple[str, str]], results: Mapping[str, Result]) -> str:
    """The state with this run's pulls recorded (newest wins), as sorted TSV."""
    merged = dict(old)
    for image, result in results.items():
        if result.ok and result.how == "pulled" and result.digest:
            merged[image] = (result.image_id, result.digest)
    return "".join(f"{image}\t{i}\t{d}\n" for image, (i, d) in sorted(merged.items()))


def repo_digests(
    ready: Mapping[str, Result],
    state: Mapping[str, tuple[str, str]],
    engine_digests: Mapping[str, Sequence[str]],
    mirror: str,
) -> dict[str, str]:
    """image -> registry digest, only where it belongs to the image ID present now (a re-tagged
    image has none): recorded at pull time, else the engine's RepoDigests of an image pulled by
    other means (docker pull) from its own repo or its source."""
    found = {}
    for image, result in sorted(ready.items()):
        recorded = state.get(image)
        if recorded and recorded[0] == result.image_id:
            found[image] = recorded[1]
            continue
        if result.how != "present":
            continue
        ref = ImageRef.parse(image)
        repos = {ref.local_repo, ref.source_repo(mirror)}
        for entry in engine_digests.get(result.image_id, ()):
            repo, _, digest = entry.partition("@")
            if repo in repos and digest:
                found[image] = digest
                break
    return found


def failures(results: Mapping[str, Result], images: Sequence[str]) -> list[str]:
    """The reason of every image that is not ready, in the order of `images`."""
    return [
        results[i].reason if i in results else f"{i}: its pull worker died without a result"
        for i in images
        if i not in results or not results[i].ok
    ]


def failure_summary(failed: Sequence[str], ready: int, total: int) -> str:
    """The one line for a set with failures: the count and the first reason."""
    more = f" (and {len(failed) - 1} more above)" if len(failed) > 1 else ""
    return f"{ready}/{total} images ready; {len(failed)} failed: {failed[0]}{more}"


def run_pool(
    items: Sequence[str], work: Callable[[str], None], concurrency: int,
    before: Callable[[str], None] = lambda _: None,
) -> None:
    """`work(item)` for every item, at most `concurrency` at once, in order of submission."""
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = []
        for item in items:
            def job(item: str = item) -> None:
                before(item)
                work(item)
            futures.append(pool.submit(job))
        for future in futures:
            future.result()


# --- the egress-control sidecar ---------------------------------------------------------------


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


def parse_dockerfile(text: str, name: str = "Dockerfile") -> Recipe:
    """A Dockerfile of only FROM (one, no flags) + COPY [--chmod=MODE] SRC... DEST: what
    `docker create` + `docker cp` + `docker commit` reproduce. Anything else (a future Harbor)
    is refused rather than guessed."""
    base = ""
    copies: list[Copy] = []
    refuse = "cannot be assembled without docker buildx: install buildx"
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            raise PullError(f"{name}: line continuations {refuse}")
        op, rest = (stripped.split(None, 1) + [""])[:2]
        if op.upper() == "FROM":
            if base or len(rest.split()) != 1 or rest.startswith("--"):
                raise PullError(f"{name}: 'FROM {rest}' {refuse}")
            base = rest
        elif op.upper() == "COPY":
            if not base:
                raise PullError(f"{name}: COPY before FROM")
            args = rest.split()
            mode = None
            while args and args[0].startswith("--"):
                match = _CHMOD.fullmatch(args[0])
                if not match:
                    raise PullError(f"{name}: 'COPY {args[0]}' {refuse}")
                mode = int(match.group(1), 8)
                args = args[1:]
            if len(args) < 2:
                raise PullError(f"{name}: 'COPY {rest}' names no source")
            copies.append(Copy(tuple(args[:-1]), args[-1], mode))
        else:
            raise PullError(f"{name}: instruction {op.upper()} {refuse}")
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
# so the tag stays right when the wheel changes. Run with HARBOR_PYTHON.
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

    settings: Settings
    engine: Engine
    fetcher: Fetcher
    run: Run
    work: Path
    image: str = ""
    context: str = ""

    def ensure(self) -> str:
        """The sidecar status; raises PullError when it is required and cannot be had."""
        s = self.settings
        self.image, self.context = s.sidecar_image, s.sidecar_context
        tasks = s.offline_tasks
        if not tasks:
            return "not-needed"
        if s.harbor_python:
            self._from_harbor()
        action = sidecar_action(
            needed=True, present=self.engine.exists(self.image), buildx=self.engine.has_buildx(),
            harbor_python=bool(s.harbor_python), context=bool(self.context),
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
                if s.require_sidecar:
                    raise
                log(f"image_set: {exc}")
                log(f"warning (REQUIRE_SIDECAR=0): the egress sidecar could not be assembled "
                    f"(above); {len(tasks)} no-network tasks will fail at launch")
                return "missing"
            return "assembled"
        if action == "build-at-launch":
            log(f"egress sidecar {self.image} absent; docker buildx is here, so Harbor will build "
                "it at launch (its gost base image must be reachable then); set HARBOR_PYTHON to "
                "build it now")
            return "build-at-launch"
        message = (
            f"docker buildx is missing and the egress sidecar {self.image} is not present, so "
            f"{len(tasks)} no-network tasks would fail at launch: {', '.join(tasks)}; set "
            "HARBOR_PYTHON (the sidecar is then assembled here), install the docker buildx "
            "plugin, or docker load that image"
        )
        if s.require_sidecar:
            raise PullError(message)
        log(f"warning (REQUIRE_SIDECAR=0): {message}")
        return "missing"

    def _from_harbor(self) -> None:
        python = self.settings.harbor_python
        if not (os.path.isfile(python) and os.access(python, os.X_OK)):
            raise PullError(f"HARBOR_PYTHON={python} is not an executable: point it at the Harbor "
                            "venv's python or leave it empty")
        done = self.run([python, "-c", HARBOR_SIDECAR_TAG], timeout=300, env=NO_TELEMETRY)
        lines = done.stdout.decode().splitlines()
        if done.returncode != 0 or len(lines) < 2 or not lines[0]:
            raise PullError(f"could not derive the sidecar tag with HARBOR_PYTHON={python}: is "
                            f"Harbor installed in that venv? ({last_line(done.stderr)})")
        self.image = lines[0]
        self.context = self.context or lines[1]

    def _build(self) -> None:
        log(f"building egress sidecar {self.image} with Harbor's own builder (docker buildx)")
        done = self.run([self.settings.harbor_python, "-c", HARBOR_SIDECAR_BUILD],
                        timeout=self.settings.pull_timeout, env=NO_TELEMETRY,
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
                            "HARBOR_PYTHON belongs to another Harbor version?")

    def assemble(self) -> None:
        """FROM + COPY without buildx: docker create + docker cp + docker commit (Harbor looks
        the image up by tag only)."""
        context = Path(self.context)
        dockerfile = context / "Dockerfile"
        if not dockerfile.is_file():
            raise PullError(f"SIDECAR_CONTEXT={context} has no Dockerfile: point it at Harbor's "
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
                            f"{recipe.base.split('@')[0]} from MIRROR") from None
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


# --- the whole set ----------------------------------------------------------------------------


@dataclass
class ImageSet:
    settings: Settings
    run: Run
    work: Path
    sleep: Callable[[float], None] = time.sleep
    results: dict[str, Result] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.engine = Engine(self.run)
        authfile = None
        s = self.settings
        if s.username:
            authfile = self.work / "auth.json"
            write_private(authfile, authfile_text(auth_host(s.mirror), s.username, s.password))
        self.fetcher = Fetcher(s, self.run, authfile, sleep=self.sleep)

    def ready_count(self) -> int:
        with self._lock:
            return sum(1 for r in self.results.values() if r.ok)

    def _record(self, image: str, result: Result) -> None:
        with self._lock:
            self.results[image] = result

    def pull_one(self, image: str) -> None:
        ref = ImageRef.parse(image)
        name = ref.local_name
        key = hashlib.sha256(image.encode()).hexdigest()[:16]
        try:
            digest = self.fetcher.fetch(image, ref, name, self.work / "scratch" / key)
        except PullError as exc:
            self._record(image, Result(False, reason=str(exc)))
            return
        finally:
            shutil.rmtree(self.work / "scratch" / key, ignore_errors=True)
        found = self.engine.inspect([name])
        if not found:
            self._record(image, Result(False, reason=f"{image} was copied but the engine does "
                                                      "not list it"))
            return
        image_id, info = next(iter(found.items()))
        if info.platform != AMD64:
            # Leave nothing behind that a later run would take for a ready image.
            self.engine.remove(name)
            self._record(image, Result(False, reason=f"{image} is {info.platform}, not {AMD64} "
                                       "(the registry has no amd64 variant): use an amd64 tag"))
            return
        self._record(image, Result(True, image_id, "pulled", digest))
        log(f"{self.ready_count()}/{len(self.settings.images)} ready (pulled {image})")

    def _pull_guarded(self, image: str) -> None:
        try:
            self.pull_one(image)
        except Exception as exc:  # noqa: BLE001 (a worker must leave a result whatever happens)
            self._record(image, Result(False, reason=f"{image}: its pull failed unexpectedly: "
                                       f"{type(exc).__name__}: {exc}"))

    def present(self) -> tuple[list[str], dict[str, Inspected]]:
        """Record what is already here (two engine calls, no registry request); the rest."""
        ids = self.engine.listing()
        names = {image: ImageRef.parse(image).local_name for image in self.settings.images}
        wanted = sorted({ids[n] for n in names.values() if n in ids})
        info = self.engine.inspect(wanted)
        to_pull = []
        for image in self.settings.images:
            image_id = ids.get(names[image], "")
            platform = info[image_id].platform if image_id in info else ""
            if image_id and platform == AMD64:
                self._record(image, Result(True, image_id, "present"))
            else:
                if image_id:
                    log(f"{image} is present as {platform or 'unknown'}, not {AMD64}: "
                        "pulling it again")
                to_pull.append(image)
        return to_pull, info

    def pinned(self, ready: Mapping[str, Result], known: Mapping[str, str]) -> dict[str, str]:
        pins = {}
        for image in sorted(ready):
            ref = ImageRef.parse(image)
            digest = known.get(image)
            if not digest:
                # Present but never pulled here: the only source of its digest is the registry.
                source = ref.source_repo(self.settings.mirror)
                try:
                    digest = self.fetcher.manifest_digest(source, ref.tag,
                                                          self.settings.pull_timeout)
                except PullError as exc:
                    raise PullError(f"PIN_DIGESTS=1: cannot read the registry digest of {image} "
                                    f"from {source}: {exc}") from None
                log(f"warning: {image} was present but not pulled here; pinned to the registry's "
                    f"current {digest}, which may not be the local image")
            pins[image] = f"{ref.local_repo}@{digest}"
        return pins

    def run_all(self, sidecar_status: str, sidecar_image: str) -> dict:
        s = self.settings
        total = len(s.images)
        to_pull, info = self.present()
        log(f"{self.ready_count()}/{total} ready; {len(to_pull)} to pull (concurrency "
            f"{s.concurrency}, up to {s.attempts} attempts each)")
        run_pool(to_pull, self._pull_guarded, s.concurrency,
                 before=lambda image: log(f"pulling {image} ({self.ready_count()}/{total} ready)"))

        s.state_dir.mkdir(parents=True, exist_ok=True)
        state_path = s.state_dir / STATE_FILE
        state = parse_state(state_path.read_text() if state_path.exists() else "")
        merged = merge_state(state, self.results)
        tmp = state_path.with_name(STATE_FILE + ".tmp")
        tmp.write_text(merged)
        os.replace(tmp, state_path)
        failed = failures(self.results, s.images)
        if failed:
            for reason in failed:
                log(reason)
            raise PullError(failure_summary(failed, self.ready_count(), total))

        ready = {image: self.results[image] for image in s.images}
        known = repo_digests(ready, parse_state(merged),
                             {i: v.repo_digests for i, v in info.items()}, s.mirror)
        pulled = sum(1 for r in ready.values() if r.how == "pulled")
        log(f"{total}/{total} ready ({pulled} pulled, {total - pulled} already present)")
        out = {
            "ready": len(ready),
            "total": total,
            "pulled": pulled,
            "present": len(ready) - pulled,
            "digests": {image: ready[image].image_id for image in sorted(ready)},
            "repo_digests": known,
            "sidecar": {"status": sidecar_status, "image": sidecar_image},
        }
        if s.pin_digests:
            out["pinned"] = self.pinned(ready, known)
        return out


def check_tools(which: Callable[[str], str | None] = shutil.which) -> None:
    for tool, package in (("docker", "docker.io"), ("skopeo", "skopeo")):
        if which(tool) is None:
            raise PullError(f"{tool} not found on this host: install it (Debian package: "
                            f"{package})")


def read_secret_fd(env: Mapping[str, str]) -> str | None:
    """The password on the descriptor REGISTRY_PASSWORD_FD names (how image_set.sh passes it),
    without its final newline; None when there is no such descriptor."""
    fd = env.get("REGISTRY_PASSWORD_FD", "")
    if not fd:
        return None
    if not fd.isdecimal():
        raise PullError(f"REGISTRY_PASSWORD_FD={fd}: set a descriptor number or leave it unset")
    try:
        with os.fdopen(int(fd), "rb") as source:
            data = source.read().decode()
    except OSError as exc:
        raise PullError(f"REGISTRY_PASSWORD_FD={fd} cannot be read ({exc.strerror}): "
                        "leave it unset to read REGISTRY_PASSWORD") from None
    return data[:-1] if data.endswith("\n") else data


def main() -> int:
    runner = Runner()

    def on_signal(signum: int, _frame: object) -> None:
        runner.stop()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        settings = settings_from_env(os.environ, read_secret_fd(os.environ))
        # Children (skopeo, docker) need only the authfile, not the secret in their environment.
        os.environ.pop("REGISTRY_PASSWORD", None)
        check_tools()
        engine = Engine(runner)
        if not engine.answers():
            raise PullError("the Docker engine does not answer on this host: start dockerd")
        try:
            settings.scratch_dir.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix="image_set.", dir=settings.scratch_dir))
        except OSError as exc:
            raise PullError(f"SCRATCH_DIR={settings.scratch_dir} is not writable ({exc}): point "
                            "it at a writable disk") from None
        try:
            images = ImageSet(settings, runner, work, sleep=runner.sleep)
            sidecar = Sidecar(settings, images.engine, images.fetcher, runner, work)
            status = sidecar.ensure()
            result = images.run_all(status, sidecar.image)
        finally:
            runner.stop()
            shutil.rmtree(work, ignore_errors=True)
    except PullError as exc:
        print(f"image_set: {exc}", file=sys.stderr, flush=True)
        return 1
    print(json.dumps(result, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
