"""Built-in detectors: failure families that need more than a pattern to be judged.

Each detector reads one trial's evidence (plus a little of the job around it,
audit/judge/context.py) and returns a Classification or None. They run after the rules.yaml rules
of the first stage (Harbor's own environment and tmux errors) and before the second stage
(verifier timeouts, missing reward files), in the order of DETECTORS: the first that explains
the trial wins. A verdict that puts the trial up for rerun carries its proof
(audit/judge/verdict.py); audit/judge/classify.py drops any that does not.

The detectors of CLUSTER run earlier, before the rules of the first stage: the Kubernetes
cluster's own account of a trial's pod (audit/read/kubernetes.py) says more than Harbor's words for
the same failure (an environment start that timed out, a tmux session gone with its pod).

Modules: `endpoint` (the model endpoint, wherever its failure surfaces; a served window set
short), `harness` (the agent's own code crashed), `environment` (container killed, OOM, disk,
emulation), `command_cap` (a command that never returned: the agent's wait or a hung
container), `setup` (failures before the model ran), `network_failures` (downloads, judged by
who owns the endpoint), `kubernetes` (the cluster refused, never scheduled, could not pull,
evicted or deleted the trial's pod), `serving` (the serving plane's own record: a worker down, a
circuit open, no worker, a burst of 5xx while the trial waited on the model).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from audit.judge.context import JobContext
from audit.judge.detectors import (
    command_cap,
    endpoint,
    environment,
    harness,
    kubernetes,
    network_failures,
    serving,
    setup,
    tmux,
)
from audit.judge.verdict import Classification
from audit.read.evidence import TrialEvidence

__all__ = ["CLUSTER", "DETECTORS", "Detector", "JobContext"]


@dataclass(frozen=True)
class Detector:
    """A detector and the name it is listed under (what a test or a reader calls it)."""

    fn: Callable[[TrialEvidence, JobContext], Classification | None]
    name: str


DETECTORS: list[Detector] = [
    Detector(endpoint.model_endpoint, "model_endpoint"),
    Detector(endpoint.endpoint_in_agent_log, "endpoint_in_agent_log"),
    # The serving plane's own record: what the trial's words alone could not prove.
    Detector(serving.serving_record, "serving_record"),
    # Before the harness crash: a crash on the per-command cap is judged by its command.
    Detector(command_cap.command_cap, "command_cap"),
    Detector(tmux.tmux_own_words, "tmux_own_words"),
    Detector(harness.agent_harness_crash, "agent_harness_crash"),
    Detector(environment.out_of_memory, "out_of_memory"),
    Detector(environment.container_died, "container_killed"),
    Detector(environment.disk_full, "disk_full"),
    Detector(environment.sandbox_provider_failed, "sandbox_provider_failed"),
    Detector(environment.verifier_out_of_memory, "verifier_out_of_memory"),
    Detector(environment.emulation_unsupported, "emulation_unsupported"),
    Detector(setup.setup_hung, "setup_hung"),
    Detector(setup.agent_setup_failed, "agent_setup_failed"),
    Detector(endpoint.model_reply_cut_off, "model_reply_cut_off"),
    Detector(network_failures.verifier_network, "verifier_network"),
    Detector(network_failures.agent_network, "agent_network"),
]

# Tried before the first-stage rules, in this order (audit/judge/detectors/kubernetes.py).
CLUSTER: list[Detector] = [
    Detector(kubernetes.quota_exceeded, kubernetes.QUOTA),
    Detector(kubernetes.pod_unschedulable, kubernetes.UNSCHEDULABLE),
    Detector(kubernetes.image_pull_failed, kubernetes.IMAGE_PULL),
    Detector(kubernetes.pod_evicted, kubernetes.EVICTED),
    Detector(kubernetes.pod_deleted, kubernetes.DELETED),
]
