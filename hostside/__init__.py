"""The code benchstack runs on a host: one module per resource kind, standard library only.

HostCode (components/host_code.py) copies this package to `<workspace>/.benchstack/code` on
every host, and each step's command is one call of it (components/seam/step.py, `host_step`):

    PYTHONPATH=<code> BENCHSTACK_INPUTS='{"tools_dir": ...}' python3 -m hostside tool_bundle create

Every module runs as `python3 -m hostside RESOURCE VERB`, with VERB one of `create`, `delete`
or `check`. Its inputs are one JSON object the program renders (`BENCHSTACK_INPUTS`), plus
secrets as a JSON object on standard input when the step has any; a module reads them into its
own `Inputs` dataclass, whose fields have no defaults: every value a host step uses comes from
the program, once (the config model owns the defaults). A step prints its outputs as one JSON
object on its last stdout line, progress on stderr, and fails with exit 1 and one line,
`RESOURCE: reason`, as its last stderr line.

It runs on the hosts' own python3 (3.9 or later), so it imports nothing outside the standard
library. Three files are programs, not steps: readiness.py (httpx) and s3_fetch.py (boto3) run
with the python of a venv their step builds (pinned_venv.py), and container_status.py is inlined
in a probe that runs before any code is on the host.
"""
