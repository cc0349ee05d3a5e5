#!/usr/bin/env bash
# A throwaway venv (.venv-newest) with newer releases than uv.lock pins, then tests in it:
#   xml   (CI, `make test-xml-newest`): everything as locked except lxml, which is the newest release
#         the package index serves; runs the XML extractor and hostile-input tests. A new lxml that
#         changes what our XML readers keep then fails CI instead of changing outputs quietly.
#   full  (maintainers, `make test-newest`): the newest releases pyproject.toml allows, whole suite.
# Needs the bootstrapped uv (.uv/bin/uv, `make venv` or `make lock` makes it).
set -euo pipefail
mode="${1:-}"
case "$mode" in xml|full) ;; *) echo "usage: $0 xml|full" >&2; exit 2 ;; esac
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
uv="$root/.uv/bin/uv"
[[ -x $uv ]] || { echo "newest_env: $uv is missing (run 'make venv' first)" >&2; exit 1; }
export UV_PYTHON_DOWNLOADS=never
env="$root/.venv-newest"
py="$env/bin/python"
rm -rf "$env"
"$uv" venv --quiet --python "${PYTHON:-python3}" "$env"
if [[ $mode == xml ]]; then
    reqs="$(mktemp)"
    trap 'rm -f "$reqs"' EXIT
    "$uv" export --frozen --all-extras --no-hashes --no-emit-project --no-header --quiet | grep -v '^lxml==' >"$reqs"
    "$uv" pip install --quiet --python "$py" -r "$reqs" lxml
    "$uv" pip install --quiet --python "$py" --no-deps -e .
else
    "$uv" pip install --quiet --python "$py" -e '.[test,postgres,ui-test]'
fi
# `dagster asset materialize` finds the code location through this start-up line (Makefile, venv); the
# hostile-input tests run the literal CLI in both modes
cp tools/slm4ie_dagster_module.pth "$("$py" -c 'import site; print(site.getsitepackages()[0])')/"
locked="$(grep -A1 '^name = "lxml"$' uv.lock | sed -n 's/^version = "\(.*\)"/\1/p')"
echo "newest_env ($mode): lxml $("$py" -c 'import lxml.etree as e; print(".".join(map(str, e.LXML_VERSION[:3])), "libxml2", ".".join(map(str, e.LIBXML_VERSION)))') (locked: $locked)"
if [[ $mode == xml ]]; then
    "$py" -m pytest -q -n 2 --dist loadfile -p no:cacheprovider \
        tests/extractors/test_macocu.py tests/extractors/test_split_macocu.py tests/extractors/test_tei.py \
        tests/extractors/test_tei_scan.py tests/extractors/test_tei_morphology.py tests/extractors/test_xml_errors.py \
        tests/reliability/test_hostile_inputs.py tests/reliability/test_xml_external.py
else
    SLM4IE_UNLOCKED=1 "$py" -m pytest -q -n 2 --dist loadfile -p no:cacheprovider
fi
