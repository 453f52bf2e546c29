"""What the program declares for `harbor.reruns`, under mocks whose status probe and audit
answer like a host would (tests/e2e/test_local_stack.py runs the rerun loop for real)."""

from __future__ import annotations

import json
import re

import pulumi
import pytest

from components.config import ConfigError, split_stack_file
from components.harbor_rerun import rerun_job_name
from contracts import job_copy
from contracts import outputs as keys
from tests.conftest import ROOT
from tests.graph.program import mock_local_run, run_program
from tests.harbor.conftest import called_module, step_inputs

RERUN_STEPS = ("rerun-configs", "rerun-preflight", "rerun-launch")


class HostAnswers(pulumi.runtime.Mocks):
    """The main job's status probe says `main_state`; the audit of it lists `audited`."""

    def __init__(self, main_state: str, audited: list[str] | None = None,
                 history: list[str] | None = None):
        self.main_state = main_state
        self.audited = audited or []
        self.history = history or []  # earlier reruns' dirs the host already has
        self.audit_commands: list[str] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        outputs = dict(args.inputs)
        if args.typ == "command:local:Command":
            outputs["stdout"] = "{}"
            outputs["stderr"] = ""
        return [f"{args.name}-id", outputs]

    def call(self, args: pulumi.runtime.MockCallArgs):
        text = args.args.get("command", "")
        if "-m audit" in text:
            self.audit_commands.append(text)
            return {"stdout": json.dumps({"rerun": self.audited}, indent=2), "stderr": ""}
        if "benchstack-harbor_reruns" in text:
            return {"stdout": json.dumps({"job_dirs": self.history}), "stderr": ""}
        if "benchstack-harbor_status" in text:
            of_rerun = re.search(r"export JOB_NAME=\S*-rerun-", text) is not None
            state = "absent" if of_rerun else self.main_state
            token = "start" if state == "absent" else "recorded-token"
            return {"stdout": json.dumps({"state": state, "token": token, "pid": None}),
                    "stderr": ""}
        return mock_local_run(text)


def harbor_with(reruns) -> dict:
    values, _ = split_stack_file(ROOT / "Pulumi.local.yaml")
    return {"harbor": {**values["harbor"], "reruns": reruns}}


def plain(value):
    """A mock registration's input with its secret wrapper taken off."""
    return value["value"] if isinstance(value, dict) and "value" in value else value


def inputs_of(run, name: str) -> dict:
    return {k: plain(v) for k, v in run.named(name).inputs.items()}


def steps(run) -> dict[str, dict]:
    return {name: inputs_of(run, name) for name in RERUN_STEPS}


def provenance_facts(run) -> dict:
    return step_inputs(inputs_of(run, "provenance-write")["create"])["facts"]


def test_waits_while_the_main_job_is_not_finished():
    for state in ("absent", "running", "interrupted"):
        run = run_program("local", overrides=harbor_with(["hello-file"]),
                          mocks=HostAnswers(state))
        for name, inputs in steps(run).items():
            assert "benchstack-waiting" in inputs["create"], name
            assert "waits for the main job" in inputs["create"]
            assert inputs.get("delete") in (None, ""), f"{name} would delete while waiting"
        assert inputs_of(run, "rerun-launch")["triggers"] == ["", "waiting"]
        assert run.exports[keys.RERUN_JOB_DIRS] == []
        assert run.exports[keys.RERUN_WAITING].startswith("waits for the main job local-terminus2-")


def test_once_the_main_job_finished_the_listed_tasks_run_as_their_own_job():
    run = run_program("local", overrides=harbor_with(["hello-file-slow", "hello-file"]),
                      mocks=HostAnswers("finished"))
    main = run.exports[keys.JOB_NAME]
    name = rerun_job_name(main, ("hello-file-slow", "hello-file"))
    configs, launch = inputs_of(run, "rerun-configs"), inputs_of(run, "rerun-launch")
    assert "benchstack-waiting" not in configs["create"]
    rendered = step_inputs(configs["create"])
    assert "task_names:\n  - hello-file-slow\n  - hello-file\n" in rendered[
        "job_config_yaml"].replace("    - ", "  - ")
    assert rendered["config_path"].endswith(f"{name}.job.yaml")
    assert launch["triggers"] == [name, "start"]
    assert called_module(launch["create"]) == "harbor_launch create"
    assert step_inputs(launch["create"])["job_name"] == name
    assert called_module(launch["delete"]) == "harbor_launch delete"
    assert step_inputs(launch["delete"])["job_name"] == name
    # Same agent, sampling, compose override and tool bundle as the main job.
    main_config = step_inputs(run.named("job-configs").inputs["create"])
    assert main_config["compose_yaml"] == rendered["compose_yaml"]
    jobs_dir = run.exports[keys.JOBS_DIR]
    assert run.exports[keys.RERUN_JOB_DIRS] == [f"{jobs_dir}/{name}"]
    assert run.exports[keys.RERUN_WAITING] == ""
    # The rerun never races its main job, and destroy stops it first.
    for step in RERUN_STEPS:
        deps = run.component(step).depends_on
        assert any(getattr(d, "_name", None) == "job-launch" for d in deps), step
    assert run.component("rerun").depends_on[0] is run.component("job").resource


def test_from_audit_reruns_what_the_audit_of_the_finished_job_lists():
    answers = HostAnswers("finished", audited=["hello-file-wrong"])
    run = run_program("local", overrides=harbor_with({"from_audit": True}), mocks=answers)
    assert len(answers.audit_commands) == 1
    assert run.exports[keys.JOB_DIR] in answers.audit_commands[0]
    name = rerun_job_name(run.exports[keys.JOB_NAME], ("hello-file-wrong",))
    assert inputs_of(run, "rerun-launch")["triggers"] == [name, "start"]

    nothing = run_program("local", overrides=harbor_with({"from_audit": True}),
                          mocks=HostAnswers("finished", audited=[]))
    assert "lists no task for rerun" in nothing.exports[keys.RERUN_WAITING]
    assert nothing.exports[keys.RERUN_JOB_DIRS] == []


def test_from_audit_does_not_audit_an_unfinished_job():
    answers = HostAnswers("running", audited=["hello-file"])
    run = run_program("local", overrides=harbor_with({"from_audit": True}), mocks=answers)
    assert answers.audit_commands == []
    assert "waits for the main job" in run.exports[keys.RERUN_WAITING]


@pytest.mark.parametrize(
    "reruns, message",
    [
        (["no-such-task"], "harbor.reruns: task 'no-such-task' is not a task of the dataset"),
        ({"from_audit": True, "tasks": ["hello-file"]}, "harbor.reruns"),
        ({}, "not both and not neither"),
        (["hello-file", "hello-file"], "listed twice"),
        (["../etc"], "is not a task name"),
    ],
)
def test_bad_reruns_are_refused_naming_the_key(reruns, message):
    with pytest.raises(ConfigError) as err:
        run_program("local", overrides=harbor_with(reruns), mocks=HostAnswers("finished"))
    assert message in str(err.value)
    assert "benchstack:harbor" in str(err.value)


def test_no_reruns_declares_no_rerun_and_exports_empty():
    run = run_program("local", mocks=HostAnswers("finished"))
    assert not [r for r in run.registrations if r.name.startswith("rerun")]
    assert run.exports[keys.RERUN_JOB_DIRS] == []
    assert run.exports[keys.RERUN_WAITING] == ""


def test_provenance_facts_come_from_the_stack():
    run = run_program("local", overrides=harbor_with(["hello-file"]),
                      mocks=HostAnswers("finished"))
    write = inputs_of(run, "provenance-write")
    facts = provenance_facts(run)
    values, _ = split_stack_file(ROOT / "Pulumi.local.yaml")
    assert facts["schema"] == keys.PROVENANCE_SCHEMA
    assert facts["stack"] == "local"
    assert facts["harbor"]["wheel_sha256"] == values["harbor"]["wheel_sha256"]
    assert facts["harbor"]["version"] == "0.21.0"
    assert facts["dataset"]["task_count"] == 3
    assert facts["job"]["name"] == run.exports[keys.JOB_NAME]
    assert [r["tasks"] for r in facts["reruns"]] == [["hello-file"]]
    assert facts["serving"]["model_name"] == "benchstack/stand-in"
    assert [w["url"] for w in facts["serving"]["workers"]] == ["http://127.0.0.1:30001"]
    assert run.exports[keys.PROVENANCE_PATH].endswith(f"{run.exports[keys.JOB_NAME]}"
                                                      ".provenance.json")
    assert step_inputs(write["create"])["resolved_config"].endswith("resolved-config.json")


def test_from_audit_on_a_remote_harbor_host_copies_the_job_over_ssh():
    values, _ = split_stack_file(ROOT / "Pulumi.a100.yaml")
    answers = HostAnswers("finished", audited=["dna-assembly"])
    run = run_program(
        "a100",
        overrides={"harbor": {**values["harbor"], "reruns": {"from_audit": True}}},
        secrets={"benchstack:sshPrivateKey": "-----KEY-SECRET-----",
                 "benchstack:apiKey": "sk-SECRET"},
        mocks=answers,
    )
    (text,) = answers.audit_commands
    # The one remote job copy (contracts/job_copy.py) first, then the audit of the copy.
    copy, audit = text.split(" -m audit ")
    assert job_copy.__file__ in copy and '"target": "bench@10.0.0.12"' in copy
    assert "/benchstack/jobs/worker-b/" in audit
    assert "KEY-SECRET" not in text
    name = rerun_job_name(run.exports[keys.JOB_NAME], ("dna-assembly",))
    assert inputs_of(run, "rerun-launch")["triggers"] == [name, "start"]
    assert run.named("rerun-launch").type == "command:remote:Command"
    facts = provenance_facts(run)
    assert facts["serving"]["model_name"] == values["model"]["name"]
    assert facts["serving"]["model_path"] == values["model"]["path"]
    assert [w["url"] for w in facts["serving"]["workers"]] == run.exports[keys.WORKER_URLS]
    assert "--policy" in facts["serving"]["router_args"]
    assert facts["dataset"]["commit"] == values["dataset"]["commit"]
    assert "KEY-SECRET" not in json.dumps(facts) and "sk-SECRET" not in json.dumps(facts)


def test_earlier_reruns_on_the_host_stay_in_the_outputs_oldest_first():
    """Another task list is another rerun; the earlier round stays in the merge."""
    jobs_dir = "/var/lib/benchstack/local/results"
    earlier = f"{jobs_dir}/local-terminus2-0123456789-rerun-aaaaaaaa"
    waiting = run_program("local", overrides=harbor_with(["hello-file"]),
                          mocks=HostAnswers("running", history=[earlier]))
    assert waiting.exports[keys.RERUN_JOB_DIRS] == [earlier]
    run = run_program("local", overrides=harbor_with(["hello-file"]),
                      mocks=HostAnswers("finished", history=[earlier]))
    name = rerun_job_name(run.exports[keys.JOB_NAME], ("hello-file",))
    current = f"{run.exports[keys.JOBS_DIR]}/{name}"
    assert run.exports[keys.RERUN_JOB_DIRS] == [earlier, current]
    again = run_program("local", overrides=harbor_with(["hello-file"]),
                        mocks=HostAnswers("finished", history=[earlier, current]))
    assert again.exports[keys.RERUN_JOB_DIRS] == [earlier, current]
