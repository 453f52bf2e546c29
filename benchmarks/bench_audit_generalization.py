"""Leave-one-source-out evaluation of the audit on the dev set: generalization, not fit.

The dev set (`../shared/data/real-jobs`, tests/audit/dev_set.py) has real job dirs from two
sources, two public repositories run on other people's machines with different agents, models,
servers and hosts: `glm5-openclaw-tb20` (GLM-5, the openclaw agent, Docker Desktop on arm64) and
`gemma-harness-tb2` (a custom agent on llama.cpp, plus oracle and nop jobs). An expert labelled
every non-passing trial.

Design. The audit's knowledge is its rules (rules.yaml), its detectors and a few phrase tables,
each tagged with where it came from (audit/learned.py): `learned_from` the dev-set sources it
was written or tuned on, `grounded_in` independent documents (Harbor's code and reference, the
seed's procedure, tool captures, public docs and sources, issue #20's stated reasoning). A fold
holds one source out: every piece learned from that source and grounded nowhere else is
switched off (`learned.disabled_for`), the held-out source's jobs are audited with what is left,
and scored against its expert. That is what the audit would have said had the source never been
seen. Within gemma-harness-tb2 the rows are also split by agent (the custom GemmaAgent, oracle,
nop): one fold (its provenance is tagged per repository), reported per agent.

Two views are printed:
- `loso`: the design above (the figure issue #20 asks for);
- `strict`: also switches off what was learned from the held-out source but is grounded
  elsewhere, as if those documents had not been found either: a lower bound, to show how much
  rests on knowledge first met in the dev set.
For each: per source and overall, agreement with the expert, model failures excused (the expert
says agent_error/agent_timeout, the audit says infra, cancelled or verifier_timeout), and the
insufficient_evidence share; then what each fold switched off and every disagreement.

Prints the tables, then one JSON line. Does not assert (tests/audit/test_generalization.py
does). Run: .venv/bin/python benchmarks/bench_audit_generalization.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from audit import detectors  # noqa: E402,F401  (registers the detectors' knowledge)
from audit.learned import Knowledge, disabled_for, registered  # noqa: E402
from audit.rules import load_rules  # noqa: E402
from tests.audit.dev_set import (  # noqa: E402
    Score,
    agent_of,
    audit_jobs,
    job_dirs,
    labels,
    score,
    source_of,
)

MODES = ("dev", "loso", "strict")


def knowledge() -> list[Knowledge]:
    return list(registered().values()) + [r.rule.knowledge() for r in load_rules()]


def evaluate(mode: str) -> dict:
    """{"folds": {source: {"score", "by_agent", "disabled"}}, "overall": Score} for a mode."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {MODES}")
    expert = labels()
    items = knowledge()
    jobs = job_dirs()
    folds: dict[str, dict] = {}
    overall = Score()
    for source in sorted({source_of(j) for j in jobs}):
        held = [j for j in jobs if source_of(j) == source]
        off = frozenset() if mode == "dev" else disabled_for(items, source, strict=mode == "strict")
        rows = audit_jobs(held, off)
        keys = [k for k in expert if k.split("/", 1)[0] == source]
        fold = score(rows, expert, keys)
        by_agent: dict[str, Score] = {}
        for job in held:
            prefix = f"{source}/{job.name}/"
            part = score(rows, expert, [k for k in keys if k.startswith(prefix)])
            by_agent.setdefault(agent_of(job), Score()).merge(part)
        folds[source] = {"score": fold, "by_agent": by_agent, "disabled": sorted(off)}
        overall.merge(fold)
    return {"folds": folds, "overall": overall}


def _line(name: str, s: Score) -> str:
    return (
        f"  {name:<44} {s.agree:>4}/{s.labelled:<4} {100 * s.agreement:6.1f}%   "
        f"{len(s.excused):>3}        {100 * s.insufficient_share:5.1f}%"
    )


def report(mode: str, result: dict) -> list[str]:
    out = [
        f"== {mode} ==",
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
    for line in result["overall"].excused:
        out.append(f"  EXCUSED {line}")
    for line in result["overall"].disagreements:
        out.append(f"  differs {line}")
    return out


def _summary(result: dict) -> dict:
    def one(s: Score) -> dict:
        return {
            "labelled": s.labelled,
            "agreement": round(s.agreement, 4),
            "excused": len(s.excused),
            "insufficient_share": round(s.insufficient_share, 4),
        }

    return {
        "overall": one(result["overall"]),
        "folds": {src: one(f["score"]) for src, f in result["folds"].items()},
    }


def main() -> None:
    summary: dict = {}
    for mode in MODES:
        t0 = time.perf_counter()
        result = evaluate(mode)
        print("\n".join(report(mode, result)))
        print(f"  ({time.perf_counter() - t0:.1f} s)\n")
        summary[mode] = _summary(result)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
