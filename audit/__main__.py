"""`python -m audit`: audit a Harbor job dir (local, s3:// or from a stack), or archive one.

    python -m audit JOB_DIR_OR_S3_URI [--rerun JOB_DIR_OR_S3_URI ...]
                    [--adjudications FILE] [--reference-score 73.0] [--provenance FILE]
                    [--dataset-tasks 89] [--official-dataset-commit SHA]
                    [--format table|json|markdown|html] [--out PATH]
    python -m audit --stack NAME [same options]   # main job, reruns and provenance from it
    python -m audit archive JOB_DIR s3://bucket/prefix [--adjudications FILE]
                    [--reference-score 73.0] [--provenance FILE]

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
from pathlib import Path

from audit.judge.rules import RULES_FILE, load_rules
from audit.output.render import FORMATS, render
from audit.output.report import Report, build_report
from audit.read import provenance as prov
from audit.read.layout import JobLayout, NotAJobError
from audit.read.s3 import is_s3_uri, make_s3_client, parse_s3_uri
from audit.score import adjudications as adj
from audit.score.merge import merge_reports

log = logging.getLogger("audit")
NOT_QUOTABLE = 3


class UsageError(Exception):
    """An input the user has to fix; printed as one line, exit status 2."""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--adjudications", type=Path, help="YAML list of {task, decision, reason}")
    p.add_argument("--reference-score", type=float, help="published score to compare with")
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
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("job", nargs="?", help="job dir (<jobs_dir>/<job_name>) or s3://bucket/prefix")
    src.add_argument("--stack", help="read the job dir from this Pulumi stack's outputs")
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


def _layout(job: str, endpoint: str | None) -> JobLayout:
    if is_s3_uri(job):
        return JobLayout.s3(make_s3_client(endpoint), parse_s3_uri(job))
    return JobLayout.local(Path(job))


def _inputs(args: argparse.Namespace):
    try:
        adjudications = adj.load_adjudications(args.adjudications) if args.adjudications else []
        rules = load_rules(args.rules)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    return adjudications, rules


def _report(
    args,
    job: str,
    reference: float | None,
    provenance: dict | None = None,
    role: str | None = None,
    adjudicate: bool = True,
) -> Report:
    """Audit one job. `role` ("--rerun") prefixes errors so the user knows which input."""
    adjudications, rules = _inputs(args)
    try:
        layout = _layout(job, args.s3_endpoint_url)
        return build_report(
            layout,
            adjudications=adjudications if adjudicate else [],
            reference_score=reference,
            rules=rules,
            workers=16 if is_s3_uri(job) else 1,
            dataset_tasks=getattr(args, "dataset_tasks", None),
            official_dataset_commit=getattr(args, "official_dataset_commit", None),
            provenance=provenance,
        )
    except (NotAJobError, ValueError) as exc:
        raise UsageError(f"{role} {job}: {exc}" if role else str(exc)) from exc


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
        if not Path(stack_path).is_file():
            return None, [
                f"the stack's provenance manifest {stack_path} is not readable here: copy it "
                "and pass --provenance FILE to show it in the report"
            ]
        try:
            return prov.load(Path(stack_path)), []
        except prov.ProvenanceError as exc:
            return None, [str(exc)]
    try:
        text = _layout(job, args.s3_endpoint_url).read_text(prov.ARCHIVED)
    except (NotAJobError, ValueError, OSError):
        return None, []  # the job's own errors are reported by the audit itself
    if text is None:
        return None, []
    try:
        return prov.parse(text, f"{job.rstrip('/')}/{prov.ARCHIVED}"), []
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


def run_audit(argv: list[str]) -> int:
    args = _audit_parser().parse_args(argv)
    _logging(args.verbose)
    job, reference = args.job, args.reference_score
    reruns: list[tuple[str, str]] = [(r, "--rerun") for r in args.rerun]
    stack_provenance = None
    if args.stack:
        from audit.read.stack import StackError, job_from_outputs, read_stack_outputs

        try:
            found = job_from_outputs(read_stack_outputs(args.stack, args.project), args.stack)
        except StackError as exc:
            raise UsageError(str(exc)) from exc
        if reference is None:
            reference = found.reference_score
        job = _here(found, found.job_dir)
        rerun_dirs = [_here(found, r) for r in found.rerun_job_dirs]
        _readable(job, "job dir", args.stack, found.harbor_host)
        for rerun in rerun_dirs:
            _readable(rerun, "rerun job dir", args.stack, found.harbor_host)
        reruns = [(r, "stack rerun job") for r in rerun_dirs] + reruns
        if found.rerun_waiting:
            log.warning("stack %s has no rerun job yet: %s", args.stack, found.rerun_waiting)
        stack_provenance = found.provenance_path and _here(found, found.provenance_path)
    seen = {_identity(job): "the main job"}
    for rerun, role in reruns:
        ident = _identity(rerun)
        if ident in seen:
            raise UsageError(
                f"{role} {rerun} is {seen[ident]} again: give each job once (a rerun is a "
                "different job dir than the main job)"
            )
        seen[ident] = f"{role} {rerun}"

    provenance, provenance_problems = _provenance(args, stack_provenance, job)
    report = _report(args, job, reference, provenance)
    report.problems.extend(provenance_problems)
    if reruns:
        rerun_reports = [
            _report(args, rerun, None, role=role, adjudicate=False) for rerun, role in reruns
        ]
        report.merge = merge_reports(report, rerun_reports, reference)

    to_terminal = args.out is None and sys.stdout.isatty()
    width = shutil.get_terminal_size((120, 40)).columns if to_terminal else None
    text = render(report, args.format, width=width, color=to_terminal)
    if args.out:
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
    else:
        sys.stdout.write(text)
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
    report = _report(args, str(args.job), args.reference_score, provenance)
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
