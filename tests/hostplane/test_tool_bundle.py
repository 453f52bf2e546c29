"""ToolBundle's host step (hostside/tool_bundle.py), for real: built from this host's tmux and
python, used in task images.

Two images stand for the task images: the canary (debootstrap minbase: glibc, but neither tmux
nor python) and a static one (bash and busybox, no glibc, no locale data: what musl-based and
static images look like to the bundle). Both also come as images whose Dockerfile sets a
non-root USER (tests/hostplane/user_images.py): a bare uid with no home, and a named user. The
bundle is mounted the way the Harbor compose override mounts it, and used under `bash --login`
as Terminus-2's pane does, as the image's own user.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.harbor_config import TOOLS_BIN_TARGET
from contracts.hostlayout import TOOLS_MOUNT
from hostside.tool_bundle import SHELL_WAITS
from tests.conftest import ScriptResult, docker
from tests.hostplane import static_image as static
from tests.hostplane.steps import build_tool_bundle, run_step, tool_bundle_inputs
from tests.hostplane.user_images import UIDS, user_image

pytestmark = pytest.mark.real

ASCIINEMA_SHA256 = "249ccf108509d643ddaf38979dac48c99e9e251f597173d8553a30d7a6423104"
# The non-ASCII character the pane must show: U+00E9, typed as bash printf octal escapes.
E_ACUTE = "\u00e9"


def tree(path: Path) -> dict[str, tuple[int, float]]:
    """Every file under path with its size and mtime: 'unchanged' means all of these equal."""
    if not path.exists():
        return {}
    return {
        str(p.relative_to(path)): (p.lstat().st_size, p.lstat().st_mtime)
        for p in path.rglob("*")
    }


@pytest.fixture(scope="session")
def bundle_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("toolbundle")


@pytest.fixture(scope="session")
def built(bundle_home: Path, canary_image: str) -> tuple[Path, ScriptResult]:
    """One real build (the wheel downloaded with pip, sha256-checked), validated in the canary."""
    tools = bundle_home / "harbor-tools"
    res = build_tool_bundle(tools, canary_image)
    assert res.returncode == 0, res.stderr
    return tools, res


@pytest.fixture(scope="session")
def static_image(docker_engine: None) -> str:
    """An image with bash and no glibc, no locale data (built here, cached per machine)."""
    return static.static_image()


def delete_bundle(tools: Path) -> ScriptResult:
    return run_step("tool_bundle", "delete", {"tools_dir": str(tools)})


def harbor_mounts(tools: Path) -> list[str]:
    """The bundle's mounts as the Harbor compose override writes them."""
    return [
        "-v", f"{tools}:{TOOLS_MOUNT}:ro",
        "-v", f"{tools}/bin/tmux:{TOOLS_BIN_TARGET}/tmux:ro",
        "-v", f"{tools}/bin/asciinema:{TOOLS_BIN_TARGET}/asciinema:ro",
    ]


@pytest.fixture(params=["minbase", "static"])
def task_image(request: pytest.FixtureRequest) -> str:
    """Each kind of task image: glibc without the tools (minbase), and no glibc at all."""
    return request.getfixturevalue("canary_image" if request.param == "minbase" else "static_image")


@pytest.fixture
def canary(built: tuple[Path, ScriptResult], task_image: str) -> Iterator[str]:
    """A task container with the bundle mounted exactly as the Harbor override does."""
    tools = built[0]
    name = f"bste-canary-{tools.parent.name}"
    docker("rm", "-f", name, check=False)
    docker(
        "run", "-d", "--name", name, "--network", "none", *harbor_mounts(tools),
        "--entrypoint", "sh", task_image, "-c", "sleep 300",
    )
    try:
        yield name
    finally:
        docker("rm", "-f", name, check=False)


def login_sh(container: str, script: str) -> subprocess.CompletedProcess:
    return docker("exec", container, "bash", "--login", "-c", script, check=False, timeout=240)


def test_build_outputs_and_layout(built: tuple[Path, ScriptResult], canary_image: str) -> None:
    tools, res = built
    out = res.outputs
    assert out["tools_dir"] == str(tools)
    assert out["tmux_version"].startswith("tmux ") and out["asciinema_version"] == "asciinema 2.4.0"
    assert out["rebuilt"] is True
    assert out["canary_image"] == canary_image and out["canary_validated"] is True
    assert (tools / ".benchstack-stamp").read_text().strip() == out["input_hash"]
    for rel in ("bin/tmux", "bin/asciinema", "bin/tmux.real", "lib/ld-linux-x86-64.so.2",
                "python/bin/python3", "python/site-packages/asciinema/__main__.py",
                "python/asciinema_main.py", "locale/C.utf8/LC_CTYPE"):
        assert (tools / rel).is_file(), rel
    # asciinema's bytecode is in the bundle (python can write none where it is mounted read-only),
    # though tests/run.sh gives every process a pycache prefix elsewhere.
    assert list((tools / "python/site-packages/asciinema/__pycache__").glob("__main__.*.pyc"))
    # Nothing staged or swapped is left beside the bundle.
    assert sorted(p.name for p in tools.parent.iterdir()) == [tools.name]


def test_canary_lacks_the_tools_without_the_bundle(canary_image: str) -> None:
    probe = "command -v tmux asciinema python3 || echo NONE"
    res = docker("run", "--rm", "--network", "none", canary_image, "bash", "--login", "-c", probe)
    assert res.stdout.strip() == "NONE"


def test_static_image_has_bash_and_nothing_of_glibc(static_image: str, tmp_path: Path) -> None:
    """The stand-in for musl and static images: every executable static, no libc, no locales."""
    cid = docker("create", static_image, "bash").stdout.strip()
    try:
        with (tmp_path / "fs.tar").open("wb") as out:
            subprocess.run(["docker", "export", cid], stdout=out, check=True, timeout=120)
    finally:
        docker("rm", "-f", cid, check=False)
    with tarfile.open(tmp_path / "fs.tar") as tar:
        names = [m.name.removeprefix("./") for m in tar.getmembers()]
        tar.extractall(tmp_path / "fs", filter="tar")
    elfs = sorted(
        name for name in names
        if (tmp_path / "fs" / name).is_file() and not (tmp_path / "fs" / name).is_symlink()
        and (tmp_path / "fs" / name).read_bytes()[:4] == b"\x7fELF"
    )
    assert elfs == ["bin/bash", "bin/busybox"]
    assert all(static.is_static(tmp_path / "fs" / name) for name in elfs)
    assert not [n for n in names if n.startswith(static.GLIBC_PATHS) or "libc.so" in n
                or "ld-linux" in n or "locale" in n]
    probe = "command -v bash sh; command -v tmux asciinema python3 || echo NONE"
    res = docker("run", "--rm", "--network", "none", static_image, "bash", "--login", "-c", probe)
    assert res.stdout.split() == ["/bin/bash", "/bin/sh", "NONE"]


def test_tmux_session_and_asciinema_cast_in_the_task_image(canary: str, task_image: str) -> None:
    """What Terminus-2 does: detached session, send-keys, capture-pane, asciinema rec; in the
    static image too, where tmux had no UTF-8 locale before the bundle brought one."""
    script = SHELL_WAITS + r"""
set -eu
export TERM=xterm-256color SHELL=/bin/bash
[ "$(command -v tmux)" = TARGET/tmux ] && [ "$(command -v asciinema)" = TARGET/asciinema ]
tmux -V
asciinema --version
tmux new-session -x 160 -y 40 -d -s terminus-2 'bash --login'
tmux send-keys -t terminus-2 'asciinema rec --stdin /tmp/recording.cast' Enter
wait_until 60 test -s /tmp/recording.cast || fail "no cast header within 60 s" 3
tmux send-keys -t terminus-2 \
  'printf "MARK\303\251%s %s %s\n" $((40+2)) $(env | grep -c ^PYTHON) ${LOCPATH:-none}' Enter
pane_marked() { tmux capture-pane -p -t terminus-2 | grep -q '^MARK.*42'; }
wait_until 60 pane_marked || fail "no marker in the pane within 60 s" 4
tmux capture-pane -p -t terminus-2 | grep '^MARK'
tmux send-keys -t terminus-2 'exit' Enter
cast_marked() { grep -q 'MARK.*42' /tmp/recording.cast 2>/dev/null; }
wait_until 60 cast_marked || fail "no marker in the cast within 60 s" 5
head -n1 /tmp/recording.cast
grep -c 'MARK.*42' /tmp/recording.cast
""".replace("TARGET", TOOLS_BIN_TARGET)
    res = login_sh(canary, script)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("tmux ") and lines[1] == "asciinema 2.4.0"
    # The marker came back through capture-pane as UTF-8, and the agent's shell inside
    # `asciinema rec` sees no PYTHON* variables (they would break the task's own python).
    # LOCPATH reaches the panes only in the image without locale data of its own.
    locpath = "none" if task_image.startswith("benchstack/minbase") else f"{TOOLS_MOUNT}/locale"
    assert f"MARK{E_ACUTE}42 0 {locpath}" in lines
    assert '"version": 2' in lines[-2]
    assert int(lines[-1]) >= 1


def test_static_image_needs_the_bundled_locale(
    built: tuple[Path, ScriptResult], static_image: str
) -> None:
    """Without the bundle's locale (an empty directory over it), tmux stops as it did before;
    asciinema run outside tmux leaves no locale variable to the shell it records."""
    tools = built[0]
    script = r"""
tmux -V 2>&1 && echo TMUX_RAN
asciinema rec -q -c 'echo LOC=${LOCPATH:-none},${LC_ALL:-none},${LC_CTYPE:-none}' \
  /tmp/r.cast </dev/null >/dev/null 2>&1
grep -o 'LOC=[^\]*' /tmp/r.cast
"""
    res = docker(
        "run", "--rm", "--network", "none", *harbor_mounts(tools),
        "--mount", f"type=tmpfs,destination={TOOLS_MOUNT}/locale",
        static_image, "bash", "--login", "-c", script, check=False, timeout=120,
    )
    lines = res.stdout.splitlines()
    assert lines[0] == "tmux: need UTF-8 locale (LC_CTYPE) but have ANSI_X3.4-1968"
    assert "TMUX_RAN" not in lines
    res = docker(
        "run", "--rm", "--network", "none", *harbor_mounts(tools),
        static_image, "bash", "--login", "-c", script, check=False, timeout=120,
    )
    assert res.stdout.splitlines() == ["tmux 3.3a", "TMUX_RAN", "LOC=none,none,none"]


def test_script_canary_check_passes_in_the_static_image(
    built: tuple[Path, ScriptResult], static_image: str, canary_image: str
) -> None:
    """The step's own canary check (UTF-8 marker included) holds in the static image."""
    tools = built[0]
    try:
        res = build_tool_bundle(tools, static_image)
        assert res.returncode == 0, res.stderr
        assert res.outputs["rebuilt"] is False
        assert res.outputs["canary_image"] == static_image
        assert res.outputs["canary_validated"] is True
    finally:
        (tools / ".benchstack-canary").write_text(canary_image + "\n")


def test_second_run_rebuilds_nothing(built: tuple[Path, ScriptResult], canary_image: str) -> None:
    tools, first = built
    before = tree(tools)
    res = build_tool_bundle(tools, canary_image)
    assert res.returncode == 0, res.stderr
    assert res.outputs["rebuilt"] is False
    assert res.outputs["input_hash"] == first.outputs["input_hash"]
    assert res.outputs["canary_validated"] is True  # the stamp remembers the canary it passed
    assert tree(tools) == before


def test_input_change_rebuilds(tmp_path: Path) -> None:
    """A changed tmux binary, then a changed locale, change the input hash and force a rebuild."""
    tmux = tmp_path / "tmux"
    shutil.copy2(shutil.which("tmux") or "/usr/bin/tmux", tmux)
    locale = tmp_path / "C.utf8"
    shutil.copytree("/usr/lib/locale/C.utf8", locale)
    sources = {"host_tmux": str(tmux), "host_locale": str(locale)}
    first = build_tool_bundle(tmp_path / "tools", **sources)
    assert first.returncode == 0, first.stderr
    with tmux.open("ab") as f:
        f.write(b"\0")  # trailing bytes: still the same, runnable ELF
    second = build_tool_bundle(tmp_path / "tools", **sources)
    assert second.returncode == 0, second.stderr
    assert second.outputs["rebuilt"] is True
    assert second.outputs["input_hash"] != first.outputs["input_hash"]
    assert (tmp_path / "tools/bin/tmux.real").read_bytes() == tmux.read_bytes()
    with (locale / "LC_IDENTIFICATION").open("ab") as f:
        f.write(b"\0")
    third = build_tool_bundle(tmp_path / "tools", **sources)
    assert third.returncode == 0, third.stderr
    assert third.outputs["rebuilt"] is True
    assert third.outputs["input_hash"] not in (first.outputs["input_hash"],
                                               second.outputs["input_hash"])
    bundled = tmp_path / "tools/locale/C.utf8/LC_IDENTIFICATION"
    assert bundled.read_bytes() == (locale / "LC_IDENTIFICATION").read_bytes()


def test_locale_missing_on_the_host(tmp_path: Path) -> None:
    res = build_tool_bundle(tmp_path / "tools", host_locale=str(tmp_path))
    assert res.returncode != 0
    assert res.reason == (
        f"tool_bundle: no glibc C.UTF-8 locale at host_locale={tmp_path}: install libc-bin or "
        "point host_locale at a C.utf8 directory"
    )
    assert list(tmp_path.iterdir()) == []


def test_tmux_missing_on_the_host(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    res = build_tool_bundle(tools, host_tmux=str(tmp_path / "no/tmux"))
    assert res.returncode != 0
    assert res.reason.startswith("tool_bundle: ") and "host_tmux=" in res.reason
    assert "install tmux" in res.reason
    assert list(tmp_path.iterdir()) == []


def test_tmux_missing_from_path(tmp_path: Path) -> None:
    """No tmux on PATH (a fresh host): told to install it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # The host's own python3 (a pyenv shim would need pyenv on PATH).
    for tool in ("sh", "bash", "python3"):
        (bin_dir / tool).symlink_to(f"/usr/bin/{tool}")
    res = run_step("tool_bundle", "create", tool_bundle_inputs(tmp_path / "tools"),
                   wrap=["env", f"PATH={bin_dir}"])
    assert res.returncode != 0
    assert res.reason == "tool_bundle: tmux not found on this host: install tmux"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"]


def test_python_shim_is_refused(tmp_path: Path) -> None:
    shim = tmp_path / "python3"
    shim.write_text('#!/usr/bin/env bash\nexec /usr/bin/python3 "$@"\n')
    shim.chmod(0o755)
    res = build_tool_bundle(tmp_path / "tools", host_python=str(shim))
    assert res.returncode != 0 and "not an ELF binary (a shim?)" in res.reason
    assert not (tmp_path / "tools").exists()


def test_wrong_asciinema_sha256_keeps_the_existing_bundle(
    built: tuple[Path, ScriptResult],
) -> None:
    tools = built[0]
    before = tree(tools.parent)
    # Another sha256 is another input hash: a rebuild, which fails at the wheel's check.
    res = build_tool_bundle(tools, asciinema_sha256="0" * 64)
    assert res.returncode != 0
    assert res.reason.startswith("tool_bundle: asciinema wheel ")
    assert (f"has sha256 {ASCIINEMA_SHA256}, expected {'0' * 64} (tools.asciinema_sha256)"
            in res.reason)
    assert tree(tools.parent) == before


def test_destroy_removes_only_a_bundle(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    assert build_tool_bundle(tools).returncode == 0
    gone = delete_bundle(tools)
    assert gone.returncode == 0, gone.stderr
    assert gone.outputs == {"removed": True, "tools_dir": str(tools)}
    assert list(tmp_path.iterdir()) == []
    again = delete_bundle(tools)
    assert again.returncode == 0 and again.outputs["removed"] is False

    # A directory that is not a bundle is neither replaced by create nor removed by delete.
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("mine")
    made = build_tool_bundle(precious)
    assert made.returncode != 0
    assert made.reason == (
        f"tool_bundle: tools_dir={precious} exists and is not a benchstack tool bundle: "
        "choose a new or empty directory"
    )
    kept = delete_bundle(precious)
    assert kept.returncode != 0 and "is not a benchstack tool bundle" in kept.reason
    assert (precious / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious"]


def test_new_canary_is_checked_without_a_rebuild(
    built: tuple[Path, ScriptResult], canary_image: str
) -> None:
    tools, first = built
    other = f"bste-canary-{tools.parent.name}:other"
    docker("tag", canary_image, other)
    try:
        stamp = (tools / ".benchstack-stamp").stat().st_mtime
        res = build_tool_bundle(tools, other)
        assert res.returncode == 0, res.stderr
        assert res.outputs["rebuilt"] is False
        assert res.outputs["canary_image"] == other and res.outputs["canary_validated"] is True
        assert "validating inside " + other in res.stderr
        assert (tools / ".benchstack-stamp").stat().st_mtime == stamp
        assert (tools / ".benchstack-canary").read_text().strip() == other
    finally:
        docker("rmi", other, check=False)
        (tools / ".benchstack-canary").write_text(canary_image + "\n")


# --- task images that run as another user ----------------------------------------------------


@pytest.fixture(scope="session")
def user_images(canary_image: str, static_image: str) -> dict[str, str]:
    """Images whose Dockerfile sets a non-root USER, with and without glibc and locales."""
    return {
        "minbase-uid": user_image(canary_image, "uid"),
        "minbase-named": user_image(canary_image, "named"),
        "static-uid": user_image(static_image, "uid"),
    }


@pytest.fixture(scope="session")
def strict_built(bundle_home: Path, user_images: dict[str, str]) -> tuple[Path, ScriptResult]:
    """A bundle built under umask 077 (a hardened host), validated by the step's own canary check
    in an image that runs as uid 1000: what it makes must not depend on the host's umask."""
    tools = bundle_home / "strict-tools"
    res = run_step("tool_bundle", "create", tool_bundle_inputs(tools, user_images["minbase-uid"]),
                   wrap=["bash", "-c", 'umask 077 && exec "$@"', "umask"])
    assert res.returncode == 0, res.stderr
    return tools, res


def test_every_user_can_read_and_run_the_bundle(strict_built: tuple[Path, ScriptResult]) -> None:
    tools, res = strict_built
    assert res.outputs["canary_validated"] is True
    closed = []
    for path in [tools, *tools.rglob("*")]:
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            continue
        wanted = 0o555 if stat.S_ISDIR(mode) or mode & stat.S_IXUSR else 0o444
        if mode & wanted != wanted or mode & 0o022:
            closed.append(f"{path.relative_to(tools)} {stat.filemode(mode)}")
    assert closed == [], closed[:20]


@pytest.mark.parametrize("kind", ["minbase-uid", "minbase-named", "static-uid"])
def test_terminus_flow_as_the_images_own_user(
    strict_built: tuple[Path, ScriptResult], user_images: dict[str, str], kind: str,
    tmp_path: Path,
) -> None:
    """As Terminus-2 runs it in a task image whose Dockerfile sets USER: the session started as
    that user, its pane piped to the trial's log dir, asciinema recording there, a UTF-8 marker
    read back through capture-pane. The tmux socket goes to /tmp/tmux-UID and the cast to the
    mounted log dir, where that user can write; nothing of asciinema's leaks into the shell."""
    tools = strict_built[0]
    uid = UIDS[kind.split("-")[1]]
    logs = tmp_path / "agent"
    logs.mkdir()
    logs.chmod(0o777)  # as a trial's agent log dir must be, for a non-root agent
    script = SHELL_WAITS + r"""
set -eu
export TERM=xterm-256color SHELL=/bin/bash
id -u
tmux new-session -x 160 -y 40 -d -s terminus-2 'bash --login' \; \
  pipe-pane -t terminus-2 'cat > /logs/agent/terminus_2.pane'
tmux send-keys -t terminus-2 'asciinema rec --stdin /logs/agent/recording.cast' Enter
wait_until 60 test -s /logs/agent/recording.cast || fail "no cast header within 60 s" 3
tmux send-keys -t terminus-2 \
  'printf "MARK\303\251%s %s %s\n" $((40+2)) $(id -u) $(env | grep -c ^ASCIINEMA_INSTALL)' Enter
pane_marked() { tmux capture-pane -p -t terminus-2 | grep -q '^MARK.*42'; }
wait_until 60 pane_marked || fail "no marker in the pane within 60 s" 4
tmux capture-pane -p -t terminus-2 | grep '^MARK'
tmux send-keys -t terminus-2 'exit' Enter
cast_marked() { grep -q 'MARK.*42' /logs/agent/recording.cast 2>/dev/null; }
wait_until 60 cast_marked || fail "no marker in the cast within 60 s" 5
[ -S "/tmp/tmux-$(id -u)/default" ] && echo SOCKET_OK
tmux kill-server || true
"""
    name = f"bste-user-{tools.parent.name}-{kind}"
    docker("rm", "-f", name, check=False)
    docker("run", "-d", "--name", name, "--network", "none", *harbor_mounts(tools),
           "-v", f"{logs}:/logs/agent", "--entrypoint", "sh", user_images[kind], "-c",
           "sleep 300")
    try:
        res = login_sh(name, script)
    finally:
        docker("rm", "-f", name, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == str(uid)
    assert f"MARK{E_ACUTE}42 {uid} 0" in lines
    assert lines[-1] == "SOCKET_OK"
    cast = logs / "recording.cast"
    assert cast.stat().st_uid == uid and (logs / "terminus_2.pane").stat().st_uid == uid
    text = cast.read_text()
    assert text.splitlines()[0].startswith('{"version": 2') and "MARK" in text


def test_asciinema_needs_no_writable_home(
    strict_built: tuple[Path, ScriptResult], user_images: dict[str, str],
) -> None:
    """asciinema writes an install id under $HOME at every start; USER 1000:1000 gets HOME=/,
    which it cannot write: the bundle's asciinema still runs there (and writes nothing there),
    while a user with a home keeps its install id as usual."""
    tools = strict_built[0]
    probe = ("echo HOME=$HOME; asciinema --version; "
             "ls -A ${HOME}/.config/asciinema 2>/dev/null || echo NO_CONFIG")
    uid = docker("run", "--rm", "--network", "none", *harbor_mounts(tools),
                 user_images["minbase-uid"], "bash", "--login", "-c", probe, check=False)
    assert uid.stdout.splitlines() == ["HOME=/", "asciinema 2.4.0", "NO_CONFIG"], uid.stderr
    named = docker("run", "--rm", "--network", "none", *harbor_mounts(tools),
                   user_images["minbase-named"], "bash", "--login", "-c", probe, check=False)
    assert named.stdout.splitlines() == ["HOME=/home/agent", "asciinema 2.4.0", "install-id"], \
        named.stderr
