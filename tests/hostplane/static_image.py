"""A task image with bash and nothing of glibc: no libc.so, no loader, no locale data.

What musl-based and static task images look like to the tool bundle. Built from this host's
Debian `bash-static` and `busybox-static` (both statically linked) in an empty rootfs, then
`docker import`ed. The tag carries a hash of its inputs, so the image is built once per machine
and rebuilt only when a binary or this recipe changes.
"""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import docker

REPO = "benchstack/static-bash"
# Host file -> path in the image. /bin/sh is busybox's ash, as in Alpine.
BINARIES = {"bin/bash": Path("/bin/bash-static"), "bin/busybox": Path("/bin/busybox")}
PACKAGES = "bash-static busybox-static"
# Bumped when the layout below changes, so the cached image is rebuilt.
RECIPE = "static-bash-1"
PASSWD = "root:x:0:0:root:/root:/bin/bash\n"
GROUP = "root:x:0:\n"
# Where glibc keeps what a static image must not have.
GLIBC_PATHS = ("lib64", "lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "usr/lib/locale",
               "usr/share/i18n")


def is_static(path: Path) -> bool:
    """ldd's word: a static executable is 'not a dynamic executable'."""
    proc = subprocess.run(["ldd", str(path)], capture_output=True, text=True)
    return proc.returncode != 0 and "not a dynamic executable" in proc.stdout + proc.stderr


def _tag() -> str:
    missing = [str(src) for src in BINARIES.values() if not src.is_file()]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: apt-get install -y {PACKAGES} "
                    "(`make setup`)")
    digest = hashlib.sha256(RECIPE.encode())
    for src in BINARIES.values():
        digest.update(src.read_bytes())
    return f"{REPO}:{digest.hexdigest()[:12]}"


def _rootfs(root: Path) -> None:
    for rel, src in BINARIES.items():
        if not is_static(src):
            pytest.fail(f"{src} is not statically linked: it cannot stand in for a static image")
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(src.read_bytes())
        (root / rel).chmod(0o755)
    applets = subprocess.run(
        [str(BINARIES["bin/busybox"]), "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    for applet in applets:
        link = root / "bin" / applet
        if not link.exists():
            link.symlink_to("busybox")
    for rel in ("etc", "root", "tmp"):
        (root / rel).mkdir(exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (root / "etc/passwd").write_text(PASSWD)
    (root / "etc/group").write_text(GROUP)


def static_image() -> str:
    """The image's tag, built (about a second) unless this machine already has it."""
    tag = _tag()
    if docker("image", "inspect", tag, check=False).returncode == 0:
        return tag
    with tempfile.TemporaryDirectory(prefix="bste-static-") as work:
        root = Path(work) / "rootfs"
        root.mkdir()
        _rootfs(root)
        tar = Path(work) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(root), "--owner=0", "--group=0", "-cf", str(tar), "."],
                       check=True)
        docker("import", str(tar), tag)
    return tag
