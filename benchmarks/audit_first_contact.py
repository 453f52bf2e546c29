"""Record the audit's first contact with a source: its verdicts before anything is changed for it.

Issue #28: a source added to the dev set is audited, as the audit stands, BEFORE its trials are
read or the audit is changed for it; that figure is kept in the repository and printed beside
the later figures by benchmarks/bench_audit_generalization.py, so the gain from tuning on a
source is never mistaken for generalization.

What is written (`benchmarks/audit_first_contact.json`): the commit audited, the command, and
per source the labelled trials' verdicts (category and signature; the expert's labels are NOT
copied: they stay in the dev set) plus the summary (agreement with the expert, model failures
excused, insufficient share), computed exactly as the generalization benchmark computes its
own (tests/audit/dev_set.py).

    .venv/bin/python benchmarks/audit_first_contact.py SOURCE [SOURCE ...]

A source already recorded is never overwritten (its first contact happened once); `--force`
is not offered on purpose.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.audit.dev_set import SOURCES, audit_source, score  # noqa: E402

RECORD = Path(__file__).resolve().parent / "audit_first_contact.json"
# The sources the audit had been written against before issue #28: for them the record is the
# figure before this round, not a first contact.
TUNED_ON_BEFORE = {"gemma-harness-tb2", "glm5-openclaw-tb20"}


def load() -> dict:
    return json.loads(RECORD.read_text()) if RECORD.is_file() else {"sources": {}}


def main(argv: list[str]) -> int:
    record = load()
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
        cwd=Path(__file__).resolve().parent.parent,
    ).stdout.strip()
    for name in argv:
        if name in record["sources"]:
            print(f"{name}: first contact already recorded at {record['sources'][name]['commit']}")
            continue
        source = SOURCES[name]
        rows = audit_source(source)
        expert = source.labels()
        s = score(rows, expert)
        record["sources"][name] = {
            "commit": commit,
            "kind": "before issue 28 (tuned on it)" if name in TUNED_ON_BEFORE
            else "first contact",
            "how": (
                "python benchmarks/audit_first_contact.py "
                f"{name}: build_report on every job of the source holding a labelled trial, "
                "nothing disabled, scored against its expert-labels.json "
                "(tests/audit/dev_set.py score)"
            ),
            "labelled": s.labelled,
            "agree": s.agree,
            "agreement": round(s.agreement, 4),
            "excused": len(s.excused),
            "insufficient": s.insufficient,
            "insufficient_share": round(s.insufficient_share, 4),
            "verdicts": {
                key: {"category": rows[key].category, "signature": rows[key].signature}
                if key in rows else {"category": "not audited", "signature": None}
                for key in sorted(expert)
            },
        }
        print(
            f"{name}: {s.agree}/{s.labelled} ({100 * s.agreement:.1f}%), excused "
            f"{len(s.excused)}, insufficient {100 * s.insufficient_share:.1f}% at {commit[:7]}"
        )
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
