"""Rules built from real tool output: every capture in tests/audit/captures/ (see its README).

Each capture is what a real tool printed against a loopback server failing one way. For each:
the family is recognised and the failing host named (when the tool printed it); in a
verifier's output with no test summary it makes the trial infra; in an agent's output, twice,
it makes the trial infra; and once the agent has written that host into its own config file,
the very same output excuses nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit.judge.network import failures_in, host_in
from audit.pipeline import build_report
from audit.read.layout import JobLayout
from tests.audit.audit_jobgen import PYTEST_FAIL, TrialSpec, write_job

CAPTURES = Path(__file__).with_name("captures")
INDEX = json.loads((CAPTURES / "index.json").read_text())
TOOLS = {"curl", "wget", "pip", "uv", "npm", "cargo", "apt", "git", "huggingface_hub"}
FAMILIES = {
    "http_502": {"http_5xx"},
    "http_503": {"http_5xx"},
    "http_429": {"http_429"},
    "connection_reset": {"reset"},
    "read_timeout": {"timeout", "reset"},  # apt words a read timeout "Connection failed"
    "tls_untrusted": {"tls"},
    "tls_eof": {"tls", "reset"},  # npm reports ECONNRESET before the TLS reason
    "dns": {"dns"},
    "proxy_502": {"proxy", "http_5xx"},  # curl -f and npm do not say it was the proxy
}
# pip hides an index's 5xx/429 at its default verbosity: it only says no version was found,
# exactly as for a package that does not exist. That cannot excuse a trial.
SILENT = {"http_502/pip.txt", "http_503/pip.txt", "http_429/pip.txt"}


def _expected_hosts(meta: dict, text: str) -> list[str]:
    return [h for h in meta["host"].split("|") if h in text]


def test_every_tool_and_family_was_captured():
    got = {(m["tool"], m["family"]) for m in INDEX.values()}
    assert {t for t, _ in got} == TOOLS
    assert {(t, f) for t in TOOLS for f in FAMILIES} <= got
    assert all((CAPTURES / rel).stat().st_size < 4096 for rel in INDEX), "keep captures small"


@pytest.mark.parametrize("rel", sorted(INDEX))
def test_family_and_host_are_read_from_the_capture(rel):
    meta, text = INDEX[rel], (CAPTURES / rel).read_text()
    found = failures_in(text, lambda n: f"{rel}:{n}", context_host=host_in(meta["command"]))
    if rel in SILENT:
        assert found == []
        return
    assert {f.family for f in found} & FAMILIES[meta["family"]], [f.line for f in found]
    hosts = _expected_hosts(meta, text)
    if hosts:
        assert {f.host for f in found} & set(hosts), [(f.host, f.line) for f in found]


def _verifier_trial(tmp_path: Path, rel: str):
    meta, text = INDEX[rel], (CAPTURES / rel).read_text()
    spec = TrialSpec("fix-git", reward=0.0, verifier_stdout=f"+ {meta['command']}\n{text}")
    job = write_job(tmp_path, "job", [spec], concurrency=1)
    return build_report(JobLayout.local(job)).trials[0]


def _agent_trial(tmp_path: Path, rel: str, own_config: bool = False):
    meta, text = INDEX[rel], (CAPTURES / rel).read_text()
    commands, outputs = [meta["command"] + "\n"] * 2, [text] * 2
    if own_config:
        hosts = _expected_hosts(meta, text)
        commands = [
            "cat > /root/.config/mirrors.conf << 'EOF'\n"
            + "".join(f"url = https://{h}/\n" for h in hosts)
            + "EOF\n",
            *commands,
        ]
        outputs = ["", *outputs]
    spec = TrialSpec(
        "fix-git", reward=0.0, commands=commands, observations=outputs, verifier_stdout=PYTEST_FAIL
    )
    job = write_job(tmp_path, "job", [spec], concurrency=1)
    return build_report(JobLayout.local(job)).trials[0]


@pytest.mark.parametrize("rel", sorted(set(INDEX) - SILENT))
def test_capture_in_the_verifier_output_is_infra_naming_the_host(tmp_path, rel):
    trial = _verifier_trial(tmp_path, rel)
    assert trial.category == "infra", (trial.signature, trial.evidence)
    assert trial.signature.startswith("verifier_")
    hosts = _expected_hosts(INDEX[rel], (CAPTURES / rel).read_text())
    if hosts:
        assert trial.endpoint in hosts
        assert any(h in " ".join(trial.evidence) + trial.explanation for h in hosts)


@pytest.mark.parametrize("rel", sorted(set(INDEX) - SILENT))
def test_capture_twice_in_the_agents_output_is_infra(tmp_path, rel):
    trial = _agent_trial(tmp_path, rel)
    assert (trial.category, trial.signature.split("_")[0]) == ("infra", "agent"), trial.evidence


@pytest.mark.parametrize(
    "rel",
    sorted(
        r
        for r in INDEX
        if r not in SILENT
        and "proxy" not in r
        and _expected_hosts(INDEX[r], (CAPTURES / r).read_text())
    ),
)
def test_the_same_capture_excuses_nothing_once_the_agent_configured_that_host(tmp_path, rel):
    trial = _agent_trial(tmp_path, rel, own_config=True)
    assert trial.category == "agent_error", (trial.signature, trial.evidence)


@pytest.mark.parametrize("rel", sorted(SILENT))
def test_pips_silent_5xx_is_not_excused(tmp_path, rel):
    assert _verifier_trial(tmp_path, rel).category == "agent_error"
