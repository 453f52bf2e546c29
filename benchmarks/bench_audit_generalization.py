"""How well the audit generalizes: each dev-set source at first contact, now, and beside a trivial
baseline, for all its labelled non-passes and for the hard ones.

The dev set (tests/audit/dev_set.py) has nine real sources (gemma-harness-tb2, glm5-openclaw-
tb20; captaindpt-kill-terminalbench, singhh5050-tbench-eval; argus, hive-swarm-hub, lore-hex,
anode, stella) and a synthetic one (new-wording). A figure measured on the data the audit was
tuned on is a fit. The honest one is the **first contact**: the audit's verdicts on a source
recorded BEFORE anything was changed for it (benchmarks/audit_first_contact.py wrote them to
benchmarks/audit_first_contact.json, with the commit audited). For the two sources the audit had
been written against before issue #28, that record is the figure before this round, not a first
contact; it says so.

Four verdicts per labelled trial, each scored against the expert:
- `first contact`: the recorded verdicts (category only; the signature where kept);
- `held out`: the audit as it is with the readings first met in this source switched off
  (audit/read/readings.py: the leave-one-source-out figure; a source none of whose readings
  was written from it reads the same as `now`);
- `now`: the audit as it is (tests/audit/dev_set.py audit_source);
- `trivial`: a rule that reads only result.json's reward and exception type (dev_set.trivial:
  reward 1 passed, CancelledError cancelled, AgentTimeoutError agent_timeout,
  VerifierTimeoutError verifier_timeout, a model-API or environment exception type infra,
  anything else agent_error, no result.json cancelled).
Two groups: all labelled non-passes, and the **hard** ones: the non-passes the trivial rule
gets wrong (what an audit is for).
Per cell: agreement with the expert, model failures excused (the expert says agent_error or
agent_timeout, the verdict infra, cancelled or verifier_timeout) and the insufficient share of
the non-passes whose agent left a log of its own (`i`), beside the expert's own insufficient
share of them (`e`: where the expert could not decide either, the audit agreeing is no fault).

Prints one table per source, the overall lines, then one JSON line. Does not assert
(tests/audit/test_generalization.py does). Run: .venv/bin/python
benchmarks/bench_audit_generalization.py"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.audit.dev_set import (  # noqa: E402
    SOURCES,
    Score,
    audit_source,
    hard,
    logged,
    score_verdicts,
    trivial_verdicts,
)

FIRST_CONTACT = Path(__file__).resolve().parent / "audit_first_contact.json"
VIEWS = ("first contact", "held out", "now", "trivial")
GROUPS = ("non-passes", "hard")


def first_contact() -> dict:
    return json.loads(FIRST_CONTACT.read_text())["sources"]


def evaluate() -> dict[str, dict]:
    """{source: {"kind", "commit", view: {group: Score}, "n_hard", "expert_insufficient"}}."""
    recorded = first_contact()
    out: dict[str, dict] = {}
    for name, source in SOURCES.items():
        expert = source.labels()
        non_passes = [k for k, v in expert.items() if v["category"] != "passed"]
        hard_keys = hard(source)
        rows = audit_source(source)
        held = audit_source(source, held_out=True)
        record = recorded.get(name, {}).get("verdicts", {})
        verdicts = {
            "first contact": {k: v["category"] for k, v in record.items()},
            "held out": {k: r.category for k, r in held.items()},
            "now": {k: r.category for k, r in rows.items()},
            "trivial": trivial_verdicts(source),
        }
        signatures = {
            "first contact": {k: v.get("signature") for k, v in record.items()},
            "held out": {k: r.signature for k, r in held.items()},
            "now": {k: r.signature for k, r in rows.items()},
            "trivial": {},
        }
        logs = logged(source)
        entry: dict = {
            "kind": recorded.get(name, {}).get("kind", "not recorded"),
            "commit": recorded.get(name, {}).get("commit"),
            "n_hard": len(hard_keys),
            "expert_insufficient": _expert_share(expert, logs),
        }
        for view in VIEWS:
            entry[view] = {
                group: score_verdicts(verdicts[view], expert, keys, signatures[view], logs)
                for group, keys in (("non-passes", non_passes), ("hard", hard_keys))
            }
        entry["all labelled now"] = score_verdicts(
            verdicts["now"], expert, signatures=signatures["now"], logs=logs
        )
        out[name] = entry
    return out


def _expert_share(expert: dict[str, dict[str, str]], logs: set[str]) -> float:
    """The expert's own insufficient share of the non-passes whose agent left a log."""
    keys = [k for k in logs if expert[k]["category"] != "passed"]
    undecided = sum(1 for k in keys if expert[k]["category"] == "insufficient_evidence")
    return undecided / len(keys) if keys else 0.0


def _cell(s: Score) -> str:
    if not s.labelled:
        return f"{'-':>24}"
    return (
        f"{s.agree:>3}/{s.labelled:<3} {100 * s.agreement:5.1f}% "
        f"x{len(s.excused):<2} i{100 * s.logged_share:4.1f}%"
    )


def report(results: dict[str, dict]) -> list[str]:
    out = [
        "agreement with the expert, model failures excused (x), insufficient share of the "
        "non-passes whose agent left a log (i; e: the expert's own)",
    ]
    for name, entry in results.items():
        all_now = entry["all labelled now"]
        out.append("")
        out.append(
            f"== {name} ({'synthetic' if SOURCES[name].synthetic else 'real'}; first-contact "
            f"record: {entry['kind']} at {(entry['commit'] or '-')[:7]}; hard trials: "
            f"{entry['n_hard']}; every labelled trial now: {all_now.agree}/{all_now.labelled} "
            f"{100 * all_now.agreement:.1f}%; e{100 * entry['expert_insufficient']:.1f}%) =="
        )
        out.append(f"  {'':<14}" + "".join(f"{g:>26}" for g in GROUPS))
        for view in VIEWS:
            out.append(f"  {view:<14}" + "".join(f"  {_cell(entry[view][g])}" for g in GROUPS))
        for line in entry["now"]["non-passes"].disagreements:
            out.append(f"    differs now: {line}")
        for line in entry["now"]["non-passes"].excused:
            out.append(f"    EXCUSED now: {line}")
    out.append("")
    real = [e for n, e in results.items() if not SOURCES[n].synthetic]
    for group in GROUPS:
        for view in VIEWS:
            total = Score()
            for entry in real:
                total = total.plus(entry[view][group])
            out.append(f"  real sources, {group:<10} {view:<14} {_cell(total)}")
    return out


def summary(results: dict[str, dict]) -> dict:
    def one(s: Score) -> dict:
        return {
            "labelled": s.labelled,
            "agree": s.agree,
            "agreement": round(s.agreement, 4),
            "excused": len(s.excused),
            "insufficient_share": round(s.insufficient_share, 4),
            "insufficient_share_logged": round(s.logged_share, 4),
        }

    return {
        name: {view: {g: one(entry[view][g]) for g in GROUPS} for view in VIEWS}
        | {
            "all labelled now": one(entry["all labelled now"]),
            "expert_insufficient_logged": round(entry["expert_insufficient"], 4),
        }
        for name, entry in results.items()
    }


def main() -> None:
    t0 = time.perf_counter()
    results = evaluate()
    print("\n".join(report(results)))
    print(f"\n({time.perf_counter() - t0:.1f} s)")
    print(json.dumps(summary(results)))


if __name__ == "__main__":
    main()
