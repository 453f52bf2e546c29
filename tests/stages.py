"""The real tests' stages of tests/run.sh, in one place: which background build each waits for,
which tests it runs, and which run side by side.

    python -m tests.stages NAME    the stage's build (or `none`), then its pytest arguments, a line
                                   each (tests/run.sh reads them)

A stage runs in a lane (`lane`: a function of tests/run.sh running stages one after another), and
run.sh's `beside` runs lanes at once. First the real tests without the engine, then the engine's
tests that bring up no local stack, beside the two-host rehearsal: none of them restarts this
machine's Docker engine, which the rehearsal's two hosts are containers of. Then the tests that do
(marked `restarts_docker`, tests/conftest.py), alone. The cluster's and the Kubernetes provider's
stages come last, as their builds do on a fresh machine.
tests/architecture/test_stages.py holds these to a partition of the real tests.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from _pytest.mark.expression import Expression

TWO_HOSTS = "tests/e2e/test_two_hosts.py"
# What no stage but its own runs: the layers of the builds beside the restarts.
NOT_LATER = "not cluster and not k8s_provider"


@dataclass(frozen=True)
class Stage:
    name: str
    build: str  # the background build it waits for (tests/run.sh): none, core, cluster, engine
    marks: str  # pytest's -m expression, among the real tests
    only: tuple[str, ...] = ()  # the test files it runs (none: every file)
    ignore: tuple[str, ...] = ()  # files it leaves to another stage
    workers: int = 0  # pytest-xdist workers, each taking whole files (0: in this process)
    lane: str | None = None  # the lane it runs in, side by side with the other lane's stages

    def pytest_args(self) -> list[str]:
        args = ["-m", self.expression(), *self.only, *(f"--ignore={path}" for path in self.ignore)]
        if self.workers:
            args += ["-n", str(self.workers), "--dist", "loadfile"]
        return args

    def expression(self) -> str:
        return f"real and ({self.marks})"

    def selects(self, marks: set[str], path: str) -> bool:
        """Whether a test with these markers, in this file, is one of this stage's."""
        if (self.only and path not in self.only) or path in self.ignore:
            return False
        return Expression.compile(self.expression()).evaluate(
            lambda name, **_kwargs: name in marks)


STAGES = (
    # Two workers: these share the Docker engine but never restart it (the host-plane tests
    # restart engines of their own), and most of their time is waiting.
    Stage("real", "none",
          f"not engine and not restarts_docker and {NOT_LATER}",
          workers=2, lane="tests"),
    Stage("engine", "core", f"engine and not restarts_docker and {NOT_LATER}",
          ignore=(TWO_HOSTS,), workers=2, lane="tests"),
    Stage("two-hosts", "core", f"engine and not restarts_docker and {NOT_LATER}",
          only=(TWO_HOSTS,), lane="hosts"),
    Stage("restarts", "core", f"restarts_docker and {NOT_LATER}"),
    Stage("cluster", "cluster", "cluster and not engine and not k8s_provider"),
    Stage("k8s", "engine", "k8s_provider or (engine and cluster)"),
)


def by_name(name: str) -> Stage:
    for stage in STAGES:
        if stage.name == name:
            return stage
    raise SystemExit(f"tests.stages: no stage {name!r} (stages: "
                     f"{', '.join(s.name for s in STAGES)})")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m tests.stages NAME")
    chosen = by_name(sys.argv[1])
    print("\n".join([chosen.build, *chosen.pytest_args()]))
