"""`python -m audit`: audit a Harbor job dir (local, s3:// or from a stack), or archive one.

    python -m audit JOB_DIR_OR_S3_URI [--adjudications FILE] [--reference-score 73.0]
                    [--format table|json|markdown|html] [--out PATH]
    python -m audit --stack NAME [same options]
    python -m audit archive JOB_DIR s3://bucket/prefix [--adjudications FILE]
                    [--reference-score 73.0]

Exit status: 0 when the report was written, 2 when an input is unusable (one line on stderr
naming what to fix).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
from pathlib import Path

from audit import adjudications as adj
from audit.layout import JobLayout, NotAJobError
from audit.render import FORMATS, render
from audit.report import build_report
from audit.rules import RULES_FILE, load_rules
from audit.s3 import is_s3_uri, make_s3_client, parse_s3_uri

log = logging.getLogger("audit")


class UsageError(Exception):
    """An input the user has to fix; printed as one line, exit status 2."""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--adjudications", type=Path, help="YAML list of {task, decision, reason}")
    p.add_argument("--reference-score", type=float, help="published score to compare with")
    p.add_argument("--rules", type=Path, default=RULES_FILE, help="signature rules file")
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
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--out", type=Path, help="write the report here instead of stdout")
    _common(p)
    return p


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


def _report(args, job: str, reference: float | None):
    adjudications, rules = _inputs(args)
    try:
        layout = _layout(job, args.s3_endpoint_url)
        return build_report(
            layout,
            adjudications=adjudications,
            reference_score=reference,
            rules=rules,
            workers=16 if is_s3_uri(job) else 1,
        )
    except (NotAJobError, ValueError) as exc:
        raise UsageError(str(exc)) from exc


def run_audit(argv: list[str]) -> int:
    args = _audit_parser().parse_args(argv)
    _logging(args.verbose)
    job, reference = args.job, args.reference_score
    if args.stack:
        from audit.stack import StackError, job_from_outputs, read_stack_outputs

        try:
            found = job_from_outputs(read_stack_outputs(args.stack, args.project), args.stack)
        except StackError as exc:
            raise UsageError(str(exc)) from exc
        job = found.job_dir
        if reference is None:
            reference = found.reference_score
        if not is_s3_uri(job) and not Path(job).is_dir():
            where = f" on the Harbor host {found.harbor_host}" if found.harbor_host else ""
            raise UsageError(
                f"stack {args.stack!r} names job dir {job}{where}, which is not readable here: "
                "run the audit on that host, copy the dir here, or archive it to S3 and audit "
                "the s3:// URI"
            )
    report = _report(args, job, reference)
    to_terminal = args.out is None and sys.stdout.isatty()
    width = shutil.get_terminal_size((120, 40)).columns if to_terminal else None
    text = render(report, args.format, width=width, color=to_terminal)
    if args.out:
        try:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text)
        except OSError as exc:
            raise UsageError(f"cannot write --out {args.out}: {exc.strerror}") from exc
        log.info("wrote %s report to %s", args.format, args.out)
    else:
        sys.stdout.write(text)
    return 0


def run_archive(argv: list[str]) -> int:
    from audit.archive import ArchiveError, archive_job

    args = _archive_parser().parse_args(argv)
    _logging(args.verbose)
    try:
        dest = parse_s3_uri(args.dest)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    report = _report(args, str(args.job), args.reference_score)
    reports = {
        "report.json": render(report, "json").encode(),
        "report.md": render(report, "markdown").encode(),
        "report.html": render(report, "html").encode(),
    }
    try:
        result = archive_job(args.job, dest, make_s3_client(args.s3_endpoint_url), reports)
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
