"""Archive to S3 (moto server on 127.0.0.1): manifest, verification, resume, reading back."""

from __future__ import annotations

import hashlib
import json

import pytest

from audit.output.archive import MANIFEST, ArchiveError, archive_job
from audit.pipeline import build_report
from audit.read.layout import JobLayout
from audit.read.s3 import parse_s3_uri
from tests.audit.audit_jobgen import PYTEST_FAIL, PYTEST_PASS, TrialSpec, apt_502, write_job
from tests.audit.conftest import SEED_ADJUDICATIONS

pytestmark = [pytest.mark.real, pytest.mark.no_docker]

REPORTS = {"report.json": b'{"raw": {}}\n', "report.md": b"# Audit\n"}


@pytest.fixture
def small_job(tmp_path):
    specs = [
        TrialSpec("fix-git", verifier_stdout=PYTEST_PASS),
        TrialSpec("regex-log", reward=0.0, verifier_stdout=PYTEST_FAIL),
        TrialSpec("prove-plus-comm", reward=0.0, verifier_stdout=apt_502("coq")),
    ]
    return write_job(tmp_path, "small-job", specs, concurrency=3)


def _local_files(job):
    return {
        p.relative_to(job).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in job.rglob("*")
        if p.is_file()
    }


class FailingClient:
    """The real client, except that put_object fails after `allowed` successful calls."""

    def __init__(self, client, allowed: int):
        self._client, self.allowed, self.puts = client, allowed, 0

    def __getattr__(self, name):
        return getattr(self._client, name)

    def put_object(self, **kwargs):
        if self.puts >= self.allowed:
            raise ConnectionError("simulated network drop during upload")
        self.puts += 1
        return self._client.put_object(**kwargs)


class CountingClient(FailingClient):
    def __init__(self, client):
        super().__init__(client, allowed=10**9)


def test_archive_uploads_everything_with_a_manifest(s3_client, bucket, small_job):
    dest = parse_s3_uri(f"s3://{bucket}/runs/small-job")
    result = archive_job(small_job, dest, s3_client, REPORTS)
    local = _local_files(small_job)
    assert result.files == len(local) + len(REPORTS)
    assert (result.uploaded, result.skipped, result.verified) == (result.files, 0, result.files)

    body = s3_client.get_object(Bucket=bucket, Key=f"runs/small-job/{MANIFEST}")["Body"].read()
    manifest = json.loads(body)
    assert {k: v["sha256"] for k, v in manifest["files"].items() if not k.startswith("_")} == local
    assert set(manifest["files"]) >= {"_audit/report.json", "_audit/report.md"}
    # The stored bytes really are the local bytes.
    some = "result.json"
    obj = s3_client.get_object(Bucket=bucket, Key=f"runs/small-job/{some}")
    assert hashlib.sha256(obj["Body"].read()).hexdigest() == local[some]
    assert obj["Metadata"]["sha256"] == local[some]


def test_second_run_skips_identical_files(s3_client, bucket, small_job):
    dest = parse_s3_uri(f"s3://{bucket}/small-job")
    archive_job(small_job, dest, s3_client, REPORTS)
    counting = CountingClient(s3_client)
    again = archive_job(small_job, dest, counting, REPORTS)
    assert (again.uploaded, again.skipped) == (0, again.files)
    assert counting.puts == 0, "nothing (not even the manifest) is re-sent"

    # One changed file is the only one sent again.
    (small_job / "job.log").write_text("Starting job small-job\nresumed\n")
    counting = CountingClient(s3_client)
    third = archive_job(small_job, dest, counting, REPORTS)
    assert third.uploaded == 1
    assert counting.puts == 2, "the changed file and the new manifest"


def test_interrupted_upload_is_completed_by_a_second_run(s3_client, bucket, small_job):
    dest = parse_s3_uri(f"s3://{bucket}/small-job")
    failing = FailingClient(s3_client, allowed=5)
    with pytest.raises(ConnectionError, match="simulated network drop"):
        archive_job(small_job, dest, failing, REPORTS, workers=1)
    listed = s3_client.list_objects_v2(Bucket=bucket, Prefix="small-job/").get("Contents", [])
    assert len(listed) == 5
    assert not any(o["Key"].endswith(MANIFEST) for o in listed), "no manifest for a partial upload"

    result = archive_job(small_job, dest, s3_client, REPORTS)
    assert result.skipped == 5
    assert result.uploaded == result.files - 5
    manifest = json.loads(
        s3_client.get_object(Bucket=bucket, Key=f"small-job/{MANIFEST}")["Body"].read()
    )
    assert len(manifest["files"]) == result.files


def test_a_corrupted_object_is_replaced_not_skipped(s3_client, bucket, small_job):
    dest = parse_s3_uri(f"s3://{bucket}/small-job")
    archive_job(small_job, dest, s3_client, REPORTS)
    key = "small-job/result.json"
    s3_client.put_object(Bucket=bucket, Key=key, Body=b"{}", Metadata={"sha256": "0" * 64})
    result = archive_job(small_job, dest, s3_client, REPORTS)
    assert result.uploaded == 1
    body = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert body == (small_job / "result.json").read_bytes()


def test_missing_bucket_is_a_clear_error(s3_client, small_job):
    with pytest.raises(ArchiveError, match="bucket 'no-such-bucket-x' is not usable"):
        archive_job(small_job, parse_s3_uri("s3://no-such-bucket-x/p"), s3_client, REPORTS)


def test_cli_archive_then_every_format_reads_from_s3(s3_env, s3_client, bucket, seed_job, run_cli):
    uri = f"s3://{bucket}/runs/{seed_job.name}"
    res = run_cli(
        "archive", str(seed_job), uri, "--adjudications", str(SEED_ADJUDICATIONS), env=s3_env
    )
    assert res.returncode == 0, res.stderr
    outputs = json.loads(res.stdout.splitlines()[-1])
    assert outputs["skipped"] == 0 and outputs["uploaded"] == outputs["files"]
    assert outputs["manifest"] == f"{uri}/{MANIFEST}"

    # The archived reports are the real ones.
    key = f"runs/{seed_job.name}/_audit/report.json"
    archived = json.loads(s3_client.get_object(Bucket=bucket, Key=key)["Body"].read())
    assert archived["scores"]["harbor-0.21"]["rows"][0]["adjusted"]["score"] == 72.73

    adj = ["--adjudications", str(SEED_ADJUDICATIONS)]
    js = run_cli(uri, "--format", "json", *adj, env=s3_env)
    assert js.returncode == 0, js.stderr
    data = json.loads(js.stdout)
    h21 = data["scores"]["harbor-0.21"]["rows"][0]
    assert (h21["raw"]["score"], h21["adjusted"]["score"]) == (68.54, 72.73)
    assert data["scores"]["leaderboard"]["rows"][0]["raw"]["shown"] == "69.3% ± N/A (leaderboard)"
    assert data["job"]["location"] == uri
    assert len(data["trials"]) == 89 and data["problems"] == []
    local = build_report(JobLayout.local(seed_job)).model_dump()
    assert [t["category"] for t in data["trials"]] == [t["category"] for t in local["trials"]]
    for fmt, needle in (
        ("markdown", "| harbor-0.21, adjusted | 64/88 = 72.73"),
        ("html", "<svg"),
        ("table", "64/88 = 72.73"),
    ):
        res = run_cli(uri, "--format", fmt, *adj, env=s3_env)
        assert res.returncode == 0, res.stderr
        assert needle in res.stdout, fmt

    again = run_cli(
        "archive", str(seed_job), uri, "--adjudications", str(SEED_ADJUDICATIONS), env=s3_env
    )
    assert json.loads(again.stdout.splitlines()[-1])["uploaded"] == 0


def test_cli_archive_to_a_bad_uri(run_cli, s3_env, small_job):
    res = run_cli("archive", str(small_job), "/not/s3", env=s3_env)
    assert res.returncode == 2
    assert "is not an s3:// URI" in res.reason


def test_cli_reading_a_missing_bucket_or_empty_prefix(run_cli, s3_env, bucket):
    res = run_cli("s3://no-such-bucket-audit/job", env=s3_env)
    assert res.returncode == 2
    assert "cannot list s3://no-such-bucket-audit/job (NoSuchBucket)" in res.reason
    res = run_cli(f"s3://{bucket}/nothing-here", env=s3_env)
    assert res.returncode == 2
    assert "is not a Harbor job dir" in res.reason
