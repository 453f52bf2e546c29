"""Make the README's pictures of the audit's HTML report: the seed's final run alone
(docs/audit-report.png) and merged with its rerun (docs/audit-merged-report.png).

    python -m tests.audit.make_report_pictures [--out-dir docs]

The main job is the seed's final run as tests/audit/audit_jobgen.py writes it; the rerun job
reruns the five tasks its audit lists, with outcomes like the seed's targeted reruns (the two
agent timeouts time out again). The HTML reports of `python -m audit MAIN` and
`python -m audit MAIN --rerun RERUN` are rendered by headless Chromium (Debian's `chromium`).
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


def render(html: Path, out: Path, browser: str, profile: Path) -> None:
    """One report page as a PNG, by headless Chromium with a fresh profile and no network."""
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={profile}", "--hide-scrollbars",
         "--window-size=1280,1500", f"--screenshot={out}", html.as_uri()],
        check=True, capture_output=True, timeout=120,
    )
    print(f"wrote {out}")


def audit_html(html: Path, main_job: Path, *extra: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "audit", str(main_job), *extra,
         "--adjudications", str(ROOT / "audit" / "adjudications.seed.yaml"),
         "--reference-score", "73.0", "--format", "html", "--out", str(html)],
        check=True, cwd=ROOT,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "docs")
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
        audit_html(root / "report.html", main_job)
        render(root / "report.html", args.out_dir / "audit-report.png", browser, root / "chromium")
        audit_html(root / "merged.html", main_job, "--rerun", str(rerun_job))
        render(root / "merged.html", args.out_dir / "audit-merged-report.png", browser,
               root / "chromium")
    return 0


if __name__ == "__main__":
    sys.exit(main())
