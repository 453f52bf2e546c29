"""Leave-one-source-out evaluation of the audit on the dev set: generalization, not fit.

The dev set (`../shared/data/real-jobs`, tests/audit/dev_set.py) has real job dirs from two
sources, two public repositories run on other people's machines with different agents, models,
servers and hosts: `glm5-openclaw-tb20` (GLM-5, the openclaw agent, Docker Desktop on arm64) and
`gemma-harness-tb2` (a custom agent on llama.cpp, plus oracle and nop jobs). An expert labelled
every non-passing trial.

Design. The audit's knowledge is its rules (rules.yaml), its detectors and a few phrase tables,
each tagged with where it came from (audit/learned.py). Two kinds matter here:
- a *refinement* is `learned_from` the dev-set sources it was written or tuned on (a tool's
  wording such as llama.cpp's "Failed to parse input", a failure first met there such as a
  reply cut off without usage, Rosetta's unimplemented syscall, a SIGKILL under the trial);
- a *general rule* is learned from no source: it is written from what a status class, a
  traceback or a trial's own record means (a 4xx is the request's, the innermost frame raised,
  a 500 on one request is no outage, a network failure the same trial contradicts is no proof)
  and names nothing of any source. Those a source's trials prompted say so (`prompted_by`).
  Those that only withhold an excuse are the *proof standard* (`standard`) and are never off.

A fold holds one source out, audits its jobs with knowledge switched off, and scores them
against its expert. Three views:
- `strict` (THE FIGURE, the one tests/audit/test_generalization.py asserts): every refinement
  learned from the held-out source is off, grounded in a document elsewhere or not. That is
  what the audit would have said had the source never been seen, but for the general rules;
- `lenient` (an UPPER BOUND): only what was learned from the held-out source and grounded
  nowhere else is off. A document found because the source was seen counts as known, so this
  is a fit, not a held-out measure;
- `blind` (a LOWER BOUND): also the general blame rules the held-out source prompted are off
  (the proof standard stays: without it the audit would only be laxer). It shows how much of a
  fold's agreement rests on rules written after its trials were read, and that without them
  nothing more is excused.
Then `dev`: the whole dev set with nothing off (what tests/audit/test_dev_set.py asserts).

Why strict is still not blind: the general rules were written by people who had read the dev
set. What makes them general is that they hold as stated on any source (each is tested on
hand-built trials of other agents' formats, tests/audit/test_general_rules.py) and that none
can excuse: they assign a failure to the agent or withhold an excuse. A refinement that excuses
is always off in its own fold, so an excuse the strict view makes rests on knowledge the fold
did not learn from its own trials.

For each view: per source (and, within gemma-harness-tb2, per agent: the custom GemmaAgent,
oracle, nop) and overall: agreement with the expert, model failures excused (the expert says
agent_error/agent_timeout, the audit says infra, cancelled or verifier_timeout), and the
insufficient_evidence share; then what each fold switched off, what it kept though its own
trials prompted it, and every disagreement.

Prints the headline, the tables, then one JSON line. Does not assert (the test does).
Run: .venv/bin/python benchmarks/bench_audit_generalization.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from audit import detectors  # noqa: E402,F401  (registers the detectors' knowledge)
from audit.learned import Knowledge, disabled_for, prompted_rules, registered  # noqa: E402
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

# In the order they are reported: the figure first.
MODES = ("strict", "lenient", "blind", "dev")
TITLES = {
    "strict": "strict leave-one-source-out: THE FIGURE (every refinement learned from the "
    "held-out source off)",
    "lenient": "lenient: an UPPER BOUND (only what is documented nowhere else is off)",
    "blind": "blind: a LOWER BOUND (also the general rules the held-out source prompted)",
    "dev": "dev set, nothing held out (a fit)",
}


def knowledge() -> list[Knowledge]:
    return list(registered().values()) + [r.rule.knowledge() for r in load_rules()]


def evaluate(mode: str) -> dict:
    """{"folds": {source: {"score", "by_agent", "disabled", "prompted"}}, "overall": Score}."""
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
        kept = [k.name for k in prompted_rules(items, source) if k.name not in off]
        folds[source] = {
            "score": fold,
            "by_agent": by_agent,
            "disabled": sorted(off),
            "prompted": kept,
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
    out = []
    for mode in MODES:
        if mode in results:
            out.append(f"{mode:>8}: {_figure(results[mode]['overall'])}  -- {TITLES[mode]}")
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
    print(json.dumps({mode: _summary(results[mode]) for mode in MODES}))


if __name__ == "__main__":
    main()
