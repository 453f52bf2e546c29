"""Where each piece of the audit's knowledge came from, so that its generalization can be measured.

Every rule of rules.yaml, every built-in detector and the few phrase tables detectors consult
carry tags:

- `learned_from`: the dev-set sources (real job dirs an expert labelled,
  `../shared/data/real-jobs`) whose trials it was written or tuned on: a *refinement*, which
  knows something of those sources (a tool's wording, a failure first met there);
- `grounded_in`: where the same knowledge is documented independently of the dev set (GROUNDS),
  with `why` naming the document;
- `prompted_by`: for a *general rule* (no `learned_from`): the dev-set sources whose trials
  prompted writing it down. It is written from what a status class, a traceback or a trial's
  own record means and names nothing of those sources, so it is kept in every fold; the
  evaluation lists it per fold, so a reader sees which agreements rest on rules written after
  the source was seen;
- `standard`: part of the proof standard (audit/RULES.md §1, "what is not proof"): a rule that
  only ever withholds an excuse. It is never switched off in any view: without it the audit
  would excuse more, so switching it off would not show what the audit knows of a source but
  only a laxer audit.

The leave-one-source-out evaluation (benchmarks/bench_audit_generalization.py) scores each
dev-set source with knowledge switched off (`disabled_for`), in three views:

- `strict` (the figure): every refinement learned from the held-out source is off, grounded
  elsewhere or not. What is left is what the audit would have said had the source never been
  seen, but for the general rules it prompted;
- `blind`: also the general rules the held-out source prompted (not the standard): a lower
  bound, to show what rests on them. It excuses no more than `strict` (they assign blame, they
  never excuse);
- `lenient`: only what was learned from the held-out source and grounded nowhere else is off:
  an upper bound (a document found only because the source was seen is counted as known).

A detector checks `ctx.knows(name)` (audit/job_context.py) before using a tagged piece; the
classifier does the same for rules and detectors. Nothing here changes a normal audit: there
nothing is disabled.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

GROUNDS: dict[str, str] = {
    "harbor": "Harbor 0.21's code and the reference (shared/reference): its exceptions, files, "
    "sample jobs",
    "seed": "the seed's hand-run audit and its pitfalls (shared/seed)",
    "captures": "tools run here against failing loopback servers (tests/audit/captures)",
    "docs": "public documentation or source code of the servers, agents, Docker, shells and "
    "protocols (named in `why`)",
    "issue-20": "the expert reasoning written in issue #20, read on held-out jobs",
}
DEV_SOURCES: dict[str, str] = {
    "glm5-openclaw-tb20": "one job: GLM-5 with the openclaw agent, Docker Desktop on arm64 macOS",
    "gemma-harness-tb2": "24 jobs: a custom agent on a local llama.cpp server, oracle and nop",
}
VIEWS = ("strict", "blind", "lenient")


@dataclass(frozen=True)
class Knowledge:
    name: str
    learned_from: tuple[str, ...] = ()
    grounded_in: tuple[str, ...] = ()
    why: str = ""
    prompted_by: tuple[str, ...] = ()
    standard: bool = False

    def __post_init__(self) -> None:
        unknown = [s for s in self.learned_from + self.prompted_by if s not in DEV_SOURCES]
        unknown += [g for g in self.grounded_in if g not in GROUNDS]
        if unknown:
            raise ValueError(f"knowledge {self.name!r}: unknown provenance tag(s) {unknown}")
        if not self.learned_from and not self.grounded_in:
            raise ValueError(f"knowledge {self.name!r}: say where it came from")
        if self.prompted_by and (self.learned_from or not self.grounded_in):
            raise ValueError(
                f"knowledge {self.name!r}: a general rule (prompted_by) is grounded in a "
                "document and learned from no source; a refinement says learned_from"
            )
        if self.standard and self.learned_from:
            raise ValueError(
                f"knowledge {self.name!r}: the proof standard holds in every fold, so it can "
                "know nothing of one source (learned_from)"
            )


_REGISTRY: dict[str, Knowledge] = {}


def register(item: Knowledge) -> Knowledge:
    """Declare a piece of knowledge (at import time of the module that uses it)."""
    if _REGISTRY.get(item.name, item) != item:
        raise ValueError(f"knowledge {item.name!r} declared twice, differently")
    _REGISTRY[item.name] = item
    return item


def registered() -> dict[str, Knowledge]:
    return dict(_REGISTRY)


def disabled_for(items: Iterable[Knowledge], held_out: str, view: str = "strict") -> frozenset[str]:
    """Names to switch off when `held_out` is the source being scored, in one of VIEWS."""
    if held_out not in DEV_SOURCES:
        raise ValueError(f"unknown dev-set source {held_out!r}; known: {sorted(DEV_SOURCES)}")
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; one of {VIEWS}")

    def off(k: Knowledge) -> bool:
        if k.standard:
            return False
        if held_out in k.learned_from:
            return view != "lenient" or not k.grounded_in
        return view == "blind" and held_out in k.prompted_by

    return frozenset(k.name for k in items if off(k))


def prompted_rules(items: Iterable[Knowledge], source: str) -> list[Knowledge]:
    """The general rules (and standard) that `source`'s trials prompted: kept in its fold."""
    return sorted((k for k in items if source in k.prompted_by), key=lambda k: k.name)
