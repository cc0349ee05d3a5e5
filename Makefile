# Two commands on a fresh machine: `make demo` and `make test`. Both (re)build .venv only when
# pyproject.toml changed, so they are fast the second time.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo demo-ui lint test test-deps test-long ui daemon bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml tools/slm4ie_dagster_module.pth
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# pipefail keeps pip's exit status; the filter only hides this machine's notes about absent local indexes
	set -o pipefail; $(BIN)/python -m pip install --quiet --upgrade pip 2>&1 | { grep -v "is ignored: it is neither" || true; }
	set -o pipefail; $(BIN)/python -m pip install --quiet -e '.[test,postgres,ui-test]' 2>&1 | { grep -v "is ignored: it is neither" || true; }
	@# `dagster asset materialize --select extracted/kas` finds a code location only through -m/-f or
	@# DAGSTER_MODULE_NAME: this start-up line supplies the default to `dagster asset|job ...` alone
	@# (never to `dagster dev -w`, which would then see two targets).
	cp tools/slm4ie_dagster_module.pth "$$($(BIN)/python -c 'import site; print(site.getsitepackages()[0])')/"
	@touch $(STAMP)

demo: venv
	$(BIN)/python examples/demo.py

# Style and types first: they take seconds, the suite takes minutes. Versions and rules: pyproject.toml.
lint: venv
	$(BIN)/ruff check slm4ie_assets tests bench examples tools
	$(BIN)/mypy slm4ie_assets

# Two pytest processes (pytest-xdist; a test module stays in one, so its fixtures are set up once):
# most of the slow tests wait on subprocesses, so two overlap well even on two cores.
test: lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

# Debian's chromium and postgresql for the browser and Postgres tests (they install these themselves
# when missing; CI calls this first so an install failure shows up on its own).
test-deps: venv
	PYTHON=$(BIN)/python tools/install_test_deps.sh all

test-long: venv
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m long

ui: venv
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

demo-ui: venv
	SLM4IE_EXTRACT_CONFIG=$(CURDIR)/examples/extract.yaml $(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

daemon: venv
	DAGSTER_HOME=$(CURDIR) $(BIN)/dagster-daemon run -w workspace.yaml

bench: venv
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .dagster .tmp_dagster_home_* data/extracted examples/data/extracted
