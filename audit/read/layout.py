"""The job-directory layout, local or on S3: the only code that knows where Harbor puts files.

A job dir holds `config.json`, `result.json`, `job.log` and one `<task>__<id>/` dir per trial
(reference §3). Readers never raise for a missing or unreadable file: they return None and the
caller records an evidence problem. Very large logs are read as head + tail so one runaway
trial log cannot make an audit of thousands of trials slow or run out of memory.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from audit.read.s3 import S3Uri
from contracts import jobdir

# Harbor's own files: named once, in the job-directory contract the program shares
# (contracts/jobdir.py, which imports nothing, like contracts/outputs.py).
JOB_CONFIG = jobdir.JOB_CONFIG
JOB_RESULT = jobdir.JOB_RESULT
JOB_LOG = jobdir.JOB_LOG
TRIAL_CONFIG = jobdir.TRIAL_CONFIG
TRIAL_RESULT = jobdir.TRIAL_RESULT
TRIAL_LOG = jobdir.TRIAL_LOG
TRIAL_EXCEPTION = jobdir.TRIAL_EXCEPTION

VERIFIER_STDOUT = "verifier/test-stdout.txt"
VERIFIER_REWARD_TXT = "verifier/reward.txt"
VERIFIER_REWARD_JSON = "verifier/reward.json"
AGENT_TRAJECTORY = "agent/trajectory.json"
AGENT_PANE = "agent/terminus_2.pane"
AGENT_RECORDING = "agent/recording.cast"
AGENT_ORACLE_LOG = "agent/oracle.txt"
AGENT_EXIT_CODE = "agent/exit-code.txt"
AGENT_DIR = "agent"
AGENT_SETUP_STDOUT = "agent/setup/stdout.txt"

# What the stack writes beside Harbor's files while a job runs on Kubernetes (Harbor's `ack`
# environment runs each trial as a pod): the cluster's own account of the trials' pods, as the
# API's watch delivers it (audit/read/kubernetes.py reads them). Absent for a docker job or an older
# one: the audit then judges from Harbor's files alone.
K8S_EVENTS = jobdir.K8S_EVENTS  # one core/v1 Event per line (a repeated event: last per uid)
K8S_PODS = jobdir.K8S_PODS  # one {"type": ADDED|MODIFIED|DELETED, "object": <Pod>} per line
# The serving plane's own record, kept beside every job with a serving plane: the gateway's and
# the workers' metrics read every few seconds (audit/read/serving.py reads it). Absent for a
# job without one, or an older one: the audit then judges from the trials' own words alone.
SERVING_RECORD = jobdir.SERVING_RECORD

# Harbor names trial dirs `<task name cut to 32 chars>__<short id>`.
TRIAL_DIR = re.compile(r"^(?P<task>.+)__(?P<id>[A-Za-z0-9]+)$")

# Read at most this much of one file; bigger files are read as head + tail.
MAX_READ = 4 * 1024 * 1024


class NotAJobError(ValueError):
    """The path or URI does not look like a Harbor job directory."""


class _Backend(Protocol):
    def read(self, rel: str, limit: int) -> bytes | None: ...
    def entries(self) -> tuple[list[str], list[str]]: ...
    def files(self) -> list[str]: ...
    def files_under(self, rel: str) -> list[str]: ...


@dataclass
class _Local:
    root: Path

    def __post_init__(self) -> None:
        # Plain strings: building a Path per file read costs more than the read itself.
        self._base = str(self.root)

    def read(self, rel: str, limit: int) -> bytes | None:
        try:
            with open(os.path.join(self._base, rel), "rb") as fh:
                data = fh.read(limit + 1)
                if len(data) <= limit:
                    return data
                fh.seek(-(limit // 2), 2)
                return data[: limit // 2] + b"\n[... truncated by audit ...]\n" + fh.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def entries(self) -> tuple[list[str], list[str]]:
        dirs: list[str] = []
        files: list[str] = []
        with os.scandir(self._base) as it:
            for entry in it:
                (dirs if entry.is_dir() else files).append(entry.name)
        return sorted(dirs), sorted(files)

    def files(self) -> list[str]:
        return sorted(
            p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file()
        )

    def files_under(self, rel: str) -> list[str]:
        out: list[str] = []
        stack = [rel]
        while stack:
            sub = stack.pop()
            try:
                with os.scandir(os.path.join(self._base, sub)) as it:
                    for entry in it:
                        path = f"{sub}/{entry.name}"
                        (stack if entry.is_dir() else out).append(path)
            except (FileNotFoundError, NotADirectoryError):
                continue
        return sorted(out)


@dataclass
class _S3:
    client: Any
    uri: S3Uri
    _keys: dict[str, int] | None = field(default=None, repr=False)

    def _index(self) -> dict[str, int]:
        # One listing for the whole job: per-file HEAD requests would make an S3 audit of
        # thousands of trials take minutes.
        if self._keys is None:
            from botocore.exceptions import BotoCoreError, ClientError

            keys: dict[str, int] = {}
            base = f"{self.uri.prefix}/" if self.uri.prefix else ""
            paginator = self.client.get_paginator("list_objects_v2")
            try:
                for page in paginator.paginate(Bucket=self.uri.bucket, Prefix=base):
                    for obj in page.get("Contents", []):
                        keys[obj["Key"][len(base) :]] = obj["Size"]
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "error")
                raise NotAJobError(
                    f"cannot list {self.uri} ({code}): check the bucket name and credentials"
                ) from exc
            except BotoCoreError as exc:
                raise NotAJobError(f"cannot reach S3 for {self.uri}: {exc}") from exc
            self._keys = keys
        return self._keys

    def read(self, rel: str, limit: int) -> bytes | None:
        from botocore.exceptions import BotoCoreError, ClientError

        size = self._index().get(rel)
        if size is None:
            return None
        key = self.uri.key(rel)
        try:
            if size <= limit:
                return self.client.get_object(Bucket=self.uri.bucket, Key=key)["Body"].read()
            half = limit // 2
            head = self.client.get_object(
                Bucket=self.uri.bucket, Key=key, Range=f"bytes=0-{half - 1}"
            )
            tail = self.client.get_object(Bucket=self.uri.bucket, Key=key, Range=f"bytes=-{half}")
            return head["Body"].read() + b"\n[... truncated by audit ...]\n" + tail["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise OSError(f"s3 read of {key} failed: {exc}") from exc
        except BotoCoreError as exc:
            # Reported as an evidence problem for this one file by the caller.
            raise OSError(f"s3 read of {key} failed: {exc}") from exc

    def entries(self) -> tuple[list[str], list[str]]:
        dirs: set[str] = set()
        files: set[str] = set()
        for rel in self._index():
            top, sep, _ = rel.partition("/")
            (dirs if sep else files).add(top)
        return sorted(dirs), sorted(files)

    def files(self) -> list[str]:
        return sorted(self._index())

    def files_under(self, rel: str) -> list[str]:
        prefix = f"{rel}/"
        return sorted(k for k in self._index() if k.startswith(prefix))


class JobLayout:
    """A Harbor job directory: where its files are and how to read them."""

    def __init__(self, backend: _Backend, location: str) -> None:
        self._backend = backend
        self.location = location

    @classmethod
    def local(cls, path: Path) -> JobLayout:
        path = Path(path)
        if not path.is_dir():
            raise NotAJobError(f"job dir {path} does not exist or is not a directory")
        return cls(_Local(path), str(path))

    @classmethod
    def s3(cls, client: Any, uri: S3Uri) -> JobLayout:
        return cls(_S3(client, uri), str(uri))

    @property
    def name(self) -> str:
        return self.location.rstrip("/").rsplit("/", 1)[-1]

    def read_bytes(self, rel: str, limit: int = MAX_READ) -> bytes | None:
        return self._backend.read(rel, limit)

    def read_text(self, rel: str, limit: int = MAX_READ) -> str | None:
        data = self.read_bytes(rel, limit)
        return None if data is None else data.decode("utf-8", errors="replace")

    def trial_dirs(self) -> tuple[list[str], list[str]]:
        """(trial dir names, other top-level dir names that are not trials)."""
        dirs, _ = self._backend.entries()
        trials: list[str] = []
        others: list[str] = []
        for name in dirs:
            if name.startswith((".", "_")):
                continue
            (trials if TRIAL_DIR.match(name) else others).append(name)
        return trials, others

    def files(self) -> list[str]:
        """Every file of the job, relative to the job dir (for the archive)."""
        return self._backend.files()

    def files_under(self, rel: str) -> list[str]:
        """Every file below the dir `rel` (relative to the job dir); [] if it is absent."""
        return self._backend.files_under(rel)

    def check_is_job(self) -> None:
        trials, _ = self.trial_dirs()
        dirs, files = self._backend.entries()
        if not trials and TRIAL_LOG in files and ({"agent", "verifier"} & set(dirs)):
            raise NotAJobError(
                f"{self.location} is a trial dir, not a job dir: pass its parent "
                "(<jobs_dir>/<job_name>)"
            )
        if not trials and JOB_CONFIG not in files and JOB_RESULT not in files:
            raise NotAJobError(
                f"{self.location} is not a Harbor job dir: no result.json, no config.json and "
                "no <task>__<id> trial dirs (pass <jobs_dir>/<job_name>, not the jobs dir)"
            )


def task_of(trial_dir: str) -> str:
    match = TRIAL_DIR.match(trial_dir)
    return match.group("task") if match else trial_dir
