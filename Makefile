# `make test`: installs and starts every test peer (tests/env/setup.sh), then lint + pytest.
# `make up STACK=local` (the default stack): the real `pulumi up` on the local file state backend.
STACK ?= local
VENV ?= .venv
PY := $(VENV)/bin/python
# The local file backend encrypts secrets with a passphrase; empty unless you set one.
export PULUMI_CONFIG_PASSPHRASE ?=

.PHONY: setup test unit lint up preview destroy refresh output bench

setup:
	bash tests/env/setup.sh

# Every host script and test-environment script: shellcheck, zero findings (a directive that
# silences one carries its reason on the same line).
SHELL_SCRIPTS := $(wildcard hostside/probes/*.sh tests/env/*.sh tests/env/engine/*.sh tests/env/k8s/*.sh tests/hostplane/*.sh) .ci/run \
	tests/standins/sglang

lint:
	$(PY) -m ruff check components hostside contracts audit tests benchmarks __main__.py
	$(PY) -m mypy components hostside contracts audit __main__.py
	@command -v shellcheck >/dev/null || { echo "make lint: shellcheck not found: apt-get install shellcheck (make setup does)" >&2; exit 1; }
	shellcheck -x -P SCRIPTDIR $(SHELL_SCRIPTS)

# The fast loop: every test that needs no peer (no Docker engine, registry, Harbor, S3, sshd or
# Pulumi CLI), in under a minute; only the Python environment is set up. One worker per core,
# each taking whole files (a file's module fixtures, the dev-set audits, run once).
unit: $(VENV)/.benchstack-test
	$(PY) -m pytest -q -m "not real" -n auto --dist loadfile

$(VENV)/.benchstack-test: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

# lint, then the fast loop, then every test with a real peer: all tests, each once.
test: setup
	$(MAKE) --no-print-directory lint
	$(PY) -m pytest -q -m "not real" -n auto --dist loadfile
	$(PY) -m pytest -q -m real

# The stack's lifecycle, from a fresh clone with nothing run before: setup.sh --stack gets what
# the stack needs on this machine (the local stack: the Docker engine, the registry mirror, the
# proxy; every stack: the Pulumi engine when no `pulumi` is on PATH), then the real CLI runs.
# The built engine is used with its own PULUMI_HOME (its providers) and its language host on
# PATH; the first run creates the program's .venv from requirements.txt.
ENGINE_DIR ?= /var/lib/benchstack-engine
SYSTEM_PULUMI := $(shell command -v pulumi 2>/dev/null)
ifeq ($(SYSTEM_PULUMI),)
RUN_PULUMI = PULUMI_HOME=$(ENGINE_DIR)/current/home PULUMI_SKIP_UPDATE_CHECK=1 \
	PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true PATH="$(ENGINE_DIR)/current/bin:$$PATH" pulumi
else
RUN_PULUMI = pulumi
endif

# One stack output (`make output KEY=job_dir`), read with the same engine.
output:
	@$(RUN_PULUMI) stack output $(KEY) --stack $(STACK)

# The local-k8s stack's cluster is the test cluster setup.sh starts: its admin kubeconfig becomes
# the stack's secret (the stack makes the Harbor controller a narrower one).
K8S_KUBECONFIG ?= /var/lib/benchstack-k8s/admin.kubeconfig

up preview destroy refresh:
	bash tests/env/setup.sh --stack $(STACK)
	$(RUN_PULUMI) stack select --create $(STACK)
	$(if $(filter local-k8s,$(STACK)),$(RUN_PULUMI) config set --secret --stack $(STACK) benchstack:kubeconfig < $(K8S_KUBECONFIG))
	$(RUN_PULUMI) $@ --stack $(STACK) $(if $(filter preview,$@),,--yes)

bench: setup
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done
