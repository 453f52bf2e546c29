"""Where each piece of the audit's knowledge came from, so that its generalization can be measured.

Every rule of rules.yaml, every built-in detector and the few phrase tables detectors consult
carry two tags:

- `learned_from`: the dev-set sources (real job dirs an expert labelled,
  `../shared/data/real-jobs`) whose trials it was written or tuned on;
- `grounded_in`: where the same knowledge is documented independently of the dev set (GROUNDS),
  with `why` naming the document.

The leave-one-source-out evaluation (benchmarks/bench_audit_generalization.py) scores each
dev-set source with the knowledge learned only from it switched off (`disabled_for`), which is
what the audit would have known had that source never been seen. Its `strict` variant also
switches off what was learned from the source but grounded elsewhere: a lower bound.

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


@dataclass(frozen=True)
class Knowledge:
    name: str
    learned_from: tuple[str, ...] = ()
    grounded_in: tuple[str, ...] = ()
    why: str = ""

    def __post_init__(self) -> None:
        unknown = [s for s in self.learned_from if s not in DEV_SOURCES]
        unknown += [g for g in self.grounded_in if g not in GROUNDS]
        if unknown:
            raise ValueError(f"knowledge {self.name!r}: unknown provenance tag(s) {unknown}")
        if not self.learned_from and not self.grounded_in:
            raise ValueError(f"knowledge {self.name!r}: say where it came from")


_REGISTRY: dict[str, Knowledge] = {}


def register(item: Knowledge) -> Knowledge:
    """Declare a piece of knowledge (at import time of the module that uses it)."""
    if _REGISTRY.get(item.name, item) != item:
        raise ValueError(f"knowledge {item.name!r} declared twice, differently")
    _REGISTRY[item.name] = item
    return item


def registered() -> dict[str, Knowledge]:
    return dict(_REGISTRY)


def disabled_for(items: Iterable[Knowledge], held_out: str, strict: bool = False) -> frozenset[str]:
    """Names to switch off when `held_out` is the source being scored.

    Off: learned from the held-out source and grounded nowhere else (or, `strict`, learned
    from it at all).
    """
    if held_out not in DEV_SOURCES:
        raise ValueError(f"unknown dev-set source {held_out!r}; known: {sorted(DEV_SOURCES)}")
    return frozenset(
        k.name for k in items if held_out in k.learned_from and (strict or not k.grounded_in)
    )
