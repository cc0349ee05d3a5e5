"""What the UI and `dg list defs` show people: descriptions are one sentence in plain words, with no
internal rule codes (D5, ADDENDUM 2.1) and no paths (those live in docs/ and in the metadata); the
preview keeps each document apart from its "line N of" note; sidecar_path is named only when a
sidecar exists. Real definitions and a real run on a temp instance."""

import re
import subprocess

from dagster import AssetKey, AssetSelection

from slm4ie_assets.dagster_layer.assets import extracted_key
from slm4ie_assets.dagster_layer.column_schemas import DOCUMENT_SCHEMA, SIDECAR_SCHEMA
from support.dagster_cli import dagster_env
from support.dagster_project import DagsterProject, output_metadata
from support.files import write_files
from support.paths import REPO, VENV_BIN

CODE = re.compile(r"\b(D\d{1,2}|S\d{1,2}|ADDENDUM|DAGSTER_NOTES)\b|\.py\b")
# the third key is as long as the longest in the project's catalog: its asset keys set the width
# `dg list defs` leaves the description at 80 columns
DATASETS = {"kas": {"extractor": "text", "domain": "academic", "schedule": "0 3 * * *"},
            "web": {"extractor": "jsonl", "domain": "web"},
            "povejmo_vemo_med": {"extractor": "text", "domain": "medical"}}


def project(tmp_path) -> DagsterProject:
    write_files(tmp_path / "raw" / "kas", {"a.txt": "Prvi odstavek\nz dvema vrsticama.\n\nDrugi.\n"})
    write_files(tmp_path / "raw" / "web", {"a.jsonl": '{"doc_id": "w1", "text": "Dober dan."}\n'})
    write_files(tmp_path / "raw" / "povejmo_vemo_med", {"a.txt": "Zdravo.\n"})
    return DagsterProject(tmp_path, DATASETS)


def descriptions(p: DagsterProject) -> dict[str, str]:
    found = {}
    for a in p.defs.assets:
        for spec in a.specs:
            found[spec.key.to_user_string()] = spec.description or ""
    for checks in p.defs.asset_checks:
        for spec in checks.check_specs:
            found[f"check {spec.name}"] = spec.description or ""
    for s in [*p.defs.sensors, *p.defs.schedules]:
        found[s.name] = s.description or ""
    for schema, table in (("text", DOCUMENT_SCHEMA), ("sidecar", SIDECAR_SCHEMA)):
        for column in table.columns:
            found[f"{schema} column {column.name}"] = column.description or ""
    return found


def test_descriptions_are_one_plain_line_without_codes_or_paths(tmp_path):
    p = project(tmp_path)
    found = descriptions(p)
    assert {"extracted/kas", "shards/kas", "raw/kas", "raw_kas_sensor", "reextract_kas_schedule"} <= found.keys()
    for name, text in found.items():
        assert "\n" not in text, (name, text)
        assert not CODE.search(text), (name, text)
        assert str(tmp_path) not in text and "/raw" not in text, (name, text)
    assert "may repeat" in found["text column doc_id"] and "unique within" not in found["text column doc_id"]
    # a sentence each (the asset page's "Description"), under the 100 characters dg list defs prints
    for key in ("extracted/kas", "shards/kas", "raw/kas"):
        assert 60 <= len(found[key]) <= 100 and found[key].count(" ") >= 8, (key, found[key])
    # the longer explanation, with the dataset's names, is its `about` metadata entry
    for key in ("extracted/kas", "shards/kas", "raw/kas"):
        about = p.defs.resolve_assets_def(AssetKey.from_user_string(key)).metadata_by_key[
            AssetKey.from_user_string(key)]["about"]
        assert "kas" in about and about != found[key], (key, about)


def test_check_results_and_the_preview_read_as_plain_text(tmp_path, instance):
    p = project(tmp_path)
    run = p.materialize(instance, AssetSelection.assets(extracted_key("kas"), extracted_key("web")))
    for ev in run.all_events:
        if ev.event_type_value == "ASSET_CHECK_EVALUATION":
            text = ev.event_specific_data.description or ""
            assert not CODE.search(text) and str(tmp_path) not in text, text
    md = output_metadata(run, extracted_key("kas"))
    assert "sidecar_path" not in md  # no annotations: nothing to link
    preview = md["preview"]
    assert "<br>" not in preview
    # each document's text ends its paragraph; its "line N of" note is a paragraph of its own
    assert re.search(r"- \*\*a:000000\*\*: Prvi odstavek ⏎ z dvema vrsticama\.\n\n  line 1 of kas\.jsonl", preview), \
        preview
    definition = {k: v for k, v in p.defs.resolve_assets_def(extracted_key("kas")).metadata_by_key[
        extracted_key("kas")].items()}
    assert "sidecar_path" not in definition and "text_path" in definition


def test_dg_list_defs_shows_each_asset_description_whole_in_80_columns(tmp_path):
    """At 80 columns dg squeezes every column but the key to a few letters; with `--columns key,description`
    (README) each asset's sentence shows whole, wrapped, never cut with "…"."""
    p = project(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    env = dagster_env(p.config, home, COLUMNS="80")
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env["VIRTUAL_ENV"] = str(VENV_BIN.parent)
    env["PATH"] = f"{VENV_BIN}:{env['PATH']}"
    res = subprocess.run([str(VENV_BIN / "dg"), "list", "defs", "--columns", "key,description"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80 and str(tmp_path) not in res.stdout
    wanted = descriptions(p)
    starts = [i for i, line in enumerate(lines) if re.match(r"│ +│ │ (extracted|shards|raw)/\w+ ", line)]
    assert len(starts) == 3 * len(DATASETS), lines
    for i in starts:
        key = lines[i].split("│")[3].strip()
        height = next(n for n, line in enumerate(lines[i:], 1) if re.match(r"│ +│ [├└]", line)) - 1
        cells = " ".join(line.split("│")[-3].strip() for line in lines[i:i + height])
        assert cells == wanted[key] and "…" not in cells, (key, cells)
