"""ImageSet on the Harbor host: every task image of the manifest present as linux/amd64.

create: what this module owns is the set: its inputs checked (the manifest's images, the
mirror, the credentials, the images section's concurrency, retries, backoff and timeout), what
is present already (two engine calls, no registry request), the pool that pulls the rest
(image_pull.py, the pull engine), the egress sidecar checked before any pull (image_sidecar.py),
the digests recorded between runs, and the one JSON the program reads:

    {"ready", "total", "pulled", "present", "digests", "repo_digests",
     "sidecar": {"status", "image"}, "pinned" (pin_digests only)}

`digests` holds each image's local image ID (the sha256 of its config), known for every present
image without asking any registry, identical whichever mirror served it, and what the engine
runs. `repo_digests` holds the registry manifest digest, which `docker load` forgets: it is
recorded in `state_dir` when the image is pulled here. An all-present run asks no registry.
The registry password arrives with the secrets on standard input and goes only to a private
authfile in the scratch dir, removed at the end. Tools on the host: docker, skopeo.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .image_pull import (
    AMD64,
    STATE_FILE,
    Engine,
    Fetcher,
    ImageRef,
    Inspected,
    PullError,
    Result,
    Run,
    Runner,
    auth_host,
    authfile_text,
    failure_summary,
    failures,
    log,
    merge_state,
    parse_state,
    repo_digests,
    run_pool,
    write_private,
)
from .image_sidecar import Sidecar
from .step import emit, verb


@dataclass(frozen=True)
class Inputs:
    images: list[str]
    # Tasks whose network policy is not public: Harbor 0.21.0 runs them behind its sidecar.
    no_network_tasks: list[str]
    # A registry host[:port][/prefix] serving Docker Hub images (images.mirror).
    mirror: str | None
    concurrency: int
    # Retries per image after its first attempt, then it is reported as failed.
    retries: int
    # The wait after the first failed attempt; it doubles per attempt, at most a minute.
    retry_backoff_s: int
    # Bound on one attempt (manifest read + copy).
    pull_timeout_s: int
    pin_digests: bool
    require_sidecar: bool
    sidecar_image: str
    # The sidecar's build context (None: Harbor's, when harbor_python is given).
    sidecar_context: str | None
    # The Harbor venv's python: derives the sidecar tag and builds or assembles a missing one.
    harbor_python: str | None
    # Where registry digests of pulled images are kept between runs (`~` is this host's home).
    state_dir: str
    # A private work dir (skopeo's temp files, the authfile): a disk, not a small tmpfs.
    scratch_dir: str
    registry_username: str | None
    # A secret (on standard input).
    registry_password: str | None


@dataclass(frozen=True)
class Settings:
    """The inputs, checked and in their working form."""

    images: tuple[str, ...]
    mirror: str
    concurrency: int
    retries: int
    backoff_s: int
    pull_timeout: int
    username: str
    password: str = field(repr=False)
    pin_digests: bool
    state_dir: Path
    scratch_dir: Path
    offline_tasks: tuple[str, ...]
    require_sidecar: bool
    sidecar_image: str
    harbor_python: str
    sidecar_context: str

    @property
    def attempts(self) -> int:
        return self.retries + 1


def words(values: list[str]) -> tuple[str, ...]:
    """One entry per non-blank value, whitespace removed, sorted and unique."""
    return tuple(sorted({"".join(str(value).split()) for value in values} - {""}))


def _whole(key: str, value: object, minimum: int, hint: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise PullError(f"{key}={value}: {hint}")
    return value


def _flag(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise PullError(f"{key}={value}: set true or false")
    return value


def settings(inputs: Inputs) -> Settings:
    """The inputs, checked: each bad one fails naming its key."""
    concurrency = _whole("concurrency", inputs.concurrency, 1, "set a whole number >= 1")
    retries = _whole("retries", inputs.retries, 0, "set a whole number >= 0")
    backoff = _whole("retry_backoff_s", inputs.retry_backoff_s, 0,
                     "set a whole number of seconds")
    pull_timeout = _whole("pull_timeout_s", inputs.pull_timeout_s, 1, "set seconds >= 1")
    pin = _flag("pin_digests", inputs.pin_digests)
    require_sidecar = _flag("require_sidecar", inputs.require_sidecar)
    username = inputs.registry_username or ""
    secret = inputs.registry_password or ""
    both = "set both or neither"
    if username and not secret:
        raise PullError(f"registry_username is set but registry_password is empty: {both}")
    if secret and not username:
        raise PullError(f"registry_password is set but registry_username is empty: {both}")
    images = words(inputs.images)
    if not images:
        raise PullError("images is empty: pass the manifest's images")
    for image in images:
        if "@" in image:
            raise PullError(
                f"image {image} is pinned by digest in the dataset: use its tag "
                "(pinning is images.pin_digests)"
            )
    return Settings(
        images=images,
        mirror=inputs.mirror or "",
        concurrency=concurrency,
        retries=retries,
        backoff_s=backoff,
        pull_timeout=pull_timeout,
        username=username,
        password=secret,
        pin_digests=pin,
        state_dir=Path(inputs.state_dir).expanduser(),
        scratch_dir=Path(inputs.scratch_dir).expanduser(),
        offline_tasks=words(inputs.no_network_tasks),
        require_sidecar=require_sidecar,
        sidecar_image=inputs.sidecar_image,
        harbor_python=inputs.harbor_python or "",
        sidecar_context=inputs.sidecar_context or "",
    )


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
        self.fetcher = Fetcher(s.mirror, s.pull_timeout, s.attempts, s.backoff_s, self.run,
                               authfile, sleep=self.sleep)

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
                    raise PullError(f"images.pin_digests: cannot read the registry digest of "
                                    f"{image} from {source}: {exc}") from None
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


@verb(Inputs)
def create(inputs: Inputs) -> None:
    runner = Runner()

    def on_signal(signum: int, _frame: object) -> None:
        runner.stop()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    s = settings(inputs)
    check_tools()
    engine = Engine(runner)
    if not engine.answers():
        raise PullError("the Docker engine does not answer on this host: start dockerd")
    try:
        s.scratch_dir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="image_set.", dir=s.scratch_dir))
    except OSError as exc:
        raise PullError(f"images.scratch_dir={s.scratch_dir} is not writable ({exc}): point it "
                        "at a writable disk") from None
    try:
        images = ImageSet(s, runner, work, sleep=runner.sleep)
        sidecar = Sidecar(s.sidecar_image, s.sidecar_context, s.offline_tasks, s.harbor_python,
                          s.require_sidecar, s.pull_timeout, images.engine, images.fetcher,
                          runner, work)
        status = sidecar.ensure()
        result = images.run_all(status, sidecar.image)
    finally:
        runner.stop()
        shutil.rmtree(work, ignore_errors=True)
    emit(result)
