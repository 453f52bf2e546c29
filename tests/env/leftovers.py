"""What an interrupted earlier test run left on this machine's Docker engine, before the stages
that bring stacks up (a stack's container of the same name makes its next `up` fail, and the
failure hides the test's own).

    python -m tests.env.leftovers            list them; exit 1 if there are any
    python -m tests.env.leftovers --remove   remove them (CI: a machine that runs only the tests)

A leftover is a container or network named like what the stacks and the tests create
(`benchstack-...`), or a Harbor trial's compose project (`...__...`); the two-host rehearsal's
hosts are stopped by their own script, which also puts back what they changed on this machine.
Removal is for a machine that runs only the tests: on an operator's machine the same names may
be a live `local` stack, so there it only lists them.
"""

from __future__ import annotations

import subprocess
import sys

from tests.machine import ROOT

HOSTS_SCRIPT = ROOT / "tests" / "env" / "hosts" / "hosts.sh"
HOST_CONTAINER = "benchstack-host-"
BUILT_IN_NETWORKS = {"bridge", "host", "none"}


def _names(*args: str) -> list[str]:
    out = subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout
    return out.split()


def _ours(name: str) -> bool:
    return name.startswith("benchstack-") or "__" in name


def leftovers() -> dict[str, list[str]]:
    return {
        "containers": [c for c in _names("ps", "-a", "--format", "{{.Names}}") if _ours(c)],
        "networks": [n for n in _names("network", "ls", "--format", "{{.Name}}")
                     if _ours(n) and n not in BUILT_IN_NETWORKS],
    }


def remove(found: dict[str, list[str]]) -> None:
    if any(c.startswith(HOST_CONTAINER) for c in found["containers"]):
        subprocess.run(["bash", str(HOSTS_SCRIPT), "stop"], check=False)
        found = leftovers()
    if found["containers"]:
        subprocess.run(["docker", "rm", "-f", *found["containers"]], capture_output=True,
                       check=False)
    if found["networks"]:
        subprocess.run(["docker", "network", "rm", *found["networks"]], capture_output=True,
                       check=False)


def main(argv: list[str]) -> int:
    found = leftovers()
    if not any(found.values()):
        print("no leftovers of an earlier run")
        return 0
    listed = "; ".join(f"{kind}: {' '.join(names)}" for kind, names in found.items() if names)
    if "--remove" not in argv:
        print(f"an earlier run left {listed} (remove them, or run with --remove)", file=sys.stderr)
        return 1
    print(f"removing what an earlier run left: {listed}")
    remove(found)
    still = leftovers()
    if any(still.values()):
        print(f"could not remove: {still}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
