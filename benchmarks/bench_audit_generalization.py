"""Leave-one-source-out evaluation of the audit on the dev set: generalization, not fit.

The dev set (`../shared/data/real-jobs`, tests/audit/dev_set.py) has real job dirs from two
sources, two public repositories run on other people's machines with different agents, models,
servers and hosts: `glm5-openclaw-tb20` (GLM-5, the openclaw agent, Docker Desktop on arm64) and
`gemma-harness-tb2` (a custom agent on llama.cpp, plus oracle and nop jobs). An expert labelled
every non-passing trial.

Design. The audit's knowledge is its rules (rules.yaml), its detectors and a few phrase tables,
each tagged with where it came from (audit/learned.py): a *refinement* is `learned_from` the
dev-set sources in which it was first met; a *general rule* is learned from no source (what a
status class, a traceback or a trial's own record means); the *proof standard* only ever
withholds an excuse and is never off. And each has a record, RESTS_ON, of the provenance this
machine can check: issue #20's lines (audit/RULES.md §0, written from the held-out jobs), the
seed, the Harbor 0.21 reference (by section), the captures (by file), or a general rule already
written in audit/RULES.md §1-2; each quote is checked against its file
(tests/audit/test_knowledge_provenance.py). Documents cited from memory do not count.

A fold holds one source out, audits its jobs with knowledge switched off, and scores them
against its expert. Three views:
- `checked` (THE FIGURE, the one tests/audit/test_generalization.py asserts): a piece stays on
  only if it rests on a checked provenance. What was first met in the held-out source stays on
  only when independent words say the same (a reply without `usage` is in issue #20's list);
  what rests only on a dev-set source or on memory is off, in every fold;
- `strict` (a LOWER BOUND): everything first met in the held-out source is off, whatever else
  justifies it;
- `lenient` (an UPPER BOUND): only what was first met in the held-out source and names no
  document at all, checkable or not, is off.
Then `dev`: the whole dev set with nothing off (a fit; what tests/audit/test_dev_set.py asserts).

For each view: per source (and, within gemma-harness-tb2, per agent: the custom GemmaAgent,
oracle, nop) and overall: agreement with the expert, model failures excused (the expert says
agent_error/agent_timeout, the audit says infra, cancelled or verifier_timeout), and the
insufficient_evidence share; then what each fold switched off, what it kept though it was first
met in the held-out source (and what that rests on), the general rules a source's trials
prompted, and every disagreement. Last, what every piece rests on.

Prints the headline (the three held-out views, then the dev set), the tables, then one JSON
line. Does not assert (the test does).
Run: .venv/bin/python benchmarks/bench_audit_generalization.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from audit.judge import detectors  # noqa: E402,F401  (registers the detectors' knowledge)
from audit.judge.learned import Knowledge, disabled_for, prompted_rules, registered  # noqa: E402
from audit.judge.rules import load_rules  # noqa: E402
from tests.audit.dev_set import (  # noqa: E402
    Score,
    agent_of,
    audit_jobs,
    job_dirs,
    labels,
    score,
    source_of,
)

# In the order they are reported: the figure first, then its bounds, then the fit.
MODES = ("checked", "strict", "lenient", "dev")
TITLES = {
    "checked": "provenance-checked leave-one-source-out: THE FIGURE (on only what rests on "
    "issue #20, the seed, the Harbor reference, the captures or a general rule)",
    "strict": "strict: a LOWER BOUND (everything first met in the held-out source off)",
    "lenient": "lenient: an UPPER BOUND (off only what was first met there and names no "
    "document, checkable or not)",
    "dev": "dev set, nothing held out (a fit)",
}


def knowledge() -> list[Knowledge]:
    return list(registered().values()) + [r.rule.knowledge() for r in load_rules()]


def evaluate(mode: str) -> dict:
    """{"folds": {source: {"score", "by_agent", "disabled", "kept", "prompted"}},
    "overall": Score}."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {MODES}")
    expert = labels()
    items = knowledge()
    jobs = job_dirs()
    folds: dict[str, dict] = {}
    overall = Score()
    for source in sorted({source_of(j) for j in jobs}):
        held = [j for j in jobs if source_of(j) == source]
        off = frozenset() if mode == "dev" else disabled_for(items, source, mode)
        rows = audit_jobs(held, off)
        keys = [k for k in expert if k.split("/", 1)[0] == source]
        fold = score(rows, expert, keys)
        by_agent: dict[str, Score] = {}
        for job in held:
            prefix = f"{source}/{job.name}/"
            part = score(rows, expert, [k for k in keys if k.startswith(prefix)])
            by_agent.setdefault(agent_of(job), Score()).merge(part)
        prompted = [k.name for k in prompted_rules(items, source) if k.name not in off]
        kept = sorted(
            (k for k in items if source in k.learned_from and k.name not in off),
            key=lambda k: k.name,
        )
        folds[source] = {
            "score": fold,
            "by_agent": by_agent,
            "disabled": sorted(off),
            "kept": {
                k.name: [str(c) for c in k.rests_on] or [f"nothing checkable (docs: {k.why})"]
                for k in kept
            },
            "prompted": prompted,
        }
        overall.merge(fold)
    return {"folds": folds, "overall": overall}


def _figure(s: Score) -> str:
    return (
        f"{s.agree}/{s.labelled} ({100 * s.agreement:.1f}%), excused {len(s.excused)}, "
        f"insufficient {100 * s.insufficient_share:.1f}%"
    )


def _line(name: str, s: Score) -> str:
    return (
        f"  {name:<44} {s.agree:>4}/{s.labelled:<4} {100 * s.agreement:6.1f}%   "
        f"{len(s.excused):>3}        {100 * s.insufficient_share:5.1f}%"
    )


def headline(results: dict[str, dict]) -> list[str]:
    """One line per view (overall), then its folds: the three held-out views, then the fit."""
    out = []
    for mode in MODES:
        if mode not in results:
            continue
        out.append(f"{mode:>8}: {_figure(results[mode]['overall'])}  -- {TITLES[mode]}")
        folds = results[mode]["folds"]
        out.append(
            " " * 10
            + "; ".join(
                f"{src} {f['score'].agree}/{f['score'].labelled} "
                f"({100 * f['score'].agreement:.1f}%), excused {len(f['score'].excused)}"
                for src, f in folds.items()
            )
        )
    return out


def report(mode: str, result: dict) -> list[str]:
    out = [
        f"== {TITLES[mode]} ==",
        f"  {'source (held out)':<44} {'agree':>9} {'':>7}   excused   insufficient",
    ]
    for source, fold in result["folds"].items():
        out.append(_line(source, fold["score"]))
        if len(fold["by_agent"]) > 1:
            for agent, s in sorted(fold["by_agent"].items()):
                out.append(_line(f"  agent {agent}", s))
    out.append(_line("overall", result["overall"]))
    if mode != "dev":
        for source, fold in result["folds"].items():
            out.append(f"  switched off for {source}: {', '.join(fold['disabled']) or 'nothing'}")
            for name, cites in fold["kept"].items():
                out.append(f"  kept for {source} though first met there: {name}, resting on")
                out.extend(f"      {c}" for c in cites)
            if fold["prompted"]:
                out.append(
                    f"  kept for {source} though its trials prompted them (general rules): "
                    + ", ".join(fold["prompted"])
                )
    for line in result["overall"].excused:
        out.append(f"  EXCUSED {line}")
    for line in result["overall"].disagreements:
        out.append(f"  differs {line}")
    return out


def _summary(result: dict) -> dict:
    def one(s: Score) -> dict:
        return {
            "labelled": s.labelled,
            "agree": s.agree,
            "agreement": round(s.agreement, 4),
            "excused": len(s.excused),
            "insufficient_share": round(s.insufficient_share, 4),
        }

    return {
        "overall": one(result["overall"]),
        "folds": {src: one(f["score"]) for src, f in result["folds"].items()},
    }


def provenance() -> list[str]:
    """What every piece rests on (audit/learned.py RESTS_ON), one line each."""
    out = ["== what each piece rests on (checked here; `docs` from memory does not count) =="]
    for k in sorted(knowledge(), key=lambda k: k.name):
        kinds = sorted({c.on for c in k.rests_on})
        tags = []
        if k.learned_from:
            tags.append("first met in " + ", ".join(k.learned_from))
        if k.standard:
            tags.append("proof standard")
        rest = ", ".join(kinds) if kinds else "nothing checkable"
        out.append(f"  {k.name:<42} {rest}" + (f"  ({'; '.join(tags)})" if tags else ""))
    return out


def main() -> None:
    results: dict[str, dict] = {}
    seconds: dict[str, float] = {}
    for mode in MODES:
        t0 = time.perf_counter()
        results[mode] = evaluate(mode)
        seconds[mode] = time.perf_counter() - t0
    print("\n".join(headline(results)) + "\n")
    for mode in MODES:
        print("\n".join(report(mode, results[mode])))
        print(f"  ({seconds[mode]:.1f} s)\n")
    print("\n".join(provenance()) + "\n")
    print(json.dumps({mode: _summary(results[mode]) for mode in MODES}))


if __name__ == "__main__":
    main()
