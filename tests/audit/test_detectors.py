"""The built-in detectors (audit/judge/detectors/), each proved on a trial as Harbor writes it.

The network snippets in CASES are the former rules.yaml cases; what changed and why:
- context overflow is the agent's failure (it let its prompt outgrow the served window), not
  infra, unless the job told the agent a larger limit than the server serves;
- network signatures name the failure FAMILY (`*_network_timeout`, `*_connection_reset`...),
  not the tool (`agent_curl_timeout`), because the same family reads the same from any tool;
- pip's `Could not find a version ... (from versions: none)` is no longer network evidence: the
  captures show pip prints exactly that for a 5xx index and for a package that does not exist;
- a model call that timed out is insufficient_evidence, not infra: a runaway generation past
  the client's own limit ends the same way, so the timeout proves no outside cause.
"""

from __future__ import annotations

import json

import pytest

from audit.pipeline import build_report
from audit.read.layout import JobLayout
from tests.audit.audit_jobgen import PYTEST_FAIL, PYTEST_PASS, TrialSpec, apt_502, write_job

VERIFIER_UV = (
    "+ curl -LsSf https://astral.mirror.example/uv/0.9.5/install.sh | sh\n"
    "downloading uv 0.9.5 x86_64-unknown-linux-gnu\n"
)
LITELLM_TB = (
    "Traceback (most recent call last):\n"
    '  File "/opt/harbor/lib/python3.13/site-packages/litellm/main.py", line 401, in acompletion\n'
    "    raise exception_type(\n"
)


def _spec(task: str, **kw) -> TrialSpec:
    return TrialSpec(task, **kw)


def _endpoint(etype: str, message: str) -> TrialSpec:
    return _spec(
        "fix-git",
        reward=None,
        exception_type=etype,
        exception_message=message,
        traceback=LITELLM_TB + f"litellm.exceptions.{etype}: {message}\n",
        durations=(4, 2, 60, None),
    )


# (spec, expected (category, signature), a string the evidence must contain)
CASES: dict[str, tuple[TrialSpec, tuple[str, str], str]] = {
    # --- model endpoint, by kind, as different servers word it -------------------------------
    "context_vllm": (
        _endpoint(
            "BadRequestError",
            "litellm.BadRequestError: OpenAIException - This model's "
            "maximum context length is 32768 tokens. However, you requested 35210 tokens "
            "in the messages.",
        ),
        ("agent_error", "model_context_overflow"),
        "maximum context length",
    ),
    "context_sglang": (
        _endpoint(
            "BadRequestError",
            "Error code: 400 - {'object': 'error', 'message': 'The "
            "input (40211 tokens) is longer than the model's context length (32768 "
            "tokens).'}",
        ),
        ("agent_error", "model_context_overflow"),
        "context length",
    ),
    "context_llamacpp": (
        _endpoint(
            "BadRequestError",
            "Error code: 400 - {'error': {'code': 400, 'message': "
            "'request (1484981 tokens) exceeds the available context size (131072 "
            "tokens), try increasing it', 'type': 'exceed_context_size_error'}}",
        ),
        ("agent_error", "model_context_overflow"),
        "exceeds the available context size",
    ),
    "context_tgi": (
        _endpoint(
            "UnprocessableEntityError",
            "Error code: 422 - {'error': 'Input validation "
            "error: `inputs` tokens + `max_new_tokens` must be <= 32768. Given: 31000 "
            "`inputs` tokens and 4096 `max_new_tokens`', 'error_type': 'validation'}",
        ),
        ("agent_error", "model_context_overflow"),
        "max_new_tokens",
    ),
    "endpoint_5xx": (
        _endpoint(
            "InternalServerError",
            "litellm.InternalServerError: OpenAIException - Error "
            "code: 503 - {'error': {'message': 'No available workers', 'code': 503}}",
        ),
        ("infra", "model_endpoint_server_error"),
        "503",
    ),
    "endpoint_429": (
        _endpoint(
            "RateLimitError",
            "litellm.RateLimitError: RateLimitError: OpenAIException - "
            "Error code: 429 - {'error': 'Too Many Requests'}",
        ),
        ("infra", "model_endpoint_rate_limit"),
        "429",
    ),
    "endpoint_402": (
        _endpoint(
            "APIError",
            "litellm.APIError: APIError: OpenAIException - Error code: 402 - "
            "{'error': {'message': 'Insufficient credits', 'code': 402}}",
        ),
        ("infra", "model_endpoint_quota"),
        "402",
    ),
    "endpoint_auth": (
        _endpoint(
            "AuthenticationError",
            "litellm.AuthenticationError: OpenAIException - Error "
            "code: 401 - {'error': {'message': 'Incorrect API key provided'}}",
        ),
        ("infra", "model_endpoint_auth"),
        "401",
    ),
    # A read timeout is no proof: a runaway generation past the client's limit ends the same
    # way (issue #20: excuse only with proof). A connection that never opened is.
    "endpoint_timeout": (
        _endpoint(
            "Timeout",
            "litellm.Timeout: APITimeoutError - Request timed out. error_str: Request timed out.",
        ),
        ("insufficient_evidence", "model_call_timed_out"),
        "timed out",
    ),
    "endpoint_connect_timeout": (
        _endpoint(
            "APIConnectionError",
            "litellm.APIConnectionError: OpenAIException - httpx.ConnectTimeout: timed out",
        ),
        ("infra", "model_endpoint_unreachable"),
        "ConnectTimeout",
    ),
    "endpoint_not_json": (
        _endpoint(
            "APIError",
            "litellm.APIError: APIError: OpenAIException - Expecting value: "
            "line 1 column 1 (char 0)",
        ),
        ("infra", "model_endpoint_not_json"),
        "Expecting value",
    ),
    "endpoint_unreachable": (
        _endpoint(
            "APIConnectionError",
            "litellm.APIConnectionError: APIConnectionError: "
            "OpenAIException - [Errno 111] Connection refused",
        ),
        ("infra", "model_endpoint_unreachable"),
        "Connection refused",
    ),
    "endpoint_unparseable_output": (
        _endpoint(
            "InternalServerError",
            "Error code: 500 - {'error': {'code': 500, 'message': "
            "'Failed to parse input at pos 56: <|tool_call>call:bash{'}}",
        ),
        ("agent_error", "model_output_unparseable"),
        "Failed to parse input",
    ),
    "endpoint_rejects_harness_request": (
        _endpoint(
            "BadRequestError",
            "Error code: 400 - {'error': {'code': 400, 'message': "
            "'Assistant response prefill is incompatible with enable_thinking.'}}",
        ),
        ("agent_error", "agent_request_rejected"),
        "prefill",
    ),
    # --- the agent's own code ----------------------------------------------------------------
    "harness_crash": (
        _spec(
            "fix-git",
            reward=None,
            exception_type="JSONDecodeError",
            exception_message="Unterminated string starting at: line 1 column 47 (char 46)",
            traceback=(
                "Traceback (most recent call last):\n"
                '  File "/opt/harbor/lib/python3.13/site-packages/harbor/trial/trial.py", '
                "line 547, in run\n"
                '  File "/home/u/my-agent/harness/loop.py", line 152, in run_agent\n'
                "    args = json.loads(tc.function.arguments)\n"
                '  File "/usr/lib/python3.13/json/decoder.py", line 361, in raw_decode\n'
                "json.decoder.JSONDecodeError: Unterminated string starting at: line 1\n"
            ),
            durations=(4, 2, 60, None),
        ),
        ("agent_error", "agent_harness_crash"),
        "harness/loop.py",
    ),
    # --- verifier network (tests never ran) ----------------------------------------------------
    "verifier_proxy": (
        _spec(
            "prove-plus-comm",
            reward=0.0,
            verifier_stdout="+ apt-get update\n" + apt_502("coq") + "uvx: command not found\n",
        ),
        ("infra", "verifier_proxy_5xx"),
        "502",
    ),
    "verifier_tls": (
        _spec(
            "fix-git",
            reward=0.0,
            verifier_stdout=VERIFIER_UV
            + "curl: (35) OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to "
            "release-assets.code.example:443\n/tests/test.sh: line 11: uvx: command not found\n",
        ),
        ("infra", "verifier_tls_failure"),
        "SSL_ERROR_SYSCALL",
    ),
    "verifier_dns": (
        _spec(
            "fix-git",
            reward=0.0,
            verifier_stdout="+ curl -LsSf https://astral.mirror.example/uv/install.sh | sh\n"
            "curl: (6) Could not resolve host: astral.mirror.example\n"
            "/tests/test.sh: line 11: uv: command not found\n",
        ),
        ("infra", "verifier_dns_failure"),
        "astral.mirror.example",
    ),
    "verifier_timeout_download": (
        _spec(
            "fix-git",
            reward=0.0,
            verifier_stdout="+ curl -LsSf https://astral.mirror.example/uv/install.sh | sh\n"
            "curl: (28) Failed to connect to astral.mirror.example port 443 after 130104 ms: "
            "Couldn't connect to server\n/tests/test.sh: line 11: uv: command not found\n",
        ),
        ("infra", "verifier_network_timeout"),
        "curl: (28)",
    ),
    "verifier_apt_connection_failed": (
        _spec(
            "fix-git",
            reward=0.0,
            verifier_stdout="+ apt-get install -y python3-pytest\n"
            "Err:1 http://deb.mirror.example/debian bookworm/main amd64 python3-pytest all\n"
            "  Connection failed [IP: 10.0.0.5 80]\n"
            "E: Failed to fetch http://deb.mirror.example/debian/pool/main/p/pytest/"
            "python3-pytest_7.2.1-2_all.deb  Connection failed [IP: 10.0.0.5 80]\n",
        ),
        ("infra", "verifier_connection_reset"),
        "deb.mirror.example",
    ),
    "verifier_uv_fetch": (
        _spec(
            "fix-git",
            reward=0.0,
            verifier_stdout=VERIFIER_UV
            + "error: Failed to fetch: `https://pypi.mirror.example/simple/pytest/`\n"
            "  Caused by: Request failed after 3 retries\n",
        ),
        ("infra", "verifier_download_failed"),
        "pypi.mirror.example",
    ),
    # --- agent network (repeated, outside endpoints) -------------------------------------------
    "agent_proxy": (
        _spec(
            "make-doom-for-mips",
            reward=0.0,
            exception_type="AgentTimeoutError",
            exception_message="Agent execution timed out after 5400.0 seconds",
            commands=["apt-get install -y gcc-mipsel-linux-gnu\n", "pip download pycparser\n"],
            observations=[
                apt_502("gcc-mipsel-linux-gnu"),
                "WARNING: Retrying after connection broken by 'ProxyError('Unable to "
                "connect to proxy', OSError('Tunnel connection failed: 502 Bad "
                "Gateway'))'\n",
            ],
            verifier_stdout=PYTEST_FAIL,
        ),
        ("infra", "agent_proxy_5xx"),
        "502",
    ),
    "agent_dns_apt": (
        _spec(
            "fix-git",
            reward=0.0,
            commands=["apt-get install -y git-lfs\n", "apt-get install -y git-lfs\n"],
            observations=[
                "Err:1 http://deb.mirror.example/debian bookworm/main amd64 git-lfs amd64\n"
                "  Temporary failure resolving 'deb.mirror.example'\n",
                "E: Failed to fetch http://deb.mirror.example/debian/pool/main/g/git-lfs/"
                "git-lfs_3.3.0-1_amd64.deb  Temporary failure resolving 'deb.mirror.example'\n",
            ],
            verifier_stdout=PYTEST_FAIL,
        ),
        ("infra", "agent_dns_failure"),
        "deb.mirror.example",
    ),
    "agent_tls": (
        _spec(
            "dna-assembly",
            reward=0.0,
            exception_type="AgentTimeoutError",
            exception_message="Agent execution timed out after 10800.0 seconds",
            commands=["pip install primer3-py\n", "python3 fetch.py\n"],
            observations=[
                "Could not fetch URL https://pypi.mirror.example/simple/primer3-py/: There "
                "was a problem confirming the ssl certificate: [SSL: CERTIFICATE_VERIFY_FAILED]"
                " certificate verify failed (_ssl.c:1006)\n",
                "ssl.SSLEOFError: [SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred in "
                "violation of protocol (_ssl.c:1006)\n",
            ],
            verifier_stdout=PYTEST_FAIL,
        ),
        ("infra", "agent_tls_failure"),
        "CERTIFICATE_VERIFY_FAILED",
    ),
    "agent_dns_git_curl": (
        _spec(
            "fix-git",
            reward=0.0,
            commands=[
                "git clone https://git.mirror.example/repo.git\n",
                "curl -O https://x.example/a\n",
            ],
            observations=[
                "fatal: unable to access 'https://git.mirror.example/repo.git/': "
                "Could not resolve host: git.mirror.example\n",
                "curl: (6) Could not resolve host: x.example\n",
            ],
            verifier_stdout=PYTEST_FAIL,
        ),
        ("infra", "agent_dns_failure"),
        "git.mirror.example",
    ),
    "agent_timeout_downloads": (
        _spec(
            "build-pov-ray",
            reward=0.0,
            commands=["curl -m 30 -O https://web.archive.example/povray.tgz\n"] * 2,
            observations=[
                "curl: (28) Operation timed out after 30001 milliseconds with 0 bytes received\n"
            ]
            * 2,
            verifier_stdout=PYTEST_FAIL,
        ),
        ("infra", "agent_network_timeout"),
        "web.archive.example",
    ),
    # --- not excused ---------------------------------------------------------------------------
    "pip_not_found_alone_is_no_network_evidence": (
        _spec(
            "fix-git",
            reward=0.0,
            commands=["pip install numpy==2.1.0\n", "uv pip install numpy==2.1.0\n"],
            observations=[
                "ERROR: Could not find a version that satisfies the requirement "
                "numpy==2.1.0 (from versions: none)\n",
                "error: Failed to fetch: `https://pypi.mirror.example/simple/numpy/`\n",
            ],
            verifier_stdout=PYTEST_FAIL,
        ),
        ("agent_error", "graded_fail"),
        "",
    ),
    "agents_own_nginx_502": (
        _spec(
            "install-windows-3.11",
            reward=0.0,
            commands=[
                "nginx -s reload\n",
                "curl -s http://localhost/ | head\n",
                "curl -s http://localhost/vnc.html | head\n",
            ],
            observations=[
                "",
                "<html><head><title>502 Bad Gateway</title></head>\n",
                "<html><head><title>502 Bad Gateway</title></head>\n",
            ],
            verifier_stdout=PYTEST_FAIL,
        ),
        ("agent_error", "graded_fail"),
        "",
    ),
    "host_the_agent_wrote_into_its_config": (
        _spec(
            "fix-git",
            reward=0.0,
            commands=[
                "cat > /etc/pip.conf << 'EOF'\n[global]\nindex-url = "
                "https://my-mirror.example/simple\nEOF\n",
                "pip install flask\n",
                "pip install flask\n",
            ],
            observations=[
                "",
                "curl: (6) Could not resolve host: my-mirror.example\n",
                "curl: (6) Could not resolve host: my-mirror.example\n",
            ],
            verifier_stdout=PYTEST_FAIL,
        ),
        ("agent_error", "graded_fail"),
        "",
    ),
    "same_host_succeeded_afterwards": (
        _spec(
            "fix-git",
            reward=0.0,
            commands=["apt-get update\n", "apt-get update\n", "apt-get update\n"],
            observations=[
                "Err:1 http://deb.mirror.example/debian bookworm InRelease\n"
                "  Temporary failure resolving 'deb.mirror.example'\n",
                "Err:1 http://deb.mirror.example/debian bookworm InRelease\n"
                "  Temporary failure resolving 'deb.mirror.example'\n",
                "Get:1 http://deb.mirror.example/debian bookworm InRelease [151 kB]\n"
                "Fetched 8906 kB in 2s (4453 kB/s)\n",
            ],
            verifier_stdout=PYTEST_FAIL,
        ),
        ("agent_error", "graded_fail"),
        "",
    ),
    "verifier_refused_by_the_agents_own_service": (
        _spec(
            "mailman",
            reward=0.0,
            verifier_stdout="E   ConnectionRefusedError: [Errno 111] "
            "Connection refused\nsmtplib connect to localhost:25 failed\n",
        ),
        ("agent_error", "graded_fail"),
        "",
    ),
    "verifier_network_after_an_agent_timeout_is_still_a_timeout": (
        _spec(
            "feal-differential-cryptanalysis",
            reward=0.0,
            exception_type="AgentTimeoutError",
            exception_message="Agent execution timed out after 1800.0 seconds",
            verifier_stdout="curl: (35) OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to"
            " code.example:443\n/tests/test.sh: line 19: uvx: command not found\n",
        ),
        ("agent_timeout", "agent_timeout"),
        "",
    ),
    "a_service_of_the_tasks_own_network_is_no_outside_endpoint": (
        _spec(
            "fix-git",
            reward=0.0,
            commands=["psql -h db -U app -c 'select 1'\n", "curl -s http://db:8080/health\n"],
            observations=[
                "curl: (7) Failed to connect to db port 5432 after 3 ms: Couldn't connect\n",
                "curl: (7) Failed to connect to db port 8080 after 2 ms: Couldn't connect\n",
            ],
            verifier_stdout=PYTEST_FAIL,
        ),
        ("agent_error", "graded_fail"),
        "",
    ),
    # The verifier runs in the container the agent left: what the agent rewired is its own.
    "verifier_dns_after_the_agent_rewrote_resolv_conf": (
        _spec(
            "fix-git",
            reward=0.0,
            commands=["echo 'nameserver 10.255.0.1' > /etc/resolv.conf\n"],
            observations=[""],
            verifier_stdout="+ curl -LsSf https://astral.mirror.example/uv/install.sh | sh\n"
            "curl: (6) Could not resolve host: astral.mirror.example\n"
            "/tests/test.sh: line 11: uv: command not found\n",
        ),
        ("agent_error", "graded_fail"),
        "",
    ),
    "verifier_against_the_agents_own_mirror": (
        _spec(
            "fix-git",
            reward=0.0,
            commands=[
                "cat > /etc/pip.conf << 'EOF'\n[global]\nindex-url = "
                "https://my-mirror.example/simple\nEOF\n"
            ],
            observations=[""],
            verifier_stdout="+ pip install pytest\n"
            "ERROR: Could not fetch URL https://my-mirror.example/simple/pytest/: There was a "
            "problem confirming the ssl certificate\n",
        ),
        ("agent_error", "graded_fail"),
        "",
    ),
    # --- other tools' wording of the same failure families ----------------------------------
    "jvm_dns": (
        _spec(
            "fix-git",
            reward=0.0,
            commands=["mvn -q package\n", "mvn -q package\n"],
            observations=[
                "[ERROR] Could not transfer artifact org.x:y:pom:1.0 from/to central "
                "(https://repo.maven.example/maven2): java.net.UnknownHostException: "
                "repo.maven.example\n"
            ]
            * 2,
            verifier_stdout=PYTEST_FAIL,
        ),
        ("infra", "agent_dns_failure"),
        "repo.maven.example",
    ),
    "go_io_timeout": (
        _spec(
            "fix-git",
            reward=0.0,
            commands=["go mod download\n", "go mod download\n"],
            observations=[
                "go: github.example/x/y@v1.2.0: Get \"https://proxy.golang.example/github.example/"
                "x/y/@v/v1.2.0.mod\": dial tcp 10.9.8.7:443: i/o timeout\n"
            ]
            * 2,
            verifier_stdout=PYTEST_FAIL,
        ),
        ("infra", "agent_network_timeout"),
        "proxy.golang.example",
    ),
    "node_socket_hang_up": (
        _spec(
            "fix-git",
            reward=0.0,
            commands=["npx -y create-thing app\n", "npx -y create-thing app\n"],
            observations=[
                "npm error network request to https://registry.npm.example/create-thing failed, "
                "reason: socket hang up\n"
            ]
            * 2,
            verifier_stdout=PYTEST_FAIL,
        ),
        ("infra", "agent_connection_reset"),
        "registry.npm.example",
    ),
    # --- the environment -----------------------------------------------------------------------
    "disk_full": (
        _spec(
            "fix-git",
            reward=0.0,
            verifier_stdout="+ uv pip install pytest\n"
            "error: failed to write to file `/root/.cache/uv/x`: No space left on device "
            "(os error 28)\n",
        ),
        ("infra", "disk_full"),
        "No space left on device",
    ),
    "oom_in_trial_log": (
        _spec(
            "caffe-cifar-10",
            reward=None,
            exception_type="RuntimeError",
            exception_message="Container main exited unexpectedly (137)",
            trial_log=["kernel: Memory cgroup out of memory: Killed process 4242 (python3)"],
        ),
        ("infra", "out_of_memory"),
        "out of memory",
    ),
    "emulation": (
        _spec(
            "qemu-startup",
            reward=0.0,
            commands=["qemu-system-x86_64 -nographic &\n"],
            observations=["rosetta error: Unimplemented syscall number 282\n"],
            verifier_stdout=PYTEST_FAIL,
        ),
        ("infra", "emulation_unsupported"),
        "rosetta error",
    ),
    "exec_hang_outside_the_agent": (
        _spec(
            "fix-git",
            reward=None,
            exception_type="RuntimeError",
            exception_message="Command timed out after 120 seconds",
            traceback='Traceback (most recent call last):\n  File "/opt/harbor/lib/python3.13/'
            'site-packages/harbor/verifier/verifier.py", line 88, in verify\n'
            "RuntimeError: Command timed out after 120 seconds\n",
        ),
        ("infra", "container_exec_hung"),
        "Command timed out after 120 seconds",
    ),
    "trivial_command_never_returned": (
        _spec(
            "fix-git",
            reward=0.0,
            exception_type="AgentTimeoutError",
            exception_message="Agent execution timed out after 900.0 seconds",
            commands=["make -j4\n", "ls /app\n"],
            # make finished: its output ends on the shell's prompt.
            observations=["done\nroot@c0ffee:/app# \n", ""],
            verifier_stdout=PYTEST_FAIL,
        ),
        ("infra", "container_exec_hung"),
        "ls /app",
    ),
}


def _trial(tmp_path, spec: TrialSpec, finished: str | None = "2026-08-31T07:08:03.000000"):
    job = write_job(tmp_path, "job", [spec], concurrency=1, finished_local=finished)
    report = build_report(JobLayout.local(job))
    (trial,) = report.trials
    return trial


@pytest.mark.parametrize("case", sorted(CASES))
def test_detector(tmp_path, case):
    spec, expected, quoted = CASES[case]
    trial = _trial(tmp_path, spec)
    assert (trial.category, trial.signature) == expected, trial.evidence
    if quoted:
        assert any(quoted in line for line in trial.evidence), trial.evidence
        # The decisive line is quoted once, with the file it is in.
        assert all(":" in line.split(" ", 1)[0] or " step " in line for line in trial.evidence)


def test_network_evidence_names_the_endpoint_and_never_an_absent_proxy(tmp_path):
    trial = _trial(tmp_path, CASES["verifier_dns"][0])
    assert trial.endpoint == "astral.mirror.example"
    assert "proxy" not in trial.explanation.lower()
    proxied = _trial(tmp_path / "p", CASES["verifier_proxy"][0])
    assert "proxy at 172.18.0.1:27891" in proxied.explanation
    assert proxied.endpoint == "deb.mirror.example"


def test_configured_context_larger_than_served_is_a_stack_misconfiguration(tmp_path):
    spec = CASES["context_vllm"][0]
    job = write_job(tmp_path, "job", [spec], concurrency=1)
    config = json.loads((job / "config.json").read_text())
    config["agents"][0]["kwargs"] = {"model_info": {"max_input_tokens": 131072}}
    (job / "config.json").write_text(json.dumps(config))
    (trial,) = build_report(JobLayout.local(job)).trials
    assert (trial.category, trial.signature) == ("infra", "model_context_misconfigured")
    assert "131072" in trial.explanation and "32768" in trial.explanation


# --- other agents: what they leave in agent/ -------------------------------------------------
def _installed_agent_trial(tmp_path, rc: str, verifier: str, reward: float | None):
    spec = _spec(
        "path-tracing",
        reward=reward,
        commands=[],
        observations=[],
        exception_type=None if reward is not None else "RewardFileNotFoundError",
        exception_message="No reward file found at /x/verifier/reward.txt",
        verifier_stdout=verifier,
    )
    job = write_job(tmp_path, "job", [spec], concurrency=1)
    (trial_dir,) = [p for p in job.iterdir() if p.is_dir()]
    (trial_dir / "agent" / "trajectory.json").unlink()
    for n, (cmd, code) in enumerate([("node setup.js", "0"), ("my-agent run --task x", rc)]):
        d = trial_dir / "agent" / f"command-{n}"
        d.mkdir(parents=True)
        (d / "command.txt").write_text(cmd + "\n")
        (d / "return-code.txt").write_text(code)
    return build_report(JobLayout.local(job)).trials[0]


def test_a_killed_container_under_an_installed_agent_is_infra(tmp_path):
    trial = _installed_agent_trial(tmp_path, "137", "", None)
    assert (trial.category, trial.signature) == ("infra", "container_killed")
    assert any("agent/command-1/return-code.txt: 137" in e for e in trial.evidence)


def test_a_137_with_a_graded_verifier_is_the_agents(tmp_path):
    trial = _installed_agent_trial(tmp_path / "g", "137", PYTEST_FAIL, 0.0)
    assert trial.category == "agent_error"


def test_command_stdout_of_an_installed_agent_is_agent_evidence(tmp_path):
    spec = _spec("fix-git", reward=0.0, commands=[], observations=[], verifier_stdout=PYTEST_FAIL)
    job = write_job(tmp_path, "job", [spec], concurrency=1)
    (trial_dir,) = [p for p in job.iterdir() if p.is_dir()]
    (trial_dir / "agent" / "trajectory.json").unlink()
    (trial_dir / "agent" / "recording.cast").unlink(missing_ok=True)
    for n in range(2):
        d = trial_dir / "agent" / f"command-{n}"
        d.mkdir(parents=True)
        (d / "command.txt").write_text("npm install --registry https://npm.mirror.example/ x\n")
        (d / "stdout.txt").write_text(
            "npm error code E503\nnpm error 503 Service Unavailable - GET "
            "https://npm.mirror.example/x\n"
        )
    (trial,) = build_report(JobLayout.local(job)).trials
    assert (trial.category, trial.signature) == ("infra", "agent_http_5xx")
    assert trial.endpoint == "npm.mirror.example"
    assert any("agent/command-0/stdout.txt" in e for e in trial.evidence)


def test_a_reply_cut_off_by_the_server_is_infra(tmp_path):
    spec = _spec("db-wal-recovery", reward=0.0, verifier_stdout=PYTEST_FAIL)
    job = write_job(tmp_path, "job", [spec], concurrency=1)
    (trial_dir,) = [p for p in job.iterdir() if p.is_dir()]
    steps = [
        {"step_id": 1, "source": "user", "message": "task"},
        {
            "step_id": 2,
            "source": "agent",
            "model_name": "m",
            "message": "Let me look.",
            "tool_calls": [{"function_name": "exec", "arguments": {"command": "ls"}}],
            "metrics": {"prompt_tokens": 900, "completion_tokens": 40},
        },
        {"step_id": 3, "source": "agent", "observation": {"results": [{"content": "a.db"}]}},
        {
            "step_id": 4,
            "source": "agent",
            "model_name": "m",
            "message": "Let me reconstruct it from the hex dump:",
            "metrics": {"prompt_tokens": 0, "completion_tokens": 196},
        },
    ]
    (trial_dir / "agent" / "trajectory.json").write_text(json.dumps({"steps": steps}))
    (trial,) = build_report(JobLayout.local(job)).trials
    assert (trial.category, trial.signature) == ("infra", "model_reply_cut_off")
    steps[-1]["metrics"]["prompt_tokens"] = 1200  # a real, complete reply: the agent's stop
    (trial_dir / "agent" / "trajectory.json").write_text(json.dumps({"steps": steps}))
    (trial,) = build_report(JobLayout.local(job)).trials
    assert trial.category == "agent_error"
    # No uncached prompt tokens, but the prompt was read from the cache: it was counted.
    steps[-1]["metrics"] = {"prompt_tokens": 0, "completion_tokens": 196, "cached_tokens": 1100}
    (trial_dir / "agent" / "trajectory.json").write_text(json.dumps({"steps": steps}))
    (trial,) = build_report(JobLayout.local(job)).trials
    assert trial.category == "agent_error"


# --- trials without result.json ----------------------------------------------------------------
def test_no_result_json_in_a_job_that_never_finished_is_cancelled_and_rerun(tmp_path):
    spec = _spec("fix-git", reward=None, write_result=False, verifier_stdout=None)
    job = write_job(
        tmp_path, "job", [spec, _spec("cancel-async-tasks")], concurrency=2, finished_local=None
    )
    report = build_report(JobLayout.local(job))
    row = next(t for t in report.trials if t.task == "fix-git")
    assert (row.category, row.signature) == ("cancelled", "interrupted_no_result")
    assert "fix-git" in report.rerun
    assert report.categories["cancelled"] == 1


def test_no_result_json_in_a_finished_job_is_judged_from_what_it_left(tmp_path):
    spec = _spec("password-recovery", reward=0.0, write_result=False, verifier_stdout=PYTEST_FAIL)
    trial = _trial(tmp_path, spec)
    assert (trial.category, trial.reward) == ("agent_error", 0.0)
    assert any(
        "result.json is missing; judged from verifier/reward.txt" in p for p in trial.problems
    )


def test_no_result_json_with_an_exception_txt_is_judged_from_it(tmp_path):
    spec = _spec(
        "fix-git",
        reward=None,
        write_result=False,
        verifier_stdout=None,
        exception_type="BadRequestError",
        exception_message="Error code: 400 - {'error': {'message': 'request (200000 "
        "tokens) exceeds the available context size (131072 tokens)'}}",
    )
    job = write_job(tmp_path, "job", [spec], concurrency=1)
    (trial_dir,) = [p for p in job.iterdir() if p.is_dir()]
    (trial_dir / "verifier" / "reward.txt").unlink(missing_ok=True)
    (trial_dir / "exception.txt").write_text(
        LITELLM_TB + "openai.BadRequestError: Error code: 400 - {'error': {'message': 'request "
        "(200000 tokens) exceeds the available context size (131072 tokens)'}}\n"
    )
    (trial,) = build_report(JobLayout.local(job)).trials
    assert (trial.category, trial.signature) == ("agent_error", "model_context_overflow")
    assert trial.evidence[0].startswith("exception.txt: BadRequestError")


def test_pass_with_network_noise_stays_a_pass(tmp_path):
    trial = _trial(
        tmp_path, _spec("fix-git", reward=1.0, verifier_stdout=apt_502("tree") + PYTEST_PASS)
    )
    assert (trial.category, trial.evidence) == ("passed", [])


def _setup_timeout_trial(tmp_path, setup_stdout: str):
    spec = _spec(
        "fix-git",
        reward=None,
        exception_type="AgentSetupTimeoutError",
        exception_message="Agent setup timed out after 360.0 seconds",
        commands=[],
        observations=[],
        durations=(4, 360, 0, None),
    )
    job = write_job(tmp_path, "job", [spec], concurrency=1)
    (trial_dir,) = [p for p in job.iterdir() if p.is_dir()]
    (trial_dir / "agent" / "setup").mkdir(parents=True)
    (trial_dir / "agent" / "setup" / "stdout.txt").write_text(setup_stdout)
    return build_report(JobLayout.local(job)).trials[0]


def test_an_installed_agents_own_setup_is_not_blamed_on_the_tool_bundle(tmp_path):
    # Issue #34: a setup that failed with no outside cause shown is insufficient, not infra.
    trial = _setup_timeout_trial(tmp_path, "added 312 packages in 41s\nstarting gateway...\n")
    assert (trial.category, trial.signature) == (
        "insufficient_evidence", "unproven_agent_setup_failed")
    assert "tool bundle" not in trial.explanation.lower()
    assert "agent/setup/stdout.txt" in trial.evidence[-1]


def test_an_agent_setup_that_failed_to_download_names_the_endpoint(tmp_path):
    trial = _setup_timeout_trial(
        tmp_path,
        "npm error code E503\nnpm error 503 Service Unavailable - GET "
        "https://npm.mirror.example/openclaw\n",
    )
    assert (trial.category, trial.signature) == ("infra", "agent_setup_http_5xx")
    assert trial.endpoint == "npm.mirror.example"


def test_terminus_setup_timeout_points_at_the_tool_bundle(tmp_path):
    spec = _spec(
        "fix-git",
        reward=None,
        exception_type="AgentSetupTimeoutError",
        exception_message="Agent setup timed out after 360.0 seconds",
        commands=[],
        observations=[],
        durations=(4, 360, 0, None),
    )
    trial = _trial(tmp_path, spec)
    assert (trial.category, trial.signature) == ("infra", "tool_install_timeout")
    assert "tool bundle" in trial.explanation


def test_an_agent_timeout_during_a_model_call_is_not_an_endpoint_failure(tmp_path):
    spec = _spec(
        "fix-git",
        reward=None,
        exception_type="AgentTimeoutError",
        exception_message="Agent execution timed out after 900.0 seconds",
        traceback=LITELLM_TB + "httpx.ReadTimeout: timed out\n"
        "harbor.trial.errors.AgentTimeoutError: Agent execution timed out after 900.0 seconds\n",
    )
    trial = _trial(tmp_path, spec)
    assert trial.category == "agent_timeout"


def test_a_lost_tmux_pane_with_the_oom_killer_on_screen_is_infra(tmp_path):
    spec = _spec(
        "caffe-cifar-10",
        reward=None,
        exception_type="RuntimeError",
        exception_message='hb__x: failed to send blocking keys: stderr="can\'t find session"',
        commands=["make all -j8\n"],
        observations=["Killed\n[ 4242.1] Out of memory: Killed process 812 (cc1plus)\n"],
    )
    trial = _trial(tmp_path, spec)
    assert (trial.category, trial.signature) == ("infra", "out_of_memory")


def test_harbor_026_fields_and_both_denominators(tmp_path):
    """0.26 counts only trials with a valid reward; 0.21 counts every trial (no reward = 0)."""
    specs = [
        _spec("fix-git"),
        _spec("regex-log", reward=0.0, verifier_stdout=PYTEST_FAIL),
        _spec("cancel-async-tasks", reward=1.0),
        _spec("mailman", reward=None, exception_type="RewardFileNotFoundError"),
    ]
    job = write_job(tmp_path, "job", specs, concurrency=4)
    for result in job.glob("cancel-async-tasks__*/result.json"):
        data = json.loads(result.read_text())
        data.update(schema_version="1.1", reward_valid=False)
        result.write_text(json.dumps(data))
    for result in job.glob("mailman__*/result.json"):
        data = json.loads(result.read_text())
        data["exception_info"]["policy"] = "fail"
        result.write_text(json.dumps(data))
    job_result = json.loads((job / "result.json").read_text())
    job_result["schema_version"] = "2"
    (job / "result.json").write_text(json.dumps(job_result))
    report = build_report(JobLayout.local(job))
    h21, h26 = report.score("harbor-0.21"), report.score("harbor-0.26")
    assert (h21.passed, h21.counted) == (2, 4)
    assert (h26.passed, h26.counted) == (1, 2)  # invalid and missing drop
    assert report.job.reported_convention == "harbor-0.26"
    rows = {t.task: t for t in report.trials}
    assert rows["cancel-async-tasks"].reward_valid is False
    assert rows["mailman"].exception_policy == "fail"


def test_a_trial_that_never_ran_is_cancelled_and_rerun(tmp_path):
    """What Harbor 0.21 saves for a trial a SIGTERM cancels in its environment setup (seen in
    this repo's e2e run): a result.json with no exception, no agent run, no verifier. Its own
    log says nothing; the shape of the result does."""
    spec = _spec("fix-git", reward=None, verifier_stdout=None, durations=(4, 2, 60, None))
    job = write_job(tmp_path, "job", [spec, _spec("cancel-async-tasks")], concurrency=2)
    (trial_dir,) = [p for p in job.iterdir() if p.is_dir() and p.name.startswith("fix-git")]
    result = json.loads((trial_dir / "result.json").read_text())
    result.update(agent_result=None, agent_setup=None, agent_execution=None, verifier=None)
    (trial_dir / "result.json").write_text(json.dumps(result))
    (trial_dir / "trial.log").write_text("")
    report = build_report(JobLayout.local(job))
    row = next(t for t in report.trials if t.task == "fix-git")
    assert row.category == "cancelled" and "fix-git" in report.rerun
    # A trial that ran its agent and lost only its reward is not excused that way.
    result.update(agent_execution={"started_at": result["started_at"],
                                   "finished_at": result["finished_at"]})
    (trial_dir / "result.json").write_text(json.dumps(result))
    row = next(t for t in build_report(JobLayout.local(job)).trials if t.task == "fix-git")
    assert row.category != "cancelled"
