#!/usr/bin/env bash
# Installs what the UI and Postgres tests need, and nothing when it is all there already:
#   Debian: chromium (a real browser for Playwright) and postgresql (a real server for the
#           Postgres instance storage);
#   Debian, for `slurm`: slurm-wlm and munge (a real Slurm for tests/slurm/; deploy/slurm/
#           one-node-cluster.sh starts a cluster from them, .ci/run does it before the suite);
#   PyPI, into the current venv: playwright (the Python driver only; it never downloads a
#           browser of its own) and dagster-postgres + psycopg2-binary, pinned in lockstep with
#           the installed dagster so pip never moves dagster itself.
# Safe to run repeatedly; prints one line per component. Exits non-zero when something that
# was missing could not be installed (e.g. not root and no sudo), saying what.
#
# Usage: tools/install_test_deps.sh [browser|postgres|slurm|all]   (default all)
#        PYTHON=/path/to/venv/bin/python overrides the interpreter (default: $VIRTUAL_ENV's,
#        else the repo's .venv, else python3).
set -uo pipefail

want="${1:-all}"
case "$want" in browser|postgres|slurm|all) ;; *) echo "usage: $0 [browser|postgres|slurm|all]" >&2; exit 2 ;; esac
root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -n "${VIRTUAL_ENV:-}" && -x "$VIRTUAL_ENV/bin/python" ]]; then PYTHON="$VIRTUAL_ENV/bin/python"
    elif [[ -x "$root/.venv/bin/python" ]]; then PYTHON="$root/.venv/bin/python"
    else PYTHON=python3; fi
fi
status=0
apt_updated=0

as_root() {
    if [[ $(id -u) -eq 0 ]]; then "$@"
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo -n "$@"
    else return 126; fi
}

apt_install() {  # apt_install PACKAGE...: one update per script run, only when something is missing
    if ! command -v apt-get >/dev/null; then echo "  apt-get not found: install $* by hand" >&2; return 1; fi
    if ! as_root true; then echo "  installing $* needs root or passwordless sudo" >&2; return 1; fi
    local log rc=0
    log="$(mktemp)"
    if [[ $apt_updated -eq 0 ]]; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$log" 2>&1 && apt_updated=1 || rc=1
    fi
    if [[ $rc -eq 0 ]]; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >>"$log" 2>&1 || rc=1
    fi
    [[ $rc -eq 0 ]] || { echo "  apt-get failed for $*:" >&2; tail -n 15 "$log" >&2; }
    rm -f "$log"
    return $rc
}

have_deb() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# find_spec, not import: importing dagster_postgres would import all of dagster (seconds)
py_has() { "$PYTHON" -c "import importlib.util as u, sys; sys.exit(u.find_spec('$1') is None)" 2>/dev/null; }

py_version() { "$PYTHON" -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null; }

pip_install() {
    # the grep only hides this machine's notes about absent local package indexes
    "$PYTHON" -m pip install --quiet --disable-pip-version-check "$@" 2>&1 | { grep -v "is ignored: it is neither" || true; }
    return "${PIPESTATUS[0]}"
}

dagster_version() { py_version dagster; }

if [[ $want == browser || $want == all ]]; then
    if have_deb chromium; then echo "chromium: installed ($(dpkg-query -W -f='${Version}' chromium))"
    elif apt_install chromium; then echo "chromium: installed now"
    else echo "chromium: NOT installed (apt-get failed or no root)" >&2; status=1; fi
    if py_has playwright; then echo "playwright: installed ($(py_version playwright))"
    elif pip_install "playwright>=1.55,<2"; then echo "playwright: installed now (driver only; the browser is Debian's chromium)"
    else echo "playwright: NOT installed (pip failed)" >&2; status=1; fi
fi

if [[ $want == postgres || $want == all ]]; then
    if have_deb postgresql && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
        echo "postgresql: installed ($(ls -d /usr/lib/postgresql/*/ | xargs -n1 basename | paste -sd' '))"
    elif apt_install postgresql; then echo "postgresql: installed now"
    else echo "postgresql: NOT installed (apt-get failed or no root)" >&2; status=1; fi
    if py_has dagster_postgres && py_has psycopg2; then
        echo "dagster-postgres: installed ($(py_version dagster-postgres))"
    else
        # dagster-postgres is versioned in lockstep: dagster 1.M.P <-> dagster-postgres 0.(M+16).P
        dv="$(dagster_version)" || { echo "dagster-postgres: dagster is not importable with $PYTHON" >&2; exit 1; }
        IFS=. read -r major minor patch <<<"$dv"
        lib="0.$((minor + 16)).$patch"
        if pip_install "dagster-postgres==$lib" "dagster==$dv" "psycopg2-binary>=2.9"; then
            echo "dagster-postgres: installed now ($lib for dagster $dv, with psycopg2-binary)"
        else echo "dagster-postgres: NOT installed (pip failed for dagster-postgres==$lib)" >&2; status=1; fi
    fi
fi
if [[ $want == slurm || $want == all ]]; then
    if have_deb slurm-wlm && have_deb munge; then
        echo "slurm-wlm: installed ($(dpkg-query -W -f='${Version}' slurm-wlm)), munge too"
    elif apt_install slurm-wlm munge; then echo "slurm-wlm: installed now, with munge"
    else echo "slurm-wlm: NOT installed (apt-get failed or no root)" >&2; status=1; fi
fi
exit $status
