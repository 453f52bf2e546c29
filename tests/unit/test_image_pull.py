"""The image set's host modules without a peer (hostside/image_set.py, image_pull.py,
image_sidecar.py): image names, inputs, retry policy, the pool, the digest state, the sidecar's
Dockerfile interpreter, and whole runs against a fake engine and registry (the real ones are in
tests/images/test_image_set_script.py)."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from components.config import ImagesConfig
from components.seam.code import module_closure
from hostside import image_pull as ip
from hostside import image_set as iset
from hostside import image_sidecar as sc
from tests.harbor.conftest import seam_step

IMAGES = ImagesConfig()


def inputs(**changes) -> iset.Inputs:
    """The step's inputs as the component passes them for the config's defaults."""
    values = {
        "images": ["a/b:1"], "no_network_tasks": [], "mirror": None,
        "concurrency": IMAGES.concurrency, "retries": IMAGES.retries,
        "retry_backoff_s": IMAGES.retry_backoff_s, "pull_timeout_s": IMAGES.pull_timeout_s,
        "pin_digests": IMAGES.pin_digests, "require_sidecar": IMAGES.require_sidecar,
        "sidecar_image": IMAGES.sidecar_image, "sidecar_context": None, "harbor_python": None,
        "state_dir": "~/.local/state/benchstack/image-set", "scratch_dir": IMAGES.scratch_dir,
        "registry_username": None, "registry_password": None,
    }
    return iset.Inputs(**(values | changes))

# --- image names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "registry", "path", "tag", "local"),
    [
        ("alexgshaw/fix-git:20260403", "docker.io", "alexgshaw/fix-git", "20260403",
         "alexgshaw/fix-git:20260403"),
        ("debian", "docker.io", "library/debian", "latest", "debian:latest"),
        ("docker.io/library/debian:12", "docker.io", "library/debian", "12", "debian:12"),
        ("index.docker.io/foo/bar", "docker.io", "foo/bar", "latest", "foo/bar:latest"),
        ("127.0.0.1:5000/team/img:1", "127.0.0.1:5000", "team/img", "1",
         "127.0.0.1:5000/team/img:1"),
        ("localhost/img:2", "localhost", "img", "2", "localhost/img:2"),
        ("ghcr.io/org/repo", "ghcr.io", "org/repo", "latest", "ghcr.io/org/repo:latest"),
        ("registry:5000/a/b", "registry:5000", "a/b", "latest", "registry:5000/a/b:latest"),
        # A first component without '.', ':' or localhost is a Hub namespace, not a host.
        ("myteam/sub/img:3", "docker.io", "myteam/sub/img", "3", "myteam/sub/img:3"),
    ],
)
def test_image_names(ref: str, registry: str, path: str, tag: str, local: str) -> None:
    parsed = ip.ImageRef.parse(ref)
    assert (parsed.registry, parsed.path, parsed.tag, parsed.digest) == (registry, path, tag, "")
    assert parsed.local_name == local
    assert parsed.local_repo == local.rsplit(":", 1)[0]


def test_a_pinned_reference_keeps_its_digest_and_tag() -> None:
    ref = ip.ImageRef.parse("gogost/gost:3.2.7@sha256:" + "a" * 64)
    assert (ref.path, ref.tag, ref.digest) == ("gogost/gost", "3.2.7", "sha256:" + "a" * 64)
    assert ref.local_name == "gogost/gost:3.2.7"
    assert ip.ImageRef.parse("gogost/gost@sha256:" + "b" * 64).tag == "latest"


def test_the_mirror_serves_hub_images_only() -> None:
    hub = ip.ImageRef.parse("debian:12")
    assert hub.source_repo("") == "docker.io/library/debian"
    assert hub.source_repo("127.0.0.1:5000") == "127.0.0.1:5000/library/debian"
    assert hub.source_repo("mirror.example:443/hub/") == "mirror.example:443/hub/library/debian"
    other = ip.ImageRef.parse("ghcr.io/org/repo:1")
    assert other.source_repo("127.0.0.1:5000") == "ghcr.io/org/repo"


@pytest.mark.parametrize(
    ("source", "verify"),
    [
        ("127.0.0.1:5000/library/debian", False),
        ("localhost:5000/x", False),
        ("localhost/x", False),
        ("docker.io/library/debian", True),
        ("mirror.example/x", True),
    ],
)
def test_tls_verification_is_off_only_for_loopback(source: str, verify: bool) -> None:
    assert ip.tls_verify(source) is verify


# --- inputs -----------------------------------------------------------------------------------


def test_the_inputs_in_their_working_form() -> None:
    s = iset.settings(inputs(images=[" b/x:1 ", "", "a/y:2", "b/x:1"],
                             no_network_tasks=["z", " a ", "", "z"]))
    assert s.images == ("a/y:2", "b/x:1") and s.offline_tasks == ("a", "z")
    assert (s.concurrency, s.retries, s.attempts) == (IMAGES.concurrency, IMAGES.retries,
                                                      IMAGES.retries + 1)
    assert s.state_dir == Path.home() / ".local/state/benchstack/image-set"
    assert s.scratch_dir == Path("/var/tmp") and s.mirror == ""


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("concurrency", 0), ("concurrency", "two"), ("concurrency", True), ("retries", -1),
        ("retry_backoff_s", 1.5), ("pull_timeout_s", 0), ("pin_digests", "yes"),
        ("require_sidecar", 1),
    ],
)
def test_a_bad_input_names_its_key(key: str, value) -> None:
    with pytest.raises(ip.PullError) as err:
        iset.settings(inputs(**{key: value}))
    assert str(err.value).startswith(f"{key}={value}: ")


def test_images_must_be_given_by_tag() -> None:
    with pytest.raises(ip.PullError, match="images is empty"):
        iset.settings(inputs(images=[" ", ""]))
    with pytest.raises(ip.PullError, match="pinned by digest.*images.pin_digests"):
        iset.settings(inputs(images=["a/b@sha256:" + "0" * 64]))


def test_credentials_come_in_pairs_and_the_password_stays_out_of_repr() -> None:
    with pytest.raises(ip.PullError, match="registry_username is set but registry_password"):
        iset.settings(inputs(registry_username="u"))
    with pytest.raises(ip.PullError, match="registry_password is set but registry_username"):
        iset.settings(inputs(registry_password="pw"))
    s = iset.settings(inputs(registry_username="u", registry_password="pw-secret"))
    assert s.password == "pw-secret" and "pw-secret" not in repr(s)


def test_the_authfile_is_private_and_names_the_registry(tmp_path: Path) -> None:
    assert ip.auth_host("") == "docker.io"
    assert ip.auth_host("127.0.0.1:5000/hub") == "127.0.0.1:5000"
    path = tmp_path / "auth.json"
    ip.write_private(path, ip.authfile_text("127.0.0.1:5000", 'b"ench', "p:w"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    auth = json.loads(path.read_text())["auths"]["127.0.0.1:5000"]["auth"]
    assert base64.b64decode(auth).decode() == 'b"ench:p:w'


# --- retries ----------------------------------------------------------------------------------


def test_backoff_doubles_up_to_a_minute() -> None:
    assert [ip.backoff_seconds(n, 5) for n in range(1, 8)] == [5, 10, 20, 40, 60, 60, 60]
    assert [ip.backoff_seconds(n, 0) for n in (1, 2, 3)] == [0, 0, 0]
    assert ip.backoff_seconds(2, 50, cap_s=70) == 70


def test_retries_wait_then_succeed(capsys: pytest.CaptureFixture[str]) -> None:
    outcomes = iter([ip.PullError("reset"), ip.PullError("503"), "sha256:ok"])
    sleeps: list[float] = []

    def attempt() -> str:
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    got = ip.with_retries(attempt, attempts=5, base_s=5, label="img:1", what="m/img:1",
                          sleep=sleeps.append)
    assert got == "sha256:ok" and sleeps == [5, 10]
    err = capsys.readouterr().err
    assert "retry img:1: attempt 1/5 failed (reset); next in 5s" in err
    assert "retry img:1: attempt 2/5 failed (503); next in 10s" in err


def test_retries_give_up_after_the_attempts_with_the_last_reason() -> None:
    calls = []

    def attempt() -> str:
        calls.append(1)
        raise ip.PullError(f"failure {len(calls)}")

    sleeps: list[float] = []
    with pytest.raises(ip.PullError) as err:
        ip.with_retries(attempt, attempts=3, base_s=1, label="x", what="m/x:1", sleep=sleeps.append)
    assert str(err.value) == "could not fetch m/x:1 after 3 attempts: failure 3"
    assert len(calls) == 3 and sleeps == [1, 2]
    with pytest.raises(ip.PullError, match="after 1 attempts"):
        ip.with_retries(attempt, attempts=1, base_s=1, label="x", what="m/x:1",
                        sleep=sleeps.append)
    assert sleeps == [1, 2], "no wait after the last attempt"


def test_a_stop_is_not_retried() -> None:
    runner = ip.Runner()
    runner.stop()
    with pytest.raises(ip.Stopped):
        ip.with_retries(lambda: runner(["true"]), attempts=5, base_s=0, label="x", what="x",
                        sleep=runner.sleep)
    with pytest.raises(ip.Stopped):
        runner.sleep(30)


def test_the_runner_reports_a_timeout_as_124() -> None:
    done = ip.Runner()(["sleep", "5"], timeout=0.2)
    assert done.returncode == 124
    ok = ip.Runner()(["sh", "-c", "printf out; printf err >&2; exit 3"], env={"X": "1"})
    assert ok == ip.Done(3, b"out", "err")


def test_the_pool_keeps_to_its_concurrency() -> None:
    running, peak, seen = [0], [0], []
    lock = threading.Lock()

    def work(item: str) -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
            seen.append(item)

    started: list[str] = []
    ip.run_pool([f"i{n}" for n in range(7)], work, 3, before=started.append)
    assert peak[0] == 3 and sorted(seen) == sorted(started) == [f"i{n}" for n in range(7)]
    seen.clear()
    ip.run_pool(["a", "b", "c"], work, 1)
    assert seen == ["a", "b", "c"]


# --- the engine's answers and the recorded digests ---------------------------------------------


def test_engine_listings() -> None:
    rows = ip.docker_json_lines(
        '{"Repository":"a/b","Tag":"1","ID":"sha256:1"}\n\n'
        '{"Repository":"<none>","Tag":"<none>","ID":"sha256:2"}\n'
        '{"Repository":"127.0.0.1:5000/c","Tag":"2","ID":"sha256:3"}\n'
    )
    assert ip.local_image_ids(rows) == {"a/b:1": "sha256:1", "127.0.0.1:5000/c:2": "sha256:3"}
    info = ip.inspected([
        {"Id": "sha256:1", "Os": "linux", "Architecture": "amd64", "RepoDigests": ["a/b@sha256:d"]},
        {"Id": "sha256:3", "Os": "linux", "Architecture": "arm64", "RepoDigests": None},
        {"Os": "linux"},
    ])
    assert info == {
        "sha256:1": ip.Inspected("linux/amd64", ("a/b@sha256:d",)),
        "sha256:3": ip.Inspected("linux/arm64", ()),
    }


def test_state_merge_newest_wins_and_skips_what_was_not_pulled() -> None:
    old = ip.parse_state("b:1\tid-b\tsha256:old\nbroken line\nc:1\tid-c\tsha256:c\n\tx\ty\n")
    assert old == {"b:1": ("id-b", "sha256:old"), "c:1": ("id-c", "sha256:c")}
    results = {
        "b:1": ip.Result(True, "id-b2", "pulled", "sha256:new"),
        "a:1": ip.Result(True, "id-a", "pulled", "sha256:a"),
        "p:1": ip.Result(True, "id-p", "present"),
        "f:1": ip.Result(False, reason="nope"),
    }
    merged = ip.merge_state(old, results)
    assert merged == (
        "a:1\tid-a\tsha256:a\nb:1\tid-b2\tsha256:new\nc:1\tid-c\tsha256:c\n"
    )
    assert ip.parse_state(merged) == ip.parse_state(ip.merge_state(ip.parse_state(merged), {}))


def test_repo_digests_belong_to_the_image_present_now() -> None:
    ready = {
        "a/x:1": ip.Result(True, "id-x", "pulled", "sha256:x"),
        "a/retagged:1": ip.Result(True, "id-new", "present"),
        "a/byhand:1": ip.Result(True, "id-h", "present"),
        "a/mirrored:1": ip.Result(True, "id-m", "present"),
        "a/foreign:1": ip.Result(True, "id-f", "present"),
    }
    state = {"a/x:1": ("id-x", "sha256:x"), "a/retagged:1": ("id-old", "sha256:stale")}
    engine = {
        "id-h": ["a/byhand@sha256:h"],
        "id-m": ["other/repo@sha256:nope", "m:5000/a/mirrored@sha256:m"],
        "id-f": ["someone/else@sha256:f"],
        "id-new": ["a/retagged@sha256:fresh"],
    }
    assert ip.repo_digests(ready, state, engine, "m:5000") == {
        "a/x:1": "sha256:x",
        "a/byhand:1": "sha256:h",
        "a/mirrored:1": "sha256:m",
        # The state's digest was of another image ID; the engine knows the present one's.
        "a/retagged:1": "sha256:fresh",
    }


def test_failures_name_the_first_and_count_the_rest() -> None:
    results = {"a:1": ip.Result(True, "i", "pulled", "d"), "b:1": ip.Result(False, reason="b bad")}
    failed = ip.failures(results, ["a:1", "b:1", "c:1"])
    assert failed == ["b bad", "c:1: its pull worker died without a result"]
    assert ip.failure_summary(failed, 1, 3) == (
        "1/3 images ready; 2 failed: b bad (and 1 more above)"
    )
    assert ip.failure_summary(["only"], 0, 1) == "0/1 images ready; 1 failed: only"
    assert ip.failures({"a:1": ip.Result(True, "i", "present")}, ["a:1"]) == []


# --- the sidecar ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("needed", "present", "buildx", "harbor", "context", "action"),
    [
        (False, False, False, False, False, "not-needed"),
        (True, True, False, False, False, "present"),
        (True, True, True, True, True, "present"),
        (True, False, True, True, True, "build"),
        (True, False, False, True, True, "assemble"),
        (True, False, False, False, True, "assemble"),
        (True, False, True, False, False, "build-at-launch"),
        (True, False, True, False, True, "assemble"),
        (True, False, False, False, False, "missing"),
    ],
)
def test_sidecar_decision(needed, present, buildx, harbor, context, action) -> None:
    got = sc.sidecar_action(needed=needed, present=present, buildx=buildx, harbor_python=harbor,
                            context=context)
    assert got == action and got in sc.SIDECAR_STATUSES + ("build", "assemble")


HARBOR_LIKE = """\
# Harbor's egress-control sidecar
FROM gogost/gost:3.2.7@sha256:afc0137758ab4ce399d47a299f9abbacbf522b52a17e59cbb4b4e7a1a66e9196

COPY --chmod=755 entrypoint.sh /opt/egress-sidecar/entrypoint.sh
COPY gost.yaml allowlist.txt /opt/egress-sidecar/
copy network-policy /usr/local/bin/
"""


def test_the_dockerfile_interpreter_reads_harbors_recipe() -> None:
    recipe = sc.parse_dockerfile(HARBOR_LIKE)
    assert recipe.base.startswith("gogost/gost:3.2.7@sha256:afc01377")
    assert recipe.copies == (
        sc.Copy(("entrypoint.sh",), "/opt/egress-sidecar/entrypoint.sh", 0o755),
        sc.Copy(("gost.yaml", "allowlist.txt"), "/opt/egress-sidecar/", None),
        sc.Copy(("network-policy",), "/usr/local/bin/", None),
    )
    assert [c.targets() for c in recipe.copies] == [
        [("entrypoint.sh", "/opt/egress-sidecar/entrypoint.sh")],
        [("gost.yaml", "/opt/egress-sidecar/gost.yaml"),
         ("allowlist.txt", "/opt/egress-sidecar/allowlist.txt")],
        [("network-policy", "/usr/local/bin/network-policy")],
    ]
    # Two sources into a dest without the slash still go into it, as COPY does.
    assert sc.Copy(("a", "sub/b"), "/d", None).targets() == [("a", "/d/a"), ("sub/b", "/d/b")]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("FROM a\nRUN apt-get update\n", "instruction RUN cannot be assembled without docker"),
        ("FROM a\nCOPY x \\\n  /y\n", "line continuations cannot be assembled"),
        ("FROM a AS build\n", "'FROM a AS build' cannot be assembled"),
        ("FROM --platform=linux/amd64 a\n", "'FROM --platform=linux/amd64 a' cannot be"),
        ("FROM a\nFROM b\n", "'FROM b' cannot be assembled"),
        ("COPY x /y\nFROM a\n", "COPY before FROM"),
        ("FROM a\nCOPY --from=build /x /y\n", "'COPY --from=build' cannot be assembled"),
        ("FROM a\nCOPY --chmod=u+x x /y\n", "'COPY --chmod=u+x' cannot be assembled"),
        ("FROM a\nCOPY /y\n", "'COPY /y' names no source"),
        ("# only a comment\n", "has no FROM"),
    ],
)
def test_the_dockerfile_interpreter_refuses_what_it_cannot_reproduce(text: str, reason: str):
    with pytest.raises(ip.PullError) as err:
        sc.parse_dockerfile(text, "/ctx/Dockerfile")
    assert reason in str(err.value) and str(err.value).startswith("/ctx/Dockerfile")


def test_staging_keeps_modes_sets_chmod_and_opens_dirs(tmp_path: Path) -> None:
    context = tmp_path / "ctx"
    context.mkdir()
    for name, mode in (("entrypoint.sh", 0o600), ("gost.yaml", 0o644), ("allowlist.txt", 0o640),
                       ("network-policy", 0o755)):
        (context / name).write_text(name)
        (context / name).chmod(mode)
    stage = tmp_path / "stage"
    old_umask = os.umask(0o077)
    try:
        sc.stage_files(sc.parse_dockerfile(HARBOR_LIKE), context, stage)
    finally:
        os.umask(old_umask)

    def mode(rel: str) -> int:
        return stat.S_IMODE((stage / rel).stat().st_mode)

    assert mode("opt/egress-sidecar/entrypoint.sh") == 0o755
    assert mode("opt/egress-sidecar/gost.yaml") == 0o644
    assert mode("opt/egress-sidecar/allowlist.txt") == 0o640
    assert mode("usr/local/bin/network-policy") == 0o755
    assert {mode(d) for d in ("", "opt", "opt/egress-sidecar", "usr/local/bin")} == {0o755}
    assert (stage / "opt/egress-sidecar/gost.yaml").read_text() == "gost.yaml"

    for bad in ("FROM a\nCOPY ../secret /x\n", "FROM a\nCOPY absent /x\n"):
        with pytest.raises(ip.PullError, match="is not a file of"):
            sc.stage_files(sc.parse_dockerfile(bad), context, tmp_path / "stage2")


# --- whole runs against a fake engine and registry ---------------------------------------------


class FakeHost:
    """Answers the docker and skopeo calls image_pull makes, from dicts; records every call."""

    def __init__(self, registry: dict[str, bytes], local: dict[str, str] | None = None,
                 arch: dict[str, str] | None = None) -> None:
        self.registry = registry  # "source:tag" -> manifest bytes
        self.local = dict(local or {})  # local name -> image ID
        self.arch = dict(arch or {})  # source repo -> architecture of what it serves
        self.calls: list[list[str]] = []
        self.fail_copies: dict[str, int] = {}  # source@digest -> failures before success

    def registry_calls(self) -> list[list[str]]:
        return [c for c in self.calls if c[0] == "skopeo"]

    def __call__(self, argv, *, timeout=None, env=None, stdout_to_stderr=False) -> ip.Done:
        self.calls.append(list(argv))
        if argv[:2] == ["docker", "info"]:
            return ip.Done(0, b"", "")
        if argv[:2] == ["docker", "images"]:
            lines = [json.dumps({"Repository": n.rsplit(":", 1)[0], "Tag": n.rsplit(":", 1)[1],
                                 "ID": i}) for n, i in self.local.items()]
            return ip.Done(0, "\n".join(lines).encode(), "")
        if argv[:3] == ["docker", "image", "inspect"]:
            by_id = {i: n for n, i in self.local.items()}
            objects = []
            for ref in argv[3:]:
                image_id = self.local.get(ref, ref if ref in by_id else None)
                if image_id:
                    name = by_id[image_id]
                    objects.append({"Id": image_id, "Os": "linux",
                                    "Architecture": self.arch.get(name, "amd64"),
                                    "RepoDigests": []})
            return ip.Done(0 if len(objects) == len(argv) - 3 else 1,
                           json.dumps(objects).encode(), "")
        if argv[:2] == ["docker", "rmi"]:
            self.local.pop(argv[2], None)
            return ip.Done(0, b"", "")
        if argv[:3] == ["skopeo", "inspect", "--raw"]:
            key = argv[-1].removeprefix("docker://")
            if key not in self.registry:
                return ip.Done(1, b"", "manifest unknown")
            return ip.Done(0, self.registry[key], "")
        if argv[:2] == ["skopeo", "copy"]:
            src, dest = argv[-2].removeprefix("docker://"), argv[-1].removeprefix("docker-daemon:")
            if self.fail_copies.get(src, 0) > 0:
                self.fail_copies[src] -= 1
                return ip.Done(1, b"", "connection reset by peer")
            self.local[dest] = "sha256:id-" + hashlib.sha256(src.encode()).hexdigest()[:8]
            return ip.Done(0, b"", "")
        raise AssertionError(f"unexpected call {argv}")


MIRROR = "127.0.0.1:5000"


def manifest(name: str) -> bytes:
    return json.dumps({"schemaVersion": 2, "name": name}).encode()


def settings(tmp_path: Path, images: list[str], **changes) -> iset.Settings:
    return iset.settings(inputs(images=images, mirror=MIRROR, state_dir=str(tmp_path / "state"),
                                retry_backoff_s=0, **changes))


def run_set(tmp_path: Path, host: FakeHost, s: iset.Settings) -> dict:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return iset.ImageSet(s, host, work, sleep=lambda _: None).run_all("not-needed", "sidecar:x")


def test_pulls_what_is_missing_then_an_all_present_rerun_asks_no_registry(tmp_path: Path) -> None:
    registry = {f"{MIRROR}/t/a:1": manifest("a"), f"{MIRROR}/t/b:2": manifest("b")}
    host = FakeHost(registry)
    s = settings(tmp_path, ["t/a:1", "t/b:2"], pin_digests=True)
    first = run_set(tmp_path, host, s)
    digest_a = ip.sha256_digest(manifest("a"))
    assert (first["ready"], first["total"], first["pulled"], first["present"]) == (2, 2, 2, 0)
    assert first["repo_digests"]["t/a:1"] == digest_a
    assert first["pinned"]["t/a:1"] == f"t/a@{digest_a}"
    assert first["digests"]["t/a:1"] == host.local["t/a:1"]
    copies = [c for c in host.calls if c[:2] == ["skopeo", "copy"]]
    # Copied by the digest that was read, from the mirror, into the plain local name.
    assert [c[-2:] for c in copies if c[-1].endswith("t/a:1")] == [
        [f"docker://{MIRROR}/t/a@{digest_a}", "docker-daemon:t/a:1"]
    ]
    assert all("--src-tls-verify=false" in c for c in copies)
    state = (tmp_path / "state" / ip.STATE_FILE).read_text()
    assert f"t/a:1\t{host.local['t/a:1']}\t{digest_a}\n" in state

    host.calls.clear()
    again = run_set(tmp_path, host, s)
    assert host.registry_calls() == [], "an all-present re-run must not ask the registry"
    assert len(host.calls) == 2, "two engine calls in all"
    assert (again["pulled"], again["present"]) == (0, 2)
    assert again["pinned"] == first["pinned"] and again["digests"] == first["digests"]


def test_a_failed_image_fails_the_set_but_the_others_are_recorded(tmp_path: Path) -> None:
    host = FakeHost({f"{MIRROR}/t/good:1": manifest("good")})
    s = settings(tmp_path, ["t/good:1", "t/nosuch:1"], retries=2)
    with pytest.raises(ip.PullError) as err:
        run_set(tmp_path, host, s)
    assert str(err.value) == (
        f"1/2 images ready; 1 failed: could not fetch {MIRROR}/t/nosuch:1 after 3 attempts: "
        "manifest unknown"
    )
    assert "t/good:1\t" in (tmp_path / "state" / ip.STATE_FILE).read_text()


def test_a_reset_copy_is_retried_and_reads_the_manifest_again(tmp_path: Path) -> None:
    host = FakeHost({f"{MIRROR}/t/a:1": manifest("a")})
    host.fail_copies[f"{MIRROR}/t/a@{ip.sha256_digest(manifest('a'))}"] = 2
    out = run_set(tmp_path, host, settings(tmp_path, ["t/a:1"], retries=2))
    assert out["pulled"] == 1
    assert [c[1] for c in host.registry_calls()] == ["inspect", "copy"] * 3


def test_an_arm64_image_is_removed_and_named(tmp_path: Path) -> None:
    host = FakeHost({f"{MIRROR}/t/arm:1": manifest("arm")}, arch={"t/arm:1": "arm64"})
    with pytest.raises(ip.PullError, match="t/arm:1 is linux/arm64, not linux/amd64"):
        run_set(tmp_path, host, settings(tmp_path, ["t/arm:1"]))
    assert "t/arm:1" not in host.local


def test_a_present_wrong_architecture_image_is_pulled_again(tmp_path: Path) -> None:
    host = FakeHost({f"{MIRROR}/t/a:1": manifest("a")}, local={"t/a:1": "sha256:old"},
                    arch={"t/a:1": "arm64"})

    def amd64_after_copy(argv, **kw):
        done = FakeHost.__call__(host, argv, **kw)
        if argv[:2] == ["skopeo", "copy"]:
            host.arch.pop("t/a:1")
        return done

    work = tmp_path / "work"
    work.mkdir()
    out = iset.ImageSet(settings(tmp_path, ["t/a:1"]), amd64_after_copy, work,
                      sleep=lambda _: None).run_all("not-needed", "x")
    assert out["pulled"] == 1 and out["digests"]["t/a:1"] != "sha256:old"


def test_credentials_reach_skopeo_only_as_a_private_authfile(tmp_path: Path) -> None:
    host = FakeHost({f"{MIRROR}/t/a:1": manifest("a")})
    s = settings(tmp_path, ["t/a:1"], registry_username="bench", registry_password="hunter2")
    work = tmp_path / "work"
    work.mkdir()
    iset.ImageSet(s, host, work, sleep=lambda _: None).run_all("not-needed", "x")
    authfile = work / "auth.json"
    assert stat.S_IMODE(authfile.stat().st_mode) == 0o600
    for call in host.registry_calls():
        assert "hunter2" not in " ".join(call)
        assert call[call.index("--authfile") + 1] == str(authfile)


# --- the shipped step ------------------------------------------------------------------------


def test_the_step_runs_the_set_its_engine_and_its_sidecar_from_the_host_code() -> None:
    assert {"hostside/image_set.py", "hostside/image_pull.py",
            "hostside/image_sidecar.py"} <= set(module_closure("image_set"))


def test_the_step_through_the_seam_takes_its_password_on_stdin(tmp_path: Path) -> None:
    """No peer needed: a bad input fails in the step, before any docker or skopeo call."""
    given = dataclasses.asdict(inputs(concurrency=0, registry_password="pw-on-stdin"))
    proc = seam_step("image_set", "create", given, secret_inputs=("registry_password",),
                     timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.reason == "image_set: concurrency=0: set a whole number >= 1"
    # The password arrived on standard input (else it would not be "set").
    proc = seam_step("image_set", "create", {**given, "concurrency": 1},
                     secret_inputs=("registry_password",), timeout=60)
    assert proc.reason == ("image_set: registry_password is set but registry_username is "
                           "empty: set both or neither")
