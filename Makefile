# Two commands on a fresh machine: `make demo` and `make test`. Both install exactly what uv.lock
# pins (every package, direct and indirect) into .venv, and rebuild it only when pyproject.toml or
# uv.lock changed, so they are fast the second time. They need only python3 and make: uv itself is
# bootstrapped from PyPI, at the version below, into .uv/ (README, "Installing: the lock").
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
UV_VERSION := 0.13.9
UV := .uv/bin/uv
EXTRAS := --all-extras
# uv never downloads an interpreter of its own here: the venv uses $(PYTHON)
export UV_PYTHON_DOWNLOADS := never

.PHONY: venv demo demo-ui home lint lock schema test test-deps test-long test-newest test-xml-newest ui daemon bench bench-scaling bench-unpack bench-bucket clean slurm-up slurm-down s3-up s3-down

venv: $(STAMP)

$(UV):
	@# the grep only hides this machine's notes about absent local package indexes
	set -o pipefail; { test -x .uv/bin/python || $(PYTHON) -m venv .uv; } && \
	  .uv/bin/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION) 2>&1 | \
	  { grep -v "is ignored: it is neither" || true; }

# --locked: fail loudly when pyproject.toml and uv.lock disagree (run `make lock`), never re-resolve
$(STAMP): pyproject.toml uv.lock tools/slm4ie_dagster_module.pth | $(UV)
	$(UV) sync --locked $(EXTRAS) --python $(PYTHON) --quiet
	@# `dagster asset materialize --select extracted/kas` finds a code location only through -m/-f or
	@# DAGSTER_MODULE_NAME: this start-up line supplies the default to `dagster asset|job ...` alone
	@# (never to `dagster dev -w`, which would then see two targets).
	cp tools/slm4ie_dagster_module.pth "$$($(BIN)/python -c 'import site; print(site.getsitepackages()[0])')/"
	@touch $(STAMP)

# Re-resolve after editing pyproject.toml: keeps every pin that still fits. UPGRADE=1 moves every
# package to the newest release the constraints allow; `make test` (and its output-hash test) then
# shows what that changed.
lock: $(UV)
	$(UV) lock $(if $(UPGRADE),--upgrade,)

demo: venv
	$(BIN)/python examples/demo.py

# Style and types first: they take seconds, the suite takes minutes. Versions and rules: pyproject.toml.
lint: venv
	$(BIN)/ruff check slm4ie_assets tests bench examples tools
	$(BIN)/mypy slm4ie_assets
	$(BIN)/python -m slm4ie_assets.catalog.json_schema --check

# schemas/extract.schema.json is generated from slm4ie_assets/catalog/fields.py and the extractor
# registry: rewrite it after changing either (lint and tests/core/test_catalog_schema.py refuse a stale one).
schema: venv
	$(BIN)/python -m slm4ie_assets.catalog.json_schema

# Three pytest processes (pytest-xdist; a test module stays in one, so its fixtures are set up once):
# most of the slow tests wait on subprocesses, daemons and polls. Four were slower on 2 cores (each
# test took ~1.4x as long: 956 s against ~700 s for the suite in a fresh-clone CI run).
test: lint
	$(BIN)/python -m pytest -q -n 3 --dist loadfile

# Debian's chromium and postgresql for the browser and Postgres tests (they install these themselves
# when missing; CI calls this first so an install failure shows up on its own).
test-deps: venv
	PYTHON=$(BIN)/python tools/install_test_deps.sh all

# A Slurm cluster on this machine for tests/slurm/ (as root, from Debian's slurm-wlm, which
# `make test-deps` installs): nodes `small` (1 CPU) and `big` (2 CPUs). Quick when already up;
# slurm-down stops every daemon slurm-up started. .ci/run brackets the suite with them.
slurm-up:
	deploy/slurm/one-node-cluster.sh start

slurm-down:
	deploy/slurm/one-node-cluster.sh stop

# A local S3 API server (moto's, from .venv) on 127.0.0.1:$(S3_PORT) for the object-store tests;
# without it, they start one of their own per session. .ci/run brackets the suite with these too.
S3_PORT ?= 9555
s3-up: venv
	S3_PORT=$(S3_PORT) deploy/s3/local-s3.sh start

s3-down:
	S3_PORT=$(S3_PORT) deploy/s3/local-s3.sh stop

# For maintainers, not CI: a throwaway venv with the newest releases pyproject.toml allows (not
# the lock), then the whole suite. Green means `make lock UPGRADE=1` is safe to commit.
test-newest: $(UV)
	tools/newest_env.sh full

# CI: the XML extractor and hostile-input tests again under the newest lxml the index serves, in a
# small second venv (everything else as locked), so a release that changes error delivery fails CI.
test-xml-newest: venv
	tools/newest_env.sh xml

test-long: venv
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m long

ui: venv
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

demo-ui: venv
	SLM4IE_EXTRACT_CONFIG=$(CURDIR)/examples/extract.yaml $(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

# An instance directory of your own with the project's settings (queue, pool, loggers, telemetry off;
# deploy/dagster.instance.yaml): `make home DAGSTER_HOME=/abs/dir`. An existing different
# dagster.yaml there is kept unless FORCE=1.
home:
	@case "$(DAGSTER_HOME)" in /*) ;; *) echo "make home: set DAGSTER_HOME to an absolute path (make home DAGSTER_HOME=/abs/dir)" >&2; exit 2;; esac
	@mkdir -p "$(DAGSTER_HOME)"
	@if [ -e "$(DAGSTER_HOME)/dagster.yaml" ] && ! cmp -s deploy/dagster.instance.yaml "$(DAGSTER_HOME)/dagster.yaml" && [ -z "$(FORCE)" ]; then \
	  echo "make home: $(DAGSTER_HOME)/dagster.yaml exists and differs; kept (FORCE=1 replaces it)" >&2; exit 1; fi
	cp deploy/dagster.instance.yaml "$(DAGSTER_HOME)/dagster.yaml"
	@echo "DAGSTER_HOME=$(DAGSTER_HOME) now has the project's instance settings"

daemon: venv
	DAGSTER_HOME=$(CURDIR) $(BIN)/dagster-daemon run -w workspace.yaml

bench: venv
	$(BIN)/python -m bench.run
	$(BIN)/python -m bench.bucket

# slm4ie extract, folder to folder against bucket to bucket on its own moto server (text, conllu,
# jsonl; 50 + 20 + 20 MB, 3 runs each: about 2 minutes on 2 cores); docs/performance.md, "Object stores"
bench-bucket: venv
	$(BIN)/python -m bench.bucket

bench-scaling: venv
	$(BIN)/python -m bench.scaling

# one 400 MB archive (.gz, .zst, .xz) unpacked by the one-thread routes of before and by today's decoders
bench-unpack: venv
	$(BIN)/python -m bench.unpack

clean:
	rm -rf $(VENV) .uv .venv-newest .dagster .tmp_dagster_home_* data/extracted examples/data/extracted
