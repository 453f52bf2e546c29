# `make test`: installs and starts every test peer, then lint, the fast loop and every real test
#   (tests/run.sh: in stages, the Go builds in the background, each stage's time at the end).
# `make up STACK=local` (the default stack): the real `pulumi up` on the local file state backend;
#   setup/setup.sh first gets what the stack needs on this machine.
# `make setup`: a developer's machine, without running a test (an operator needs none: `make up`
#   sets up what its stack needs).
STACK ?= local
VENV ?= .venv
PY := $(VENV)/bin/python
# The local file backend encrypts secrets with a passphrase; empty unless you set one.
export PULUMI_CONFIG_PASSPHRASE ?=
# One setting of setup/defaults.env (the environment wins), read the way the scripts read it.
setting = $(shell bash -c 'source setup/lib.sh && load_defaults >/dev/null && echo "$$BENCHSTACK_$(1)"')

.PHONY: setup test unit lint up preview destroy refresh output audit bench

# A developer's machine: what every local stack needs (setup/), then the tests' own peers and
# builds (setup/dev.sh runs tests/env/setup.sh for them), without running a test.
setup:
	bash setup/dev.sh

# Every host probe, setup and test-environment script: shellcheck, zero findings (a directive that
# silences one carries its reason on the same line).
SHELL_SCRIPTS := $(wildcard hostside/probes/*.sh setup/*.sh setup/lib.sh setup/engine/*.sh setup/k8s/*.sh \
	tests/*.sh tests/env/*.sh tests/env/hosts/*.sh tests/hostplane/*.sh tests/gpu/*.sh) .ci/run demo/gpu_standin/sglang

# ruff's complexity rules ignore a listed file whole: the test holds the list to its functions.
lint:
	$(PY) -m ruff check components hostside contracts audit tests benchmarks demo setup __main__.py
	$(PY) -m pytest -q -p no:cacheprovider tests/architecture/test_complexity.py
	$(PY) -m mypy components hostside contracts audit __main__.py
	@command -v shellcheck >/dev/null || { echo "make lint: shellcheck not found: apt-get install shellcheck (make setup does)" >&2; exit 1; }
	shellcheck -x -P SCRIPTDIR $(SHELL_SCRIPTS)

# The fast loop: every test that needs no peer (no Docker engine, registry, Harbor, S3, sshd or
# Pulumi CLI), in under a minute; only the project's venv is set up. One worker per core, each
# taking whole files (a file's module fixtures, the dev-set audits, run once).
unit:
	bash tests/env/venv.sh
	$(PY) -m pytest -q -m "not real" -n auto --dist loadfile

# The peers, lint, the fast loop, then every test with a real peer: all tests, each once.
test:
	bash tests/run.sh

# The stack's lifecycle, from a fresh clone with nothing run before: setup/setup.sh gets what the
# stack needs on this machine (the local stack: the Docker engine, the registry mirror, the
# proxy; every stack: the Pulumi engine when no `pulumi` is on PATH), then the real CLI runs.
# The built engine is used with its own PULUMI_HOME (its providers) and its language host on
# PATH; the first run creates the program's .venv from requirements.txt.
SYSTEM_PULUMI := $(shell command -v pulumi 2>/dev/null)
ifeq ($(SYSTEM_PULUMI),)
ENGINE_DIR := $(call setting,ENGINE_DIR)
PULUMI_ENV = PULUMI_HOME=$(ENGINE_DIR)/current/home PULUMI_SKIP_UPDATE_CHECK=1 \
	PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true PATH="$(ENGINE_DIR)/current/bin:$$PATH"
else
PULUMI_ENV =
endif
RUN_PULUMI = $(PULUMI_ENV) pulumi

# One stack output (`make output KEY=job_dir`), read with the same engine.
output:
	@$(RUN_PULUMI) stack output $(KEY) --stack $(STACK)

# The audit of the stack's job and its reruns (`python -m audit --stack`), reading the stack's
# outputs with the same engine: the board's number first. More options in AUDIT_ARGS, e.g.
# `make audit AUDIT_ARGS="--format html --out report.html"` (README: The audit).
AUDIT_ARGS ?=
audit:
	@$(PULUMI_ENV) $(PY) -m audit --stack $(STACK) $(AUDIT_ARGS)

up preview destroy refresh:
	bash setup/setup.sh --stack $(STACK)
	$(RUN_PULUMI) stack select --create $(STACK)
	$(if $(filter local-k8s,$(STACK)),$(RUN_PULUMI) config set --secret --stack $(STACK) benchstack:kubeconfig < $(call setting,K8S_DIR)/admin.kubeconfig)
	$(RUN_PULUMI) $@ --stack $(STACK) $(if $(filter preview,$@),,--yes)

bench: setup
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done
