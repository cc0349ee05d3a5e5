"""Write `schemas/extract.schema.json` from the catalog's field table and the extractor registry.

`make schema` (`python -m slm4ie_assets.catalog.json_schema`) regenerates it; `--check` exits 1 when the
committed file differs, and a test does the same. An extractor's `metadata:` branch follows its
`metadata_keys`, so a new format appears here without an edit: with no keys it takes no block, with
keys of a known shape it gets that shape, with other keys it gets exactly those keys, untyped.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..extractors.registry import EXTRACTORS, get_extractor_class
from . import fields

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "extract.schema.json"
REGENERATE = "make schema (or: python -m slm4ie_assets.catalog.json_schema)"

_TSV_SIDECAR = {
    "type": "object",
    "additionalProperties": False,
    "required": ["path", "key_column", "fields"],
    "properties": {
        "path": {"description": "Relative to raw/<key>/.", "type": "string", "minLength": 1},
        "key_column": {"description": "The TSV column matched against each file's key.", "type": "string",
                       "minLength": 1},
        "key_from": {"enum": ["filename_stem", None]},
        "key_pattern": {"description": "A regular expression whose first group is the key.",
                        "type": ["string", "null"]},
        "fields": {"description": "TSV column -> metadata name.", "type": "object",
                   "propertyNames": {"minLength": 1}, "additionalProperties": {"type": "string", "minLength": 1}},
        "splits": {"description": "TSV column (one listed in fields) -> separator that splits its value into a list.",
                   "type": ["object", "null"], "propertyNames": {"minLength": 1},
                   "additionalProperties": {"type": "string"}},
    },
}
# the `metadata:` shapes the formats share, by the keys they read: (name in $defs, words, schema)
KNOWN_SHAPES: dict[frozenset, tuple[str, str, dict]] = {
    frozenset({"text_field", "id_field", "metadata_fields"}): ("field_mapping", "a field mapping", {
        "description": "Which record fields hold the text and the id, and which to keep as metadata.",
        "type": ["object", "null"],
        "additionalProperties": False,
        "properties": {
            "text_field": {"description": "Default text.", "type": "string", "minLength": 1},
            "id_field": {"description": "Default doc_id.", "type": "string", "minLength": 1},
            "metadata_fields": {
                "description": "Keep only these record fields as metadata (default: every field except text, id, "
                               "paragraphs, conll).",
                "type": ["array", "null"], "items": {"type": "string"}},
        }}),
    frozenset({"path", "key_column", "key_from", "key_pattern", "fields", "splits"}): ("tsv_sidecar", "a TSV sidecar", {
        "description": "An external TSV of per-file metadata (ADDENDUM 5.4): null or {} means none; any other "
                       "block must be complete.",
        "anyOf": [{"type": "null"}, {"type": "object", "maxProperties": 0}, _TSV_SIDECAR]}),
}
NO_METADATA = ("no_metadata", "", {
    "description": "This extractor takes no metadata block: leave it out (null and {} are accepted, as saying "
                   "nothing).",
    "anyOf": [{"type": "null"}, {"type": "object", "maxProperties": 0}]})
Shape = tuple[str, str, dict, list[str]]  # name in $defs, words for the description, schema, extractors


def _shape_of(name: str, keys: tuple[str, ...]) -> tuple[str, str, dict]:
    if not keys:
        return NO_METADATA
    if frozenset(keys) in KNOWN_SHAPES:
        return KNOWN_SHAPES[frozenset(keys)]
    return f"{name}_metadata", f"its own keys for {name}", {
        "description": f"The {name} extractor's settings.", "type": ["object", "null"],
        "additionalProperties": False, "properties": {k: {} for k in keys}}


def metadata_shapes() -> list[Shape]:
    """One entry per `metadata:` shape with the extractors that take it; no block last."""
    groups: dict[str, Shape] = {}
    for name in sorted(EXTRACTORS):
        ref, words, schema = _shape_of(name, tuple(get_extractor_class(name).metadata_keys))
        groups.setdefault(ref, (ref, words, schema, []))[3].append(name)
    rank = {shape[0]: i for i, shape in enumerate(KNOWN_SHAPES.values())}
    return sorted(groups.values(), key=lambda g: (g[0] == NO_METADATA[0], rank.get(g[0], len(rank)), g[0]))


def _metadata_words(shapes: list[Shape]) -> str:
    parts = [", ".join(f"{words} for {'/'.join(names)}" for _, words, _, names in shapes if words)]
    for ref, _, _, names in shapes:
        if ref == NO_METADATA[0]:
            listed = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
            parts.append(f"{listed} take{'s' if len(names) == 1 else ''} none (a block there is an error, D23)")
    return "Extractor-specific settings: " + "; ".join(p for p in parts if p) + "."


def _dataset(shapes: list[Shape]) -> dict:
    props: dict[str, Any] = {}
    for setting in fields.DATASET:
        inherited = setting.per_dataset != ""
        props[setting.name] = setting.schema(in_dataset=inherited)
    props["extractor"] = {"description": props["extractor"]["description"], "enum": sorted(EXTRACTORS)}
    props["metadata"] = {"description": _metadata_words(shapes)}
    branches = [{"if": {"properties": {"extractor": {"enum": sorted(names)}}, "required": ["extractor"]},
                 "then": {"properties": {"metadata": {"$ref": f"#/$defs/{ref}"}}}} for ref, _, _, names in shapes]
    return {"type": "object", "additionalProperties": False, "required": ["extractor", "domain"],
            "properties": props, "allOf": branches}


def _top() -> dict:
    props: dict[str, Any] = {}
    for setting in fields.TOP:
        props[setting.name] = setting.schema()
    props["archives"] = {"description": props["archives"]["description"], "type": ["object", "null"],
                         "additionalProperties": False,
                         "properties": {s.name: s.schema() for s in fields.ARCHIVES}}
    props["storage_options"] = {"description": props["storage_options"]["description"], "type": ["object", "null"],
                                "additionalProperties": False,
                                "properties": {s.name: s.schema() for s in fields.STORAGE_OPTIONS}}
    props["datasets"] = {"description": props["datasets"]["description"], "type": ["object", "null"],
                         "propertyNames": {"description": "Letters, digits and underscores only.",
                                           "pattern": f"^{fields.DATASET_KEY_PATTERN}$", "not": {"pattern": "\\n"}},
                         "additionalProperties": {"$ref": "#/$defs/dataset"}}
    return props


def build_schema() -> dict:
    shapes = metadata_shapes()
    defs: dict[str, Any] = {"dataset": _dataset(shapes)}
    defs.update((ref, shape) for ref, _, shape, _ in sorted(shapes, key=lambda g: g[0] != NO_METADATA[0]))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": "Generated by slm4ie_assets/catalog/json_schema.py from catalog/fields.py and the extractor "
                    "registry; do not edit. "
                    f"Regenerate: {REGENERATE}.",
        "title": "slm4ie-assets extraction catalog (extract.yaml)",
        "description": "The shape of extract.yaml, for editor completion and checks. Point an editor at it with a "
                       "first line `# yaml-language-server: $schema=<path to this file>` (the YAML language server "
                       "of VS Code, Neovim, JetBrains...). The loader (slm4ie_assets/catalog/spec.py) checks the same "
                       "rules and more (valid cron strings, readable regular expressions, keys written twice) when "
                       "the code location loads, and names file:line for each problem.",
        "type": ["object", "null"],
        "additionalProperties": False,
        "properties": _top(),
        "$defs": defs,
    }


def render() -> str:
    """The file's exact text: stable key order (the table's), two-space indents, a final newline."""
    return json.dumps(build_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed file differs")
    args = parser.parse_args(argv)
    text = render()
    current = SCHEMA_PATH.read_text(encoding="utf-8") if SCHEMA_PATH.exists() else None
    if args.check:
        if current != text:
            print(f"{SCHEMA_PATH} is out of date; regenerate it: {REGENERATE}", file=sys.stderr)
            return 1
        return 0
    if current != text:
        SCHEMA_PATH.write_text(text, encoding="utf-8")
        print(f"wrote {SCHEMA_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
