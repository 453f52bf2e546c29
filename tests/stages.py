"""The real tests' stages of tests/run.sh, in one place: which background build each waits for,
which tests it runs, and which run side by side.

    python -m tests.stages NAME    the stage's build (or `none`), its Docker endpoint (`default`,
                                   or NO_ENGINE), then its pytest arguments, a line each
                                   (tests/run.sh reads them)

A stage runs in a lane (`lane`: a function of tests/run.sh running stages one after another), and
run.sh's `beside` runs lanes at once. First the real tests without the engine, then the engine's
tests that bring up no local stack, beside the two-host rehearsal and after it the local
Kubernetes stack's: none of them restarts this machine's Docker engine, which the
rehearsal's two hosts are containers of. Then the tests that do (marked `restarts_docker`,
tests/conftest.py), with no other test that reaches the engine beside them: the fast tests, then
the cluster's (it has a containerd of its own), the Kubernetes provider's and the real tests
marked `no_docker` (their peers are processes of their own), all with a Docker endpoint that
nothing serves (NO_ENGINE), so that one of them that talked to the engine would fail, whatever
the restarts do. An `early` stage runs in its lane only where its build is already there (a
warm machine); on a fresh machine, where the cluster's and the Kubernetes provider's builds end
last, it runs after the restarts instead, so that the lanes never wait for a build the restarts
do not need.
The tests that compare the whole Docker engine before and after (marked `quiet_docker`) run
beside lint alone (which reaches no engine) where their builds are there, else last, alone.
tests/architecture/test_stages.py holds these to a partition of the real tests.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from _pytest.mark.expression import Expression

TWO_HOSTS = "tests/e2e/test_two_hosts.py"
# What no stage but its own runs: the layers of the builds beside the restarts, and the tests that
# need nothing else on the engine.
NOT_LATER = "not cluster and not k8s_provider and not quiet_docker"
# What only the last stage runs, beside nothing.
ALONE = "(quiet_docker or restarts_docker)"
# The Docker endpoint of the tests beside the restarts: a socket nothing serves.
NO_ENGINE = "unix:///run/benchstack-no-engine.sock"


@dataclass(frozen=True)
class Stage:
    name: str
    build: str  # the background build it waits for (tests/run.sh): none, core, cluster, engine
    marks: str  # pytest's -m expression, among the real tests
    only: tuple[str, ...] = ()  # the test files it runs (none: every file)
    ignore: tuple[str, ...] = ()  # files it leaves to another stage
    workers: int = 0  # pytest-xdist workers, each taking whole files (0: in this process)
    lane: str | None = None  # the lane it runs in, side by side with the other lane's stages
    early: bool = False  # in its lane only where its build is there; else after the restarts
    docker: bool = True  # whether its tests reach this machine's engine (else: NO_ENGINE)

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
          f"not engine and not restarts_docker and not no_docker and {NOT_LATER}",
          workers=2, lane="tests"),
    Stage("engine", "core", f"engine and not restarts_docker and {NOT_LATER}",
          ignore=(TWO_HOSTS,), workers=2, lane="tests"),
    Stage("two-hosts", "core", f"engine and not restarts_docker and {NOT_LATER}",
          only=(TWO_HOSTS,), lane="hosts"),
    Stage("restarts", "core", f"restarts_docker and {NOT_LATER}", lane="restarts"),
    # Their peers are the cluster (its own containerd, bridge and ports) and the registry, no
    # Docker engine: beside the restarts, after the fast tests.
    Stage("cluster", "cluster", f"cluster and not engine and not k8s_provider and not {ALONE}",
          lane="fast", early=True, docker=False),
    # The Kubernetes provider's tests that reach no Docker engine, there too, after them.
    Stage("provider", "engine", f"k8s_provider and no_docker and not {ALONE}",
          lane="fast", early=True, docker=False),
    # The real tests whose peers are processes of their own (stand-in servers, sshd, S3, pip):
    # there too, last; one worker, as the restarts' steps and clocks want the other core.
    Stage("nodocker", "none", f"no_docker and not engine and not restarts_docker and {NOT_LATER}",
          lane="fast", docker=False),
    # What they check of the Docker engine is only their own (tests/e2e/test_local_k8s_stack.py).
    Stage("k8s", "engine",
          f"(k8s_provider or (engine and cluster)) and not (k8s_provider and no_docker) "
          f"and not {ALONE}",
          lane="hosts", early=True),
    # Alone (beside lint, which reaches no engine), once the last build (the whole engine) is
    # there: the tests that need nothing else on the engine, and any that restarts it and needs
    # the cluster or the Kubernetes provider.
    Stage("alone", "engine", f"quiet_docker or (restarts_docker and not ({NOT_LATER}))",
          lane="quiet", early=True),
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
    print("\n".join([chosen.build, "default" if chosen.docker else NO_ENGINE,
                     *chosen.pytest_args()]))
