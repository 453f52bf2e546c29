"""The real CLI: every format, --out, --stack (through a stand-in `pulumi` on PATH), errors."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from html.parser import HTMLParser

import pytest

from contracts import outputs as K
from tests.audit.conftest import SEED_ADJUDICATIONS
from tests.conftest import ROOT, SAMPLE_JOBS


def test_table_format_shows_scores_tokens_and_wall_time(seed_job, run_cli):
    res = run_cli(str(seed_job), "--adjudications", str(SEED_ADJUDICATIONS))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    # The board's number first, then Harbor 0.21's.
    assert out.index("69.3% ± N/A (leaderboard)") < out.index("61/89 = 68.54")
    assert "64/88 = 72.73" in out
    assert "118,199,621" in out and "8,269,356" in out
    assert "7 h 23 min" in out
    assert "-i build-pov-ray" in out
    assert "No trial is ever counted as passed without an adjudication" in " ".join(out.split())


def test_markdown_format(seed_job, run_cli):
    res = run_cli(
        str(seed_job),
        "--format",
        "markdown",
        "--adjudications",
        str(SEED_ADJUDICATIONS),
        "--reference-score",
        "73.0",
    )
    assert res.returncode == 0, res.stderr
    md = res.stdout
    assert md.startswith("# Audit of `qwen38-terminus2-tb21-full89")
    lines = md.splitlines()
    # The board's number is the first line of the summary, then every other convention's.
    assert lines[4] == ("| leaderboard, raw (terminus-2 2.0.0 / openai/qwen38-27b) | "
                        "69.3% ± N/A (leaderboard) |")
    assert "| harbor-0.21, raw | 61/89 = 68.54, 95% CI 58.30 - 77.25 (harbor-0.21) |" in md
    assert ("| harbor-0.21, adjusted | 64/88 = 72.73, 95% CI 62.62 - 80.93 (harbor-0.21) "
            "(excluded: build-pov-ray) |") in md
    # The reference is compared in its convention (the board's by default): 61/88 raw, 64/87
    # adjusted.
    assert "| reference | 73.0 (leaderboard) from --reference-score |" in md
    assert "vs published 73.0 (leaderboard): -3.68 points" in md
    assert "vs published 73.0 (leaderboard): +0.56 points" in md
    assert "| input tokens | 118,199,621 |" in md
    assert "| wall time | 7 h 23 min" in md
    assert "| build-pov-ray | exclude | reward 0 | Task is broken upstream" in md
    assert "**Adjudicated pass:** Verifier passed the first four tests" in md
    assert "| infra | 5 |" in md


class _Resources(HTMLParser):
    """Collects tags and every attribute that could load something."""

    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "xlink:href", "srcset", "data", "action") and value:
                self.refs.append(value)


def test_html_is_self_contained_with_three_charts(seed_job, run_cli, tmp_path):
    out = tmp_path / "deep" / "report.html"
    res = run_cli(
        str(seed_job),
        "--format",
        "html",
        "--out",
        str(out),
        "--adjudications",
        str(SEED_ADJUDICATIONS),
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout == "", "--out writes the file, not stdout"
    html = out.read_text()
    parser = _Resources()
    parser.feed(html)
    assert parser.tags.count("svg") == 3, "outcomes, phase durations, tokens"
    assert parser.refs == [], f"external references: {parser.refs}"
    assert "script" not in parser.tags and "link" not in parser.tags
    assert "@import" not in html and "url(" not in html
    # The charts carry the data: a bar per category, per trial and per task.
    assert html.count("<title>passed: 59 trials</title>") == 1
    assert html.count("<title>agent_execution:") == 89
    assert html.count("<title>input: ") == 89
    assert "118,199,621" in html and "7 h 23 min" in html
    assert "Adjudicated exclude" in html


def test_html_on_a_job_without_tokens_or_timings(run_cli):
    res = run_cli(str(SAMPLE_JOBS / "pitfall-missing-image"), "--format", "html")
    assert res.returncode == 0, res.stderr
    assert "No token counts in the trials" in res.stdout
    assert "image_pull_failed" in res.stdout


def _fake_pulumi(tmp_path, outputs: dict | None, exit_code: int = 0) -> dict[str, str]:
    """A stand-in for the external pulumi CLI: prints the given stack outputs."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "pulumi"
    log = tmp_path / "pulumi-args.txt"
    body = json.dumps(outputs) if outputs is not None else ""
    script.write_text(
        "#!/usr/bin/env bash\n"
        f'printf "%s\\n" "$@" > {log}\n'
        + (
            f"echo 'error: no stack named \"x\" found' >&2\nexit {exit_code}\n"
            if exit_code
            else f"cat <<'JSON'\n{body}\nJSON\n"
        )
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}


def test_stack_reads_job_dir_and_reference_score(seed_job, run_cli, tmp_path):
    outputs = {key: f"value-of-{key}" for key in K.ALL}
    outputs.update({K.JOB_DIR: str(seed_job), K.REFERENCE_SCORE: 73.0, K.HARBOR_HOST: "local"})
    # The rerun list is a list in real stack outputs (test_merge.py covers a non-empty one).
    outputs[K.RERUN_JOB_DIRS] = []
    # The local host: a remote one is copied from (tests/hostplane/test_job_copy.py).
    outputs[K.HARBOR_SSH] = None
    env = _fake_pulumi(tmp_path, outputs)
    res = run_cli("--stack", "a100", "--format", "json", env=env)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["scores"]["harbor-0.21"]["rows"][0]["raw"]["score"] == 68.54
    # A bare number (a stack deployed before conventions) was published on the board.
    assert data["reference"]["published"] == {
        "score": 73.0, "plus_minus": None, "convention": "leaderboard", "tasks": {},
        "source": "the stack's reference_score"}
    # Raw: 61/88 (headless-terminal's RuntimeError out) = 69.32; adjusted: the 5 infra trials out
    # too, 61/83 = 73.49.
    assert [c["difference"] for c in data["reference"]["comparisons"]] == [-3.68, 0.49]
    args = (tmp_path / "pulumi-args.txt").read_text().split()
    # The project dir goes with it: the CLI finds the stack (and its backend) from any cwd.
    assert args == ["--cwd", ".", "stack", "output", "--json", "--stack", "a100"]


def test_stack_reference_with_its_convention_and_flags_over_it(seed_job, run_cli, tmp_path):
    reference = {"score": 68.5, "plus_minus": 1.0, "convention": "harbor-0.21"}
    outputs = {K.JOB_DIR: str(seed_job), K.REFERENCE_SCORE: reference}
    env = _fake_pulumi(tmp_path, outputs)
    data = json.loads(run_cli("--stack", "s", "--format", "json", env=env).stdout)
    published = data["reference"]["published"]
    assert (published["score"], published["plus_minus"], published["convention"]) == (
        68.5, 1.0, "harbor-0.21")
    # 61/89 = 68.54 in Harbor 0.21's convention: +0.04, inside its ± 1.0.
    assert data["reference"]["comparisons"][0]["difference"] == 0.04
    # A flag given on the command line wins over the stack's.
    data = json.loads(run_cli("--stack", "s", "--format", "json", "--reference-convention",
                              "leaderboard", env=env).stdout)
    assert data["reference"]["published"]["convention"] == "leaderboard"
    assert data["reference"]["comparisons"][0]["difference"] == 0.82  # 69.32 - 68.5


def test_make_audit_reads_the_stack_with_the_makefiles_engine(seed_job, tmp_path):
    """`make audit` with no pulumi on PATH runs the engine `make up` built (the Makefile's
    ENGINE_DIR, here a stand-in engine dir given the way setup/defaults.env lets the
    environment win), with its PULUMI_HOME, and prints the board's number first."""
    engine = tmp_path / "engine"
    bindir = engine / "current" / "bin"
    bindir.mkdir(parents=True)
    seen = tmp_path / "pulumi-env.txt"
    outputs = {K.JOB_DIR: str(seed_job), K.REFERENCE_SCORE: 73.0}
    fake = bindir / "pulumi"
    fake.write_text("#!/usr/bin/env bash\n"
                    f'echo "$PULUMI_HOME $*" > {seen}\n'
                    f"cat <<'JSON'\n{json.dumps(outputs)}\nJSON\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "BENCHSTACK_ENGINE_DIR": str(engine)}
    # The run's bytecode cache (tests/run.sh) where there is one: else this minimal environment
    # has Python write __pycache__ into the clone.
    env.update({k: v for k, v in os.environ.items() if k == "PYTHONPYCACHEPREFIX"})

    def make(*args: str) -> str:
        proc = subprocess.run(["make", "-s", "audit", "STACK=a100", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout

    data = json.loads(make("AUDIT_ARGS=--format json"))
    assert data["convention"] == "leaderboard" and data["job"]["location"] == str(seed_job)
    assert seen.read_text().split() == [str(engine / "current" / "home"), "--cwd", ".", "stack",
                                        "output", "--json", "--stack", "a100"]
    # The summary's first row (after the title and the table's head) is the board's number.
    first = make("AUDIT_ARGS=--format markdown").splitlines()[4]
    assert first.startswith("| leaderboard, raw ")
    assert first.endswith("| 69.3% ± N/A (leaderboard) |")


def test_stack_falls_back_to_jobs_dir_and_job_name(seed_job, run_cli, tmp_path):
    outputs = {K.JOBS_DIR: str(seed_job.parent), K.JOB_NAME: seed_job.name}
    res = run_cli("--stack", "local", "--format", "json", env=_fake_pulumi(tmp_path, outputs))
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["job"]["location"] == str(seed_job)
    assert data["reference"] == {"published": None, "comparisons": []}


@pytest.mark.parametrize(
    "outputs, exit_code, message",
    [
        ({K.ROUTER_URL: "http://127.0.0.1:1"}, 0, "has no 'job_dir' output"),
        (None, 255, 'failed: error: no stack named "x" found'),
        (
            {K.JOB_DIR: "/nonexistent/jobs/j1", K.HARBOR_HOST: "gpu-a"},
            0,
            "on the Harbor host gpu-a",
        ),
        ({K.JOB_DIR: "/tmp", K.REFERENCE_SCORE: "high"}, 0, "'reference_score' is not a score"),
    ],
)
def test_stack_errors_are_one_line(run_cli, tmp_path, outputs, exit_code, message):
    res = run_cli("--stack", "x", env=_fake_pulumi(tmp_path, outputs, exit_code))
    assert res.returncode == 2
    assert message in res.reason
    assert res.reason.startswith("audit: error: ")
    assert "Traceback" not in res.stderr


def test_stack_without_pulumi_on_path(run_cli, tmp_path):
    res = run_cli("--stack", "x", env={"PATH": str(tmp_path)})
    assert res.returncode == 2
    assert "pulumi CLI is not on PATH" in res.reason


@pytest.mark.parametrize(
    "args, message",
    [
        (["/nonexistent/job"], "does not exist"),
        ([str(SAMPLE_JOBS.parent)], "not a Harbor job dir"),
        (["{job}", "--adjudications", "/nonexistent.yaml"], "cannot read adjudications file"),
        (["{job}", "--rules", "/nonexistent-rules.yaml"], "cannot read rules file"),
        (["s3://"], "has no bucket name"),
    ],
)
def test_input_errors_are_one_line(run_cli, seed_job, args, message):
    res = run_cli(*[a.replace("{job}", str(seed_job)) for a in args])
    assert res.returncode == 2, res.stdout
    assert message in res.reason
    assert "Traceback" not in res.stderr


def test_adjudication_error_names_file_and_entry(run_cli, seed_job, tmp_path):
    bad = tmp_path / "adj.yaml"
    bad.write_text(
        "- task: fix-git\n  decision: pass\n  reason: fine by me\n- task: x\n  decision: win\n"
    )
    res = run_cli(str(seed_job), "--adjudications", str(bad))
    assert res.returncode == 2
    assert f"{bad}: entry 2 (x): decision" in res.reason


def test_every_format_carries_every_convention_and_the_reference_in_its_own(seed_job,
                                                                           run_cli):
    """JSON, Markdown, the terminal table and HTML all state each convention's score and
    interval by name, and compare the reference in the convention it was published in."""
    args = [str(seed_job), "--reference-score", "68.5", "--reference-convention", "harbor-0.21",
            "--reference-plus-minus", "1.0", "--adjudications", str(SEED_ADJUDICATIONS)]
    data = json.loads(run_cli(*args, "--format", "json").stdout)
    h21 = data["scores"]["harbor-0.21"]["rows"][0]
    assert (h21["raw"]["low"], h21["raw"]["high"]) == (58.3, 77.25)
    raw, adjusted = data["reference"]["comparisons"]
    # 68.54 - 68.5 = +0.04: inside both intervals; 72.73 - 68.5 = +4.23: outside its ± 1.0.
    assert (raw["difference"], raw["reference_inside_ours"], raw["ours_inside_reference"]) == (
        0.04, True, True)
    assert (adjusted["difference"], adjusted["reference_inside_ours"],
            adjusted["ours_inside_reference"]) == (4.23, True, False)
    assert data["job"]["reported_convention"] == "harbor-0.21"
    for fmt in ("markdown", "table", "html"):
        res = run_cli(*args, "--format", fmt)
        assert res.returncode == 0, res.stderr
        text = " ".join(res.stdout.replace("│", " ").split())
        assert "58.30 - 77.25" in text, fmt
        assert "62.62 - 80.93" in text, fmt
        assert "vs published 68.5 ± 1.0 (harbor-0.21): +4.23 points" in text, fmt
        assert "OUTSIDE its ±" in text, fmt
        assert "61/85 = 71.76" in text, fmt  # Harbor 0.26: the 4 trials without a reward drop
        assert "harbor-0.21 (its reported mean" in text, fmt


def test_every_format_says_if_the_raw_score_can_be_quoted_and_if_the_model_was_reached(
    seed_job, run_cli
):
    """Raw (every trial counts) and adjusted, the share of non-passes that are infra or
    unexplained, the verdict, and the model-reached counts, in every format."""
    data = json.loads(run_cli(str(seed_job), "--format", "json").stdout)
    q = data["quotable"]
    # The seed: 5 infra of 30 non-passes; shifting the raw score by at most 5/89 stays within
    # half its 95% interval. The board gives no interval with one trial per task, so the
    # verdict is made in Harbor 0.21's convention, and says so.
    assert q["convention"] == "harbor-0.21" and q["verdict"].startswith("yes (harbor-0.21)")
    assert (q["outside"], q["unexplained"], q["non_passes"]) == (5, 0, 30)
    assert q["largest_shift"] == round(100 * 5 / 89, 2)
    assert q["quotable"] is True and q["tolerance"] > q["largest_shift"]
    assert data["model_reached"]["yes"] == 89
    assert all(t["model_reached"] == "yes" and t["model_reached_detail"] for t in data["trials"])
    for fmt in ("table", "markdown", "html"):
        out = run_cli(str(seed_job), "--format", fmt).stdout
        assert "raw score quotable" in out and "model reached" in out, fmt
        assert "5 of 30 non-passes" in out, fmt


def test_strict_exits_3_when_the_raw_score_cannot_be_quoted(run_cli, tmp_path):
    from tests.audit.audit_jobgen import PYTEST_FAIL, PYTEST_PASS, TrialSpec, apt_502, write_job

    specs = [TrialSpec(f"t{i}", reward=1.0, verifier_stdout=PYTEST_PASS) for i in range(8)]
    specs += [TrialSpec(f"w{i}", reward=0.0, verifier_stdout=PYTEST_FAIL) for i in range(8)]
    clean = write_job(tmp_path / "a", "clean", specs)
    assert run_cli(str(clean), "--strict").returncode == 0
    # Six verifiers of 22 trials failed on a proxy's 502: 27 points, more than the interval.
    broken = specs + [
        TrialSpec(f"n{i}", reward=0.0, verifier_stdout="+ apt-get update\n" + apt_502("curl"))
        for i in range(6)
    ]
    job = write_job(tmp_path / "b", "broken", broken)
    res = run_cli(str(job), "--strict", "--format", "json")
    assert res.returncode == 3, res.stderr
    assert json.loads(res.stdout)["quotable"]["quotable"] is False
    assert "raw score not quotable" in res.stderr
    # Without --strict the same report exits 0.
    assert run_cli(str(job)).returncode == 0
