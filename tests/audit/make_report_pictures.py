"""Make the README's picture of a merged audit report (docs/audit-merged-report.png).

    python -m tests.audit.make_report_pictures [--out docs/audit-merged-report.png]

The main job is the seed's final run as tests/audit/audit_jobgen.py writes it; the rerun job
reruns the five tasks its audit lists, with outcomes like the seed's targeted reruns (the two
agent timeouts time out again). The HTML report of `python -m audit MAIN --rerun RERUN` is
rendered by headless Chromium (Debian's `chromium`).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.audit.audit_jobgen import TrialSpec, seed_final_run, write_job
from tests.conftest import ROOT

RERUN = [
    TrialSpec(task="build-pov-ray"),
    TrialSpec(task="prove-plus-comm"),
    TrialSpec(task="tune-mjcf", reward=0.0),
    TrialSpec(task="dna-assembly", reward=0.0, exception_type="AgentTimeoutError",
              exception_message="Agent execution timed out after 10800.0 seconds"),
    TrialSpec(task="make-doom-for-mips", reward=0.0, exception_type="AgentTimeoutError",
              exception_message="Agent execution timed out after 5400.0 seconds"),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "audit-merged-report.png")
    args = parser.parse_args()
    browser = shutil.which("chromium")
    if browser is None:
        print("make_report_pictures: chromium not found: apt-get install chromium", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        main_job = write_job(root / "results", "qwen38-tb21-main", seed_final_run())
        rerun_job = write_job(root / "results", "qwen38-tb21-main-rerun-5c1e0f2a", RERUN,
                              started_local="2026-08-31T09:02:11.000000",
                              finished_local="2026-08-31T12:15:40.000000", concurrency=5, seed=11)
        html = root / "report.html"
        subprocess.run(
            [sys.executable, "-m", "audit", str(main_job), "--rerun", str(rerun_job),
             "--adjudications", str(ROOT / "audit" / "adjudications.seed.yaml"),
             "--reference-score", "73.0", "--format", "html", "--out", str(html)],
            check=True, cwd=ROOT,
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={root / 'chromium'}", "--hide-scrollbars",
             "--window-size=1280,1500", f"--screenshot={args.out}", html.as_uri()],
            check=True, capture_output=True, timeout=120,
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
