"""`python -m audit`: audit a Harbor run (job dirs local, s3:// or from a stack), or archive one.

    python -m audit JOB [JOB ...] [--rerun JOB ...]   # one submission: every JOB of one run,
                    [--adjudications FILE]            # or a folder of job dirs
                    [--reference-score 73.0 [--reference-plus-minus 2.1]
                     [--reference-convention leaderboard] [--reference-tasks FILE]]
                    [--convention leaderboard] [--provenance FILE]
                    [--dataset-tasks 89] [--official-dataset-commit SHA]
                    [--format table|json|markdown|html] [--out PATH]
    python -m audit --stack NAME [same options]   # main job, reruns, reference, provenance
    python -m audit archive JOB_DIR s3://bucket/prefix [--adjudications FILE]
                    [--reference-score 73.0] [--provenance FILE]

Every score printed names its convention (audit/score/conventions.py); the headline is the
Terminal-Bench board's (`leaderboard`) unless --convention names another.

Exit status: 0 when the report was written, 2 when an input is unusable (one line on stderr
naming what to fix), 3 with --strict when the report was written but its raw score cannot be
quoted (audit/score/quotable.py; the verdict is on stderr too).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from audit.judge.rules import RULES_FILE, load_rules
from audit.output.render import FORMATS, render
from audit.pipeline import build_report
from audit.read import provenance as prov
from audit.read.layout import JobLayout, NotAJobError
from audit.read.s3 import is_s3_uri, make_s3_client, parse_s3_uri
from audit.score import adjudications as adj
from audit.score import conventions as conv
from audit.score import reference as ref
from audit.score.merge import merge_reports
from audit.score.report import Report
from contracts import harbor_profiles as hp

log = logging.getLogger("audit")
NOT_QUOTABLE = 3


class UsageError(Exception):
    """An input the user has to fix; printed as one line, exit status 2."""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--adjudications", type=Path, help="YAML list of {task, decision, reason}")
    p.add_argument("--reference-score", type=float,
                   help="the published score to compare with, in percent")
    p.add_argument("--reference-plus-minus", type=float, metavar="POINTS",
                   help="the published score's ± (the board's: 1.96 x its stderr)")
    p.add_argument("--reference-convention", choices=conv.names(), default=None,
                   help="the convention it was published in (default: leaderboard)")
    p.add_argument("--reference-tasks", type=Path, metavar="FILE",
                   help="the published per-task table (JSON or YAML: task -> p̂ in 0..1): "
                   "names the tasks behind the difference")
    p.add_argument("--convention", choices=conv.names(), default=hp.LEADERBOARD,
                   help="the headline convention (default: the board's, leaderboard)")
    p.add_argument("--rules", type=Path, default=RULES_FILE, help="signature rules file")
    p.add_argument(
        "--provenance",
        type=Path,
        help="the run's provenance manifest (provenance.json); shown in the report",
    )
    p.add_argument("--s3-endpoint-url", help="S3-compatible endpoint (else AWS_ENDPOINT_URL)")
    p.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")


def _audit_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m audit",
        description="Turn a raw Harbor job dir into an explained score. "
        "`python -m audit archive --help` for archiving to S3.",
    )
    p.add_argument("jobs", nargs="*", metavar="JOB",
                   help="job dir (<jobs_dir>/<job_name>) or s3://bucket/prefix; several (or a "
                   "folder of job dirs) are one submission, pooled as the board pools them")
    p.add_argument("--stack", help="read the job dir from this Pulumi stack's outputs")
    p.add_argument("--project", type=Path, default=Path("."),
                   help="with --stack: the Pulumi project's directory (default: the current one)")
    p.add_argument(
        "--rerun",
        action="append",
        default=[],
        metavar="JOB",
        help="a rerun job of the main job's tasks (dir or s3:// URI); repeat, oldest first. "
        "The report adds one score merged across all of them",
    )
    p.add_argument(
        "--dataset-tasks",
        type=_positive_int,
        metavar="N",
        help="how many tasks the dataset has (TB 2.1: 89), for the leaderboard conformance",
    )
    p.add_argument(
        "--official-dataset-commit",
        metavar="SHA",
        help="the dataset commit the leaderboard uses, for the conformance line",
    )
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 3 when the raw score cannot be quoted (too many trials not judged on the "
        "model: infra, cancelled or unexplained); the report is written all the same",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="write the report here instead of stdout (and provenance.json beside it)",
    )
    _common(p)
    return p


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _archive_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m audit archive",
        description="Upload a job dir and its reports (json, markdown, html) to S3 with a "
        "sha256 manifest; files already uploaded with the same hash are skipped.",
    )
    p.add_argument("job", type=Path, help="local job dir")
    p.add_argument("dest", help="s3://bucket/prefix")
    _common(p)
    return p


def _layouts(job: str, endpoint: str | None, folders: bool = True) -> list[JobLayout]:
    """The job dir `job`, or (with `folders`) each job dir directly inside the folder `job`."""
    if is_s3_uri(job):
        return [JobLayout.s3(make_s3_client(endpoint), parse_s3_uri(job))]
    layout = JobLayout.local(Path(job))
    if not folders:
        return [layout]
    try:
        layout.check_is_job()
    except NotAJobError:
        inside = _jobs_in(Path(job))
        if not inside:
            raise
        return inside
    return [layout]


def _jobs_in(folder: Path) -> list[JobLayout]:
    found = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        layout = JobLayout.local(sub)
        try:
            layout.check_is_job()
        except NotAJobError:
            continue
        found.append(layout)
    return found


def _inputs(args: argparse.Namespace):
    try:
        adjudications = adj.load_adjudications(args.adjudications) if args.adjudications else []
        rules = load_rules(args.rules)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    return adjudications, rules


def _reference(args: argparse.Namespace, stack: dict | None) -> ref.PublishedScore | None:
    """The published score: the flags', else the stack's (its ± and convention unless the
    flags give them)."""
    given = args.reference_score is not None
    base = {"score": args.reference_score} if given else dict(stack or {"score": None})
    try:
        return ref.published(
            base["score"],
            plus_minus=args.reference_plus_minus if args.reference_plus_minus is not None
            else base.get("plus_minus"),
            convention=args.reference_convention or base.get("convention"),
            tasks=ref.load_tasks(args.reference_tasks) if args.reference_tasks else None,
            source="--reference-score" if given else "the stack's reference_score" if stack
            else "")
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _report(
    args,
    jobs: list[str],
    reference: ref.PublishedScore | None,
    provenance: dict | None = None,
    role: str | None = None,
    adjudicate: bool = True,
) -> Report:
    """Audit one submission (one job, or several of one run). `role` ("--rerun") prefixes errors
    so the user knows which input; a rerun is one job dir, never a folder of them."""
    adjudications, rules = _inputs(args)
    try:
        layouts = [one for job in jobs
                   for one in _layouts(job, args.s3_endpoint_url, folders=role is None)]
        return build_report(
            layouts,
            adjudications=adjudications if adjudicate else [],
            reference_score=reference,
            rules=rules,
            workers=16 if any(is_s3_uri(job) for job in jobs) else 1,
            dataset_tasks=getattr(args, "dataset_tasks", None),
            official_dataset_commit=getattr(args, "official_dataset_commit", None),
            provenance=provenance,
            convention=args.convention,
        )
    except (NotAJobError, ValueError) as exc:
        raise UsageError(f"{role} {' '.join(jobs)}: {exc}" if role else str(exc)) from exc


def _identity(job: str) -> str:
    """What makes two spellings of a job the same job (symlinks, trailing slashes)."""
    if is_s3_uri(job):
        return job.rstrip("/")
    return str(Path(job).resolve())


def _provenance(args, stack_path: str | None, job: str) -> tuple[dict | None, list[str]]:
    """The manifest and any problem finding it. --provenance must be right (exit 2); one the
    stack names or the archive holds is best effort, a problem line when unusable."""
    if args.provenance:
        try:
            return prov.load(args.provenance), []
        except prov.ProvenanceError as exc:
            raise UsageError(f"--provenance: {exc}") from exc
    if stack_path:
        return _stack_provenance(stack_path)
    try:
        text = _layouts(job, args.s3_endpoint_url)[0].read_text(prov.ARCHIVED)
    except (NotAJobError, ValueError, OSError):
        return None, []  # the job's own errors are reported by the audit itself
    if text is None:
        return None, []
    try:
        return prov.parse(text, f"{job.rstrip('/')}/{prov.ARCHIVED}"), []
    except prov.ProvenanceError as exc:
        return None, [str(exc)]


def _stack_provenance(path: str) -> tuple[dict | None, list[str]]:
    if not Path(path).is_file():
        return None, [
            f"the stack's provenance manifest {path} is not readable here: copy it "
            "and pass --provenance FILE to show it in the report"
        ]
    try:
        return prov.load(Path(path)), []
    except prov.ProvenanceError as exc:
        return None, [str(exc)]


def _here(found, path: str) -> str:
    """`path` as this machine reads it: itself, or for a Harbor host the stack reaches over SSH
    (its `harbor_ssh` output), a copy made here (audit/read/remote.py)."""
    if found.harbor_ssh is None:
        return path
    from audit.read.remote import RemoteError, copy_here

    try:
        return str(copy_here(found.harbor_host or "harbor", found.harbor_ssh, path))
    except RemoteError as exc:
        raise UsageError(str(exc)) from exc


def _readable(job: str, what: str, stack: str, host: str | None) -> None:
    if not is_s3_uri(job) and not Path(job).is_dir():
        where = f" on the Harbor host {host}" if host else ""
        raise UsageError(
            f"stack {stack!r} names {what} {job}{where}, which is not readable here: "
            "run the audit on that host, copy the dir here, or archive it to S3 and audit "
            "the s3:// URI"
        )


@dataclass
class _Run:
    """What one audit reads: the submission's job dirs, its reruns (dir, role), the published
    score, and the provenance manifest the stack names."""

    jobs: list[str]
    reruns: list[tuple[str, str]]
    reference: ref.PublishedScore | None
    stack_provenance: str | None = None


def _from_stack(args: argparse.Namespace) -> _Run:
    from audit.read.stack import StackError, job_from_outputs, read_stack_outputs

    try:
        found = job_from_outputs(read_stack_outputs(args.stack, args.project), args.stack)
    except StackError as exc:
        raise UsageError(str(exc)) from exc
    job = _here(found, found.job_dir)
    rerun_dirs = [_here(found, r) for r in found.rerun_job_dirs]
    _readable(job, "job dir", args.stack, found.harbor_host)
    for rerun in rerun_dirs:
        _readable(rerun, "rerun job dir", args.stack, found.harbor_host)
    if found.rerun_waiting:
        log.warning("stack %s has no rerun job yet: %s", args.stack, found.rerun_waiting)
    return _Run(
        jobs=[job],
        reruns=[(r, "stack rerun job") for r in rerun_dirs] + [(r, "--rerun") for r in args.rerun],
        reference=_reference(args, found.reference),
        stack_provenance=found.provenance_path and _here(found, found.provenance_path),
    )


def _run_of(args: argparse.Namespace) -> _Run:
    if bool(args.jobs) == bool(args.stack):
        raise UsageError("give the job dirs to audit, or --stack NAME (not both)")
    run = _from_stack(args) if args.stack else _Run(
        jobs=list(args.jobs), reruns=[(r, "--rerun") for r in args.rerun],
        reference=_reference(args, None))
    seen: dict[str, str] = {}
    for job, role in [(j, "the main job") for j in run.jobs] + run.reruns:
        ident = _identity(job)
        if ident in seen:
            raise UsageError(
                f"{role} {job} is {seen[ident]} again: give each job once (a rerun is a "
                "different job dir than the main job)"
            )
        seen[ident] = role if role == "the main job" else f"{role} {job}"
    return run


def _write(args: argparse.Namespace, report: Report, provenance: dict | None) -> None:
    to_terminal = args.out is None and sys.stdout.isatty()
    width = shutil.get_terminal_size((120, 40)).columns if to_terminal else None
    text = render(report, args.format, width=width, color=to_terminal)
    if not args.out:
        sys.stdout.write(text)
        return
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        if provenance is not None:
            beside = args.out.parent / prov.FILE_NAME
            beside.write_text(prov.dumps(provenance))
            log.info("wrote the provenance manifest to %s", beside)
    except OSError as exc:
        raise UsageError(f"cannot write --out {args.out}: {exc.strerror}") from exc
    log.info("wrote %s report to %s", args.format, args.out)


def run_audit(argv: list[str]) -> int:
    args = _audit_parser().parse_args(argv)
    _logging(args.verbose)
    run = _run_of(args)
    provenance, provenance_problems = _provenance(args, run.stack_provenance, run.jobs[0])
    report = _report(args, run.jobs, run.reference, provenance)
    report.problems.extend(provenance_problems)
    if run.reruns:
        rerun_reports = [
            _report(args, [rerun], None, role=role, adjudicate=False) for rerun, role in run.reruns
        ]
        report.merge = merge_reports(report, rerun_reports, run.reference,
                                     headline=args.convention, dataset_tasks=args.dataset_tasks)
    _write(args, report, provenance)
    if args.strict and report.quotable is not None and not report.quotable.quotable:
        print(f"audit: raw score not quotable: {report.quotable.verdict}", file=sys.stderr)
        return NOT_QUOTABLE
    return 0


def run_archive(argv: list[str]) -> int:
    from audit.output.archive import ArchiveError, archive_job

    args = _archive_parser().parse_args(argv)
    _logging(args.verbose)
    try:
        dest = parse_s3_uri(args.dest)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    provenance, problems = _provenance(args, None, str(args.job))
    report = _report(args, [str(args.job)], _reference(args, None), provenance)
    report.problems.extend(problems)
    reports = {
        "report.json": render(report, "json").encode(),
        "report.md": render(report, "markdown").encode(),
        "report.html": render(report, "html").encode(),
    }
    try:
        result = archive_job(
            args.job, dest, make_s3_client(args.s3_endpoint_url), reports, provenance=provenance
        )
    except ArchiveError as exc:
        raise UsageError(str(exc)) from exc
    print(json.dumps(result.as_dict()))
    return 0


def _logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="audit: %(message)s",
        stream=sys.stderr,
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["archive"]:
            return run_archive(argv[1:])
        return run_audit(argv)
    except UsageError as exc:
        print(f"audit: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `python -m audit ... | head` closed the pipe: not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
