# Two commands on a fresh machine: `make demo` and `make test`. Both (re)build .venv only when
# pyproject.toml changed, so they are fast the second time.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test test-long ui daemon bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@# `dagster asset materialize --select extracted/kas` finds a code location only through -m/-f or
	@# DAGSTER_MODULE_NAME; this start-up line gives every process of the venv that default.
	$(BIN)/python -c "import site, pathlib; p = pathlib.Path(site.getsitepackages()[0]) / 'slm4ie_dagster_module.pth'; p.write_text('import os; os.environ.setdefault(\"DAGSTER_MODULE_NAME\", \"slm4ie_assets.definitions\")\n')"
	@touch $(STAMP)

demo: venv
	SLM4IE_EXTRACT_CONFIG=examples/extract.yaml $(BIN)/python -m examples.demo

test: venv
	$(BIN)/python -m pytest -q

test-long: venv
	$(BIN)/python -m pytest -q -m long

ui: venv
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

daemon: venv
	DAGSTER_HOME=$(CURDIR) $(BIN)/dagster-daemon run -w workspace.yaml

bench: venv
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .dagster .tmp_dagster_home_* data/extracted examples/data/extracted
