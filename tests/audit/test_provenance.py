"""The provenance manifest in the report: HTML and JSON, --out writes it beside the report,
--stack reads it from the stack's path, a bad one is refused, and the archive stores it."""

from __future__ import annotations

import json
from html import unescape

import pytest

from audit.output.archive import MANIFEST
from contracts import outputs as K
from tests.audit.audit_jobgen import PYTEST_FAIL, PYTEST_PASS, TrialSpec, write_job
from tests.audit.test_cli import _fake_pulumi

pytestmark = pytest.mark.no_docker

WHEEL_SHA = "9f2c" * 16
MANIFEST_DATA = {
    "schema": K.PROVENANCE_SCHEMA,
    "stack": "a100",
    "created_at": "2026-08-30T15:40:02Z",
    "harbor": {"version": "0.21.0", "wheel_sha256": WHEEL_SHA},
    "dataset": {
        "repo": "https://git.example/terminal-bench-2.git",
        "commit": "5b0d3c2e9a8f7d6c5b4a39281706f5e4d3c2b1a0",
        "path": "/data/tb21-tasks",
        "task_count": 2,
    },
    "task_images": {"tb/fix-git:2.1": "sha256:" + "ab" * 32},
    "serving": {
        "image_id": "sha256:" + "cd" * 32,
        "model_name": "qwen38-27b",
        "model_path": "/models/Qwen3-8B",
        "workers": [{"url": "http://worker-a.example:30000", "server_info": {"tp_size": 1}}],
        "router_args": ["--policy", "cache_aware"],
    },
    "harbor_config": {"n_concurrent_trials": 25, "agent_timeout_multiplier": 6.0},
    "compose_override": "services:\n  main:\n    dns: [10.0.0.1]\n",
    "job": {"name": "small", "dir": "/jobs/small"},
    "reruns": [],
}


@pytest.fixture
def small_job(tmp_path):
    specs = [
        TrialSpec("fix-git", verifier_stdout=PYTEST_PASS),
        TrialSpec("regex-log", reward=0.0, verifier_stdout=PYTEST_FAIL),
    ]
    return write_job(tmp_path, "small", specs, concurrency=2)


@pytest.fixture
def manifest(tmp_path):
    path = tmp_path / "provenance.json"
    path.write_text(json.dumps(MANIFEST_DATA))
    return path


def test_html_shows_the_key_facts_and_the_full_manifest(small_job, manifest, run_cli):
    res = run_cli(str(small_job), "--provenance", str(manifest), "--format", "html")
    assert res.returncode == 0, res.stderr
    page = res.stdout
    section = page[page.index("<h2>Provenance</h2>") :]
    facts, full = section.split("<details>", 1)
    for key, value in [
        ("Harbor version", "0.21.0"),
        ("Harbor wheel sha256", WHEEL_SHA),
        ("dataset repo", "https://git.example/terminal-bench-2.git"),
        ("dataset commit", "5b0d3c2e9a8f7d6c5b4a39281706f5e4d3c2b1a0"),
        ("dataset task count", "2"),
        ("SGLang image id", "sha256:" + "cd" * 32),
        ("model name", "qwen38-27b"),
        ("model path", "/models/Qwen3-8B"),
        ("stack", "a100"),
    ]:
        assert f'<td class="k">{key}</td><td>{value}</td>' in facts, key
    pre = full[full.index("<pre") : full.index("</pre>")]
    assert json.loads(unescape(pre[pre.index(">") + 1 :])) == MANIFEST_DATA


def test_json_carries_the_manifest_and_conformance_uses_it(small_job, manifest, run_cli):
    res = run_cli(
        str(small_job),
        "--provenance",
        str(manifest),
        "--format",
        "json",
        "--official-dataset-commit",
        "5b0d3c2e9a8f",
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["provenance"] == MANIFEST_DATA
    # The manifest's task count and commit answer what the job dir alone cannot.
    assert data["conformance"]["unknown"] == []
    assert data["conformance"]["differences"] == [
        "1 attempt per task (leaderboard: at least 5)",
        "agent_timeout_multiplier 6.0 (leaderboard: 1.0)",
    ]


def test_out_writes_provenance_beside_the_report(small_job, manifest, run_cli, tmp_path):
    out = tmp_path / "reports" / "report.md"
    res = run_cli(
        str(small_job), "--provenance", str(manifest), "--format", "markdown", "--out", str(out)
    )
    assert res.returncode == 0, res.stderr
    assert json.loads((out.parent / "provenance.json").read_text()) == MANIFEST_DATA
    assert "## Provenance" in out.read_text()


def test_out_without_a_manifest_writes_none(small_job, run_cli, tmp_path):
    out = tmp_path / "r" / "report.json"
    assert run_cli(str(small_job), "--format", "json", "--out", str(out)).returncode == 0
    assert not (out.parent / "provenance.json").exists()


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"schema": "other/2"}', "has schema 'other/2'; expected 'benchstack.provenance/1'"),
        ('{"stack": "a100"}', 'has no "schema" key'),
        ("[1, 2]", "is a JSON list, not an object"),
        ("{not json", "is not JSON"),
    ],
)
def test_a_bad_manifest_is_refused_naming_the_file(small_job, run_cli, tmp_path, content, message):
    bad = tmp_path / "prov.json"
    bad.write_text(content)
    res = run_cli(str(small_job), "--provenance", str(bad))
    assert res.returncode == 2
    assert str(bad) in res.reason and message in res.reason
    assert res.reason.startswith("audit: error: --provenance: ") and "Traceback" not in res.stderr


def test_a_missing_manifest_is_refused(small_job, run_cli, tmp_path):
    res = run_cli(str(small_job), "--provenance", str(tmp_path / "none.json"))
    assert res.returncode == 2 and "cannot read provenance manifest" in res.reason


def test_stack_reads_the_manifest_from_its_path(small_job, manifest, run_cli, tmp_path):
    outputs = {K.JOB_DIR: str(small_job), K.PROVENANCE_PATH: str(manifest)}
    res = run_cli("--stack", "s", "--format", "json", env=_fake_pulumi(tmp_path, outputs))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["provenance"] == MANIFEST_DATA


def test_stack_manifest_not_readable_here_is_a_problem_line(small_job, run_cli, tmp_path):
    outputs = {K.JOB_DIR: str(small_job), K.PROVENANCE_PATH: "/remote/jobs/small.prov.json"}
    res = run_cli("--stack", "s", "--format", "json", env=_fake_pulumi(tmp_path, outputs))
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["provenance"] is None
    assert any("/remote/jobs/small.prov.json is not readable here" in p for p in data["problems"])


@pytest.mark.real
def test_archive_uploads_provenance_and_the_archive_brings_it_back(
    small_job, manifest, run_cli, s3_env, s3_client, bucket
):
    dest = f"s3://{bucket}/runs/small"
    res = run_cli("archive", str(small_job), dest, "--provenance", str(manifest), env=s3_env)
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    body = s3_client.get_object(Bucket=bucket, Key="runs/small/_audit/provenance.json")["Body"]
    assert json.loads(body.read()) == MANIFEST_DATA
    files = json.loads(
        s3_client.get_object(Bucket=bucket, Key=f"runs/small/{MANIFEST}")["Body"].read()
    )["files"]
    assert {
        "_audit/report.json",
        "_audit/report.md",
        "_audit/report.html",
        "_audit/provenance.json",
    } <= set(files)

    again = run_cli("archive", str(small_job), dest, "--provenance", str(manifest), env=s3_env)
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert second["files"] == result["files"]
    # Reports hold no timestamp, and the manifest's bytes are stable: nothing to resend.
    assert second["uploaded"] == 0, second

    # Auditing the archived prefix finds the manifest the archive stored.
    res = run_cli(dest, "--format", "json", env=s3_env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["provenance"] == MANIFEST_DATA
