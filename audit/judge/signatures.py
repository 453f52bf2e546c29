"""Every signature the audit can give a trial, in one registry: its category and one line of
meaning. Reports show the meaning beside each signature; rules.yaml may only use a signature
registered here with the same category; audit/RULES.md lists this table (a test checks both).

A family (a name ending in `*`) stands for names built from a part that varies: the exception's
type (`graded_fail_<type>`), the suspected signature an unproven excuse keeps
(`unproven_<signature>`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Signature:
    name: str
    category: str
    meaning: str

    @property
    def family(self) -> bool:
        return self.name.endswith("*")


_ENTRIES: list[tuple[str, str, str]] = [
    # --- how the run ended, read from Harbor's own fields -------------------------------------
    ("cancelled", "cancelled", "Harbor recorded a CancelledError/KeyboardInterrupt: the job was "
     "interrupted while the trial ran"),
    ("interrupted_no_result", "cancelled", "no result.json, and the job's own files show it was "
     "stopped while the trial ran"),
    ("interrupted_writing_result", "cancelled", "result.json cut off while the job's own files "
     "show it was stopped: killed while Harbor wrote the result"),
    ("install_only_not_attempted", "insufficient_evidence", "the trial's config set "
     "install_only: Harbor installed the agent and stopped, as asked; nothing was attempted"),
    ("no_result_json", "insufficient_evidence", "no result.json and nothing else that says how "
     "the trial ended"),
    ("corrupt_result_json", "insufficient_evidence", "result.json is damaged and nothing else "
     "says how the trial ended"),
    ("agent_timeout_graded", "agent_timeout", "the agent hit its timeout but the verifier still "
     "passed the task: the reward stands"),
    ("agent_timeout", "agent_timeout", "the agent ran out of time; its graded reward stands"),
    ("graded_fail", "agent_error", "the verifier graded the model's work below 1 and no outside "
     "cause was found (the model was reached, or nothing says otherwise)"),
    ("graded_fail_*", "agent_error", "as graded_fail, with the named exception recorded beside "
     "the grade"),
    ("unexplained_*", "insufficient_evidence", "the named exception ended the trial without a "
     "reward and nothing explains it"),
    ("ungraded", "insufficient_evidence", "neither a reward nor an exception"),
    ("undecided_*", "insufficient_evidence", "the named exception cut the agent's run before a "
     "graded 0 and only Harbor's record was kept: it says the run ended, not why"),
    ("unproven_*", "insufficient_evidence", "looked like an outside cause (the named signature) "
     "but no line of the trial's files proves it"),
    # --- the model reached or not, and runs that ask no model ---------------------------------
    ("model_never_reached", "infra", "every model call failed for an outside reason (the "
     "endpoint's words quoted): the model never answered, so the grade is not its"),
    ("model_never_reached_unexplained", "insufficient_evidence", "the model was never reached "
     "and nothing shows why: no grade can be the model's"),
    ("model_address_invalid", "infra", "the model client could not build a request from the "
     "address it was given (the operator's launch configuration): no model was asked"),
    ("nop_no_attempt", "agent_error", "Harbor's nop agent does nothing by design: a 0 shows the "
     "verifier does not pass the untouched task; no model was asked"),
    ("oracle_solution_failed", "insufficient_evidence", "the oracle's reference solution did not "
     "pass: the task, its image or its verifier is broken, no model was asked"),
    # --- the model endpoint -------------------------------------------------------------------
    ("model_endpoint_quota", "infra", "the endpoint refused for quota, credits or billing (402)"),
    ("model_endpoint_auth", "infra", "the endpoint rejected the credentials (401/403)"),
    ("model_endpoint_rate_limit", "infra", "the endpoint rate-limited the agent (429) until its "
     "retries ran out"),
    ("model_endpoint_not_json", "infra", "the endpoint answered with a body that is not JSON"),
    ("model_endpoint_stream_failed", "infra", "the endpoint ended its stream with its protocol's "
     "failure event (`response.failed`, an `error` event) before any turn completed or any file "
     "was written"),
    ("model_endpoint_malformed_reply", "infra", "the endpoint's reply did not follow the API's "
     "schema"),
    ("model_endpoint_no_usage", "infra", "the endpoint answered without `usage` and the harness "
     "crashed reading it"),
    ("model_endpoint_no_choices", "infra", "the endpoint answered without `choices` and the "
     "harness crashed reading it"),
    ("model_endpoint_unreachable", "infra", "the agent could not connect to the endpoint"),
    ("model_endpoint_server_error", "infra", "the endpoint was unavailable (502, 503, 504, 529 or "
     "a provider's status body)"),
    ("model_endpoint_unanswered", "infra", "the endpoint sent nothing, not even the response's "
     "headers, before the client's timeout"),
    ("model_endpoint_refusing_from_a_moment", "infra", "a 4xx the endpoint began answering at "
     "one moment across trials, to requests of a kind it had answered before"),
    ("model_endpoint_internal_error_repeated", "infra", "a 500 on this request and on other "
     "trials' requests within minutes: an outage"),
    ("model_endpoint_internal_error", "infra", "a 500 from the serving plane, which is outside "
     "the system under test"),
    ("model_endpoint_rejected_content", "insufficient_evidence", "a 5xx saying the server could "
     "not parse its input, without naming the model's generation"),
    ("model_call_timed_out", "insufficient_evidence", "a model call timed out and nothing shows "
     "whether the endpoint answered at all"),
    ("model_call_timed_out_generating", "agent_error", "a model call timed out while the "
     "endpoint was sending its answer: a runaway generation"),
    ("model_output_unparseable", "agent_error", "the server could not parse what the model "
     "generated (tool-call or channel markup)"),
    ("agent_request_rejected", "agent_error", "the endpoint rejected the request the agent's "
     "harness built (a 4xx)"),
    ("model_context_overflow", "agent_error", "the agent let its prompt outgrow the window it "
     "was told"),
    ("model_context_misconfigured", "infra", "the server serves a smaller context window than "
     "the agent was told (both numbers quoted)"),
    ("model_reply_cut_off", "infra", "the run ended on a reply without usage or tool call from "
     "an endpoint shown to send usage"),
    # --- the agent's harness ------------------------------------------------------------------
    ("agent_harness_crash", "agent_error", "the exception chain's root cause is the agent's own "
     "code, with no outside answer behind it"),
    ("agent_killed_tmux", "agent_error", "the agent killed the tmux session Harbor drives"),
    ("agent_command_over_cap", "agent_error", "the agent's own command (one that waits by design "
     "or its own program) ran past the per-command cap"),
    ("agent_build_memory_pressure", "agent_error", "a kill while the agent's own build ran with "
     "no bound on its parallelism"),
    ("command_cap_unknown_command", "insufficient_evidence", "a command ran past the cap and no "
     "log says which"),
    # --- the environment (container, daemon, sandbox, cluster, host) --------------------------
    ("container_exec_hung", "infra", "a command that cannot take long, or one of Harbor's or "
     "the harness's own, never returned: the container hung"),
    ("container_killed", "infra", "an agent command SIGKILLed with no timeout, then an empty "
     "verifier: the container died under the trial"),
    ("tmux_usage_error", "agent_error", "tmux refused the send-keys arguments the harness's "
     "driver built from the model's own keystrokes (a usage error)"),
    ("agent_removed_tmux_socket", "agent_error", "tmux lost its socket right after the agent's "
     "own last command mounted over or removed the directory that holds it"),
    ("tmux_server_killed", "infra", "the tmux server Harbor drives died with the container "
     "exec killed (exit 137) and no command of the agent's to explain it"),
    ("tmux_session_lost", "insufficient_evidence", "the agent's tmux session vanished and "
     "nothing shows why"),
    ("out_of_memory", "infra", "the kernel's OOM killer in Harbor's logs or the agent's screen "
     "of an ungraded trial"),
    ("verifier_out_of_memory", "infra", "the verifier's tests were killed for memory in a "
     "container the job gave less memory than the task asks"),
    ("agent_own_work_filled_disk", "agent_error", "the disk filled while the agent's own "
     "install, download or build was running: the space was most likely its own"),
    ("sandbox_provider_5xx", "infra", "the sandbox provider answered Harbor's exec with a 5xx "
     "status page: the sandbox failed under the trial"),
    ("disk_full", "infra", "a write failed with no space left on device"),
    ("emulation_unsupported", "infra", "the host's CPU emulation cannot run the task's binaries"),
    ("docker_address_pools_exhausted", "infra", "Docker ran out of address pools for the "
     "per-trial networks"),
    ("egress_sidecar_build_failed", "infra", "Harbor's egress-control sidecar could not be built"),
    ("image_pull_failed", "infra", "the task image was absent and could not be pulled"),
    ("environment_start_failed", "infra", "the task container did not come up"),
    ("environment_setup_hung", "infra", "the container start ran far past the job's median and "
     "was stopped by its timeout"),
    ("agent_setup_hung", "infra", "the agent's setup ran far past the job's median and was "
     "stopped by its timeout"),
    ("agent_exec_failed", "infra", "the agent's command could not be executed in the container "
     "(exit 126/127)"),
    ("k8s_quota_exceeded", "infra", "the cluster's quota refused the trial's pod"),
    ("k8s_pod_unschedulable", "infra", "the trial's pod was never scheduled"),
    ("k8s_image_pull_failed", "infra", "the kubelet could not pull the task image"),
    ("k8s_pod_evicted", "infra", "the trial's pod was evicted while it ran"),
    ("k8s_pod_deleted", "infra", "the trial's pod was deleted while it ran"),
    # --- the serving plane's own record (serving-metrics.jsonl beside the job) ----------------
    ("serving_worker_down", "infra", "the serving plane's record shows a worker unhealthy, "
     "removed or not answering while the trial waited on the model"),
    ("serving_circuit_open", "infra", "the serving plane's record shows the gateway's circuit "
     "breaker open for a worker while the trial waited on the model"),
    ("serving_no_workers", "infra", "the serving plane's record shows requests failing with no "
     "worker available while the trial waited on the model"),
    ("serving_5xx_burst", "infra", "the serving plane's record shows a burst of 5xx answers "
     "while the trial waited on the model"),
    # --- the agent's setup --------------------------------------------------------------------
    ("tool_install_failed", "infra", "Harbor could not install or start tmux/asciinema for the "
     "agent"),
    ("tool_install_timeout", "infra", "Harbor's setup of terminus-2 (tmux/asciinema) did not "
     "finish"),
    ("agent_setup_failed", "infra", "the agent's own setup failed before the model ran, for a "
     "reason outside it (a hung exec, a download refused)"),
    ("agent_setup_cannot_run", "agent_error", "the agent's own software cannot run in the task's "
     "image: its setup failed with no outside cause"),
    # --- the verifier -------------------------------------------------------------------------
    ("verifier_timeout_running_tests", "verifier_timeout", "the verifier ran out of time while "
     "its tests ran"),
    ("verifier_timeout_installing_dependencies", "verifier_timeout", "the verifier ran out of "
     "time installing its dependencies"),
    ("verifier_timeout", "verifier_timeout", "the verifier timed out with no output that shows "
     "how far it got"),
    ("reward_file_missing", "insufficient_evidence", "the verifier wrote no usable reward and "
     "nothing explains why"),
]

_NETWORK = {
    "http_5xx": "answered with a 5xx",
    "http_429": "rate-limited (429)",
    "proxy_5xx": "the HTTP proxy answered a 5xx",
    "tls_failure": "a TLS failure",
    "dns_failure": "a name that did not resolve while the resolver worked",
    "connection_reset": "a connection reset",
    "network_timeout": "a network timeout",
    "connection_refused": "a connection refused",
    "network_unreachable": "the network unreachable",
    "download_failed": "a failed download",
}
_WHO = {
    "agent": "the agent's requests to an endpoint outside its control failed repeatedly",
    "verifier": "the verifier's download from an outside endpoint failed and no test reported",
    "agent_setup": "the agent's setup download from an outside endpoint failed",
}
for _phase, _who in _WHO.items():
    for _fam, _what in _NETWORK.items():
        _ENTRIES.append((f"{_phase}_{_fam}", "infra", f"{_who}: {_what}"))

SIGNATURES: dict[str, Signature] = {n: Signature(n, c, m) for n, c, m in _ENTRIES}


def lookup(name: str | None) -> Signature | None:
    """The registered signature, or the family it belongs to; None when unregistered."""
    if name is None:
        return None
    if name in SIGNATURES:
        return SIGNATURES[name]
    families = [s for s in SIGNATURES.values() if s.family and name.startswith(s.name[:-1])]
    return max(families, key=lambda s: len(s.name), default=None)


def meaning(name: str | None) -> str:
    found = lookup(name)
    return found.meaning if found else ""


def table() -> list[str]:
    """The registry as the Markdown table audit/RULES.md lists (one row a signature)."""
    rows = ["| signature | category | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{s.name}` | {s.category} | {s.meaning} |" for s in SIGNATURES.values()]
    return rows
