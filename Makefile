# `make test`: installs and starts every test peer (tests/env/setup.sh), then lint + pytest.
# `make up STACK=local` (the default stack): the Pulumi CLI on the local file state backend.
STACK ?= local
VENV ?= .venv
PY := $(VENV)/bin/python
# The local file backend encrypts secrets with a passphrase; empty unless you set one.
export PULUMI_CONFIG_PASSPHRASE ?=

.PHONY: setup venv test unit lint up preview destroy refresh bench

setup:
	bash tests/env/setup.sh

# The program's own environment (no test peers): what `pulumi up` needs on an operator machine.
venv: $(VENV)/.benchstack-program
$(VENV)/.benchstack-program: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -e .
	touch $@

# Every host script and test-environment script: shellcheck, zero findings (a directive that
# silences one carries its reason on the same line).
SHELL_SCRIPTS := $(wildcard components/scripts/*.sh components/scripts/lib/*.sh tests/env/*.sh tests/env/engine/*.sh tests/hostplane/*.sh) .ci/run

lint:
	$(PY) -m ruff check components audit tests benchmarks __main__.py
	$(PY) -m mypy components audit __main__.py
	@command -v shellcheck >/dev/null || { echo "make lint: shellcheck not found: apt-get install shellcheck (make setup does)" >&2; exit 1; }
	shellcheck -x -P SCRIPTDIR $(SHELL_SCRIPTS)

# The fast loop: every test that needs no peer (no Docker engine, registry, Harbor, S3, sshd or
# Pulumi CLI), in under a minute; only the Python environment is set up.
unit: $(VENV)/.benchstack-test
	$(PY) -m pytest -q -m "not real"

$(VENV)/.benchstack-test: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

# lint, then the fast loop, then every test with a real peer: all tests, each once.
test: setup
	$(MAKE) --no-print-directory lint
	$(PY) -m pytest -q -m "not real"
	$(PY) -m pytest -q -m real

# The `pulumi` on PATH, else the one `make setup` built (tests/env/engine/build.sh).
ENGINE_DIR ?= /var/lib/benchstack-engine
PULUMI ?= $(or $(shell command -v pulumi 2>/dev/null),$(ENGINE_DIR)/current/bin/pulumi)

up preview destroy refresh: venv
	@test -x "$(PULUMI)" || { echo "make $@: no pulumi on PATH and none built in $(ENGINE_DIR): install the Pulumi CLI or run 'make setup'" >&2; exit 1; }
	@PATH="$(dir $(PULUMI)):$$PATH" command -v pulumi-language-python >/dev/null || { echo "make $@: $(PULUMI) has no Python language host (pulumi-language-python) beside it or on PATH; the one built here lacks it (see README, 'The Pulumi engine'): install the Pulumi CLI" >&2; exit 1; }
	$(PULUMI) stack select --create $(STACK)
	$(PULUMI) $@ --stack $(STACK) $(if $(filter preview,$@),,--yes)

bench: setup
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done
