"""The readings written for real-jobs-3's five sources (issue #34), one entry each: what it reads,
whose words it rests on, and the dev-set source whose trials first showed the need for it.

Every reading rests on the words of a client library, a protocol, Harbor, the kernel, the
Python runtime or a sandbox provider (audit/RULES.md §9 cites them), never on one agent's or
operator's strings: the same failure worded by another tool is read the same way.

The source is kept for one use. The leave-one-source-out figure of
benchmarks/bench_audit_generalization.py audits each source with the readings first met there
switched off (`switched_off`), so that a source is never scored with what was written from its
own trials. A normal audit switches nothing off. A reading's code asks `on(name)`; nothing else
here changes a verdict. (The switch is a context variable: it holds for the audit run in the
same thread, as the benchmark runs it.)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Reading:
    name: str
    met_in: str  # the dev-set source whose trials first showed it
    reads: str  # what it reads, in one line


READINGS: dict[str, Reading] = {
    r.name: r
    for r in (
        Reading(
            "address_not_built",
            "argus",
            "a model client that could not build a request from the address it was given: "
            "the operator's launch configuration",
        ),
        Reading(
            "stream_failed_event",
            "argus",
            "a stream the server ended with its protocol's failure event, before any turn "
            "completed or anything was written",
        ),
        Reading(
            "terminal_error",
            "stella",
            "the terminal error of an agent log in a format no reader knows",
        ),
        Reading(
            "synthesised_reply",
            "stella",
            "a reply with zero prompt and zero completion tokens is the client's, not the "
            "model's; a limit named with when it resets is a rate limit",
        ),
        Reading(
            "sandbox_provider_5xx",
            "hive-swarm-hub",
            "a sandbox provider's 5xx status page raised below Harbor's environment layer",
        ),
        Reading(
            "tmux_own_words",
            "hive-swarm-hub",
            "tmux's usage errors on the model's keystrokes, and a socket the agent's own last "
            "command mounted over or removed",
        ),
        Reading(
            "disk_full_own_work",
            "hive-swarm-hub",
            "a full disk while the agent's own install, download or build ran is no proof",
        ),
        Reading(
            "agent_cap_on_exec",
            "hive-swarm-hub",
            "a limit the agent's own code set on an exec into the sandbox: the command decides",
        ),
        Reading(
            "cap_in_model_layer",
            "lore-hex",
            "a cap hit whose traceback runs through Harbor's model layer is a model call's",
        ),
        Reading(
            "coroutine_closed",
            "lore-hex",
            "a coroutine closed under the trial in a job that never finished; an install-only "
            "job's trial was not stopped",
        ),
        Reading(
            "refused_from_a_moment",
            "lore-hex",
            "an endpoint refusing every trial from one moment, the first refused call "
            "included; a status read in a JSON body too",
        ),
        Reading(
            "cannot_run_anywhere",
            "stella",
            "the loader's cannot-run words wherever recorded; a setup failure with no outside "
            "cause is insufficient",
        ),
        Reading(
            "exit_output_words",
            "anode",
            "the endpoint's words in the output a NonZeroAgentExitCodeError captured",
        ),
        Reading(
            "record_decides",
            "anode",
            "with Harbor's record alone, an owner only where the record decides it",
        ),
    )
}

_OFF: ContextVar[frozenset[str]] = ContextVar("audit_readings_off", default=frozenset())


def on(name: str) -> bool:
    """Is the reading in use (always, outside the leave-one-source-out measure)?"""
    if name not in READINGS:
        raise KeyError(f"unknown reading {name!r}")
    return name not in _OFF.get()


def met_in(source: str) -> frozenset[str]:
    """The readings first met in a dev-set source."""
    return frozenset(r.name for r in READINGS.values() if r.met_in == source)


@contextmanager
def switched_off(names: Iterable[str]) -> Iterator[None]:
    """Audit with these readings off (the leave-one-source-out measure only)."""
    unknown = set(names) - set(READINGS)
    if unknown:
        raise KeyError(f"unknown readings {sorted(unknown)}")
    token = _OFF.set(frozenset(names))
    try:
        yield
    finally:
        _OFF.reset(token)
