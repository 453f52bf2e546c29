# The two commands a new user needs: `make test` (installs every test peer, then runs the
# tests) and `make up STACK=local` (the Pulumi CLI against the local file state backend).
STACK ?= local
VENV ?= .venv
PY := $(VENV)/bin/python
export PULUMI_CONFIG_PASSPHRASE ?=

.PHONY: setup test lint up preview destroy bench

setup:
	bash tests/env/setup.sh

test: setup
	$(PY) -m ruff check components audit tests benchmarks __main__.py
	$(PY) -m pytest -q

up preview destroy: setup
	pulumi login --local
	pulumi stack select --create $(STACK)
	pulumi $@ --stack $(STACK) --yes

bench: setup
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done
