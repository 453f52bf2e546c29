"""Stack output key names: the contract between the Pulumi program and the audit CLI.

`__main__.py` exports these keys and `audit/` reads them; neither side spells a key itself.
This module imports nothing so that `audit/` can use it without pulling in Pulumi.
"""

ROUTER_URL = "router_url"
WORKER_URLS = "worker_urls"
HARBOR_HOST = "harbor_host"
JOB_NAME = "job_name"
JOBS_DIR = "jobs_dir"
JOB_DIR = "job_dir"
JOB_LOG = "job_log"
JOB_PID_FILE = "job_pid_file"
TOOLS_DIR = "tools_dir"
PROXY_URL = "proxy_url"
IMAGES_READY = "images_ready"
IMAGE_DIGESTS = "image_digests"
DATASET_PATH = "dataset_path"
# The published score to compare with: {"score", "plus_minus", "convention"} (a bare number
# from a stack deployed before conventions: the board's).
REFERENCE_SCORE = "reference_score"
# Reruns of the main job's tasks (harbor.reruns): the rerun jobs' dirs, oldest first ([] until
# one has been launched), and why none runs yet ("" once launched, or when none is declared).
RERUN_JOB_DIRS = "rerun_job_dirs"
RERUN_WAITING = "rerun_waiting"
# The provenance manifest (JSON) of the main job, on the Harbor host: what a reader needs to
# repeat the run. Its top-level key "schema" is "benchstack.provenance/1".
PROVENANCE_PATH = "provenance_path"
PROVENANCE_SCHEMA = "benchstack.provenance/1"
# Where the trials ran: "docker" (containers on the Harbor host) or "kubernetes" (pods); for
# pods, the namespace. The cluster's events and pod states are then in the job dir, in the files
# the audit reads (k8s-events.jsonl, k8s-pods.jsonl).
TRIALS_ENVIRONMENT = "trials_environment"
K8S_NAMESPACE = "k8s_namespace"
# How this machine reaches the Harbor host over SSH, null for the local host: {"target":
# "user@address", "port": 22, "options": [the ssh options every SSH path of the stack uses: its
# host-key policy, known_hosts, key file]}. The audit copies a remote job dir with it.
HARBOR_SSH = "harbor_ssh"

ALL = (
    ROUTER_URL,
    WORKER_URLS,
    HARBOR_HOST,
    JOB_NAME,
    JOBS_DIR,
    JOB_DIR,
    JOB_LOG,
    JOB_PID_FILE,
    TOOLS_DIR,
    PROXY_URL,
    IMAGES_READY,
    IMAGE_DIGESTS,
    DATASET_PATH,
    REFERENCE_SCORE,
    RERUN_JOB_DIRS,
    RERUN_WAITING,
    PROVENANCE_PATH,
    TRIALS_ENVIRONMENT,
    K8S_NAMESPACE,
    HARBOR_SSH,
)
