"""Property-based fuzzing of every extractor through the plain pipeline (docs/guarantees.md 3; D1, D6, D7, D11,
ADDENDUM 2.1, 2.2, 5.2, 6.2).

For each extractor, hypothesis generates inputs from the format's grammar and mutates their bytes
(flips, insertions, deletions, duplications, truncation). Each example is a whole dataset run by
`pipeline.extract_dataset`, and must:
- never raise (a bad input is the ledger's business, never the run's);
- publish valid JSON lines (RFC 8259: no NaN, valid UTF-8) in the schema's key order, every text a
  non-blank string and every uid `<source>:<doc_id>`;
- publish a sidecar line-aligned with the text (same count, same doc_id and uid per line), whose
  arrays are parallel and whose sentence spans are inclusive, ordered and in range;
- account for every skip: the ledger's counts equal the reasons named by the warnings, and every
  warning names the dataset and an input file;
- for CoNLL-U without `# text` and for annotated TEI: the document text is exactly the text rebuilt
  from forms and `space_after`, sentence by sentence.

The normal suite runs a few derandomized examples per strategy; `make test-long` runs many more with
a recorded seed (`SLM4IE_FUZZ_SEED` replays one). Runs happen on /dev/shm when it exists (fsync is
free there), so examples are cheap.
"""

import json
import multiprocessing
import os
import re
import shutil
import tempfile
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset
from slm4ie_assets.schema import sentence_text
from support.files import write_config

NS = 'xmlns="http://www.tei-c.org/ns/1.0"'
TEXT_KEYS = ("text", "source", "domain", "doc_id", "uid", "metadata")
SIDECAR_KEYS = ["doc_id", "uid", "forms", "lemmas", "upos", "feats", "space_after", "sentences"]
REASON = re.compile(r" \[([a-z0-9_]+)\]$")
NORMAL_EXAMPLES = 40
LONG_EXAMPLES = 400
LONG_SEED = int(os.environ.get("SLM4IE_FUZZ_SEED", 20261129))


@contextmanager
def workspace():
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="slm4ie-fuzz-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# ----------------------------------------------------------------------------- checking one run


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON (RFC 8259)")


def strict_lines(data: bytes) -> list:
    assert data == b"" or data.endswith(b"\n"), "a line without its newline"
    return [json.loads(line.decode("utf-8"), parse_constant=_reject_constant) for line in data.split(b"\n")[:-1]]


def check_run(root: Path, key: str, report, rebuilt_text: bool = False) -> list:
    """Every property of the module docstring for one published dataset; returns the text records."""
    out = root / "out"
    records = strict_lines((out / f"{key}.jsonl").read_bytes())
    for rec in records:
        keys = list(rec)
        assert keys == [k for k in TEXT_KEYS if k in rec] and keys[:5] == list(TEXT_KEYS[:5]), keys
        assert isinstance(rec["text"], str) and rec["text"].strip(), rec
        assert isinstance(rec["doc_id"], str) and rec["doc_id"].strip(), rec
        assert rec["source"] == key and rec["uid"] == f"{key}:{rec['doc_id']}", rec
        assert "metadata" not in rec or (isinstance(rec["metadata"], dict) and rec["metadata"]), rec
    manifest = report.manifest
    assert manifest.docs == len(records)
    side_path = out / f"{key}.annotations.jsonl.gz"
    if side_path.exists():
        import gzip

        side = strict_lines(gzip.decompress(side_path.read_bytes()))
        assert len(side) == len(records), "sidecar not line-aligned"
        for rec, ann in zip(records, side, strict=True):
            assert (ann["doc_id"], ann["uid"]) == (rec["doc_id"], rec["uid"])
            if len(ann) == 2:
                continue  # a stub
            assert list(ann) == SIDECAR_KEYS, list(ann)
            n = len(ann["forms"])
            assert n and all(len(ann[k]) == n for k in SIDECAR_KEYS[2:7]), ann
            assert all(isinstance(b, bool) for b in ann["space_after"])
            previous = -1
            for start, end in ann["sentences"]:
                assert previous < start <= end < n, ann["sentences"]
                previous = end
            if rebuilt_text:
                rebuilt = "\n".join(sentence_text(ann["forms"], ann["space_after"], s, e + 1)
                                    for s, e in ann["sentences"])
                assert rebuilt == rec["text"], (rebuilt, rec["text"])
    else:
        assert not manifest.has_sidecar
    drops = manifest.drops
    assert all(re.fullmatch(r"[a-z0-9_]+", k) and isinstance(v, int) and v > 0 for k, v in drops.items()), drops
    named = Counter()
    for warning in report.warnings:
        assert warning.startswith(f"{key}/"), warning
        m = REASON.search(warning)
        if m:
            named[m.group(1)] += 1
    if sum(drops.values()) < 100:  # each file keeps the warnings of its first 100 drops (DropLedger)
        assert named == Counter(drops), (named, drops)
    else:
        assert set(named) <= set(drops)
    return records


def run_dataset(root: Path, extractor: str, files: dict, key: str = "k", metadata=None):
    raw = root / "raw" / key
    for rel, data in files.items():
        p = raw / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    raw.mkdir(parents=True, exist_ok=True)
    entry = {"extractor": extractor, "domain": "fuzz"}
    if metadata is not None:
        entry["metadata"] = metadata
    cat = load_catalog(write_config(root, {key: entry}))
    return extract_dataset(cat.dataset(key), cat, workers=1)


# ----------------------------------------------------------------------------- mutation


MUTATION = st.tuples(st.sampled_from(["flip", "insert", "delete", "duplicate", "truncate", "splice_bom",
                                      "splice_invalid"]),
                     st.floats(0, 1), st.floats(0, 1), st.binary(min_size=1, max_size=8))


def mutate(data: bytes, ops: list) -> bytes:
    for kind, a, b, payload in ops:
        n = len(data)
        i = int(a * n)
        j = min(n, i + 1 + int(b * 64))
        if kind == "flip" and n:
            i = min(i, n - 1)
            data = data[:i] + bytes([data[i] ^ (1 << int(b * 7.99))]) + data[i + 1:]
        elif kind == "insert":
            data = data[:i] + payload + data[i:]
        elif kind == "delete":
            data = data[:i] + data[j:]
        elif kind == "duplicate":
            data = data[:j] + data[i:j] + data[j:]
        elif kind == "truncate":
            data = data[:i]
        elif kind == "splice_bom":
            data = data[:i] + b"\xef\xbb\xbf" + data[i:]
        else:
            data = data[:i] + b"\xff\xfe\xc3" + data[i:]
    return data


def mutated(files: st.SearchStrategy) -> st.SearchStrategy:
    """Some files of a generated dataset, their bytes mutated."""
    return st.tuples(files, st.lists(st.lists(MUTATION, min_size=1, max_size=4), min_size=1, max_size=3)).map(
        lambda t: {rel: (mutate(data, t[1][i % len(t[1])]) if i % 2 == 0 else data)
                   for i, (rel, data) in enumerate(sorted(t[0].items()))})


# ----------------------------------------------------------------------------- grammars

WORD = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Cn", "Co"), blacklist_characters="<>&\t\n\r\x85"),
               min_size=1, max_size=8)
JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12))
JSON_VALUE = st.recursive(JSON_SCALAR, lambda ch: st.one_of(st.lists(ch, max_size=3),
                                                            st.dictionaries(st.text(max_size=4), ch, max_size=3)),
                          max_leaves=6)
NEWLINES = st.sampled_from(["\n", "\r\n", "\r"])
ODD_TEXT = st.sampled_from(["", " ", "\t", "\u00a0", "\u2028", "\ufeff", "\x0c", "_", "\\ud800", "NaN", "ž"])


def text_files() -> st.SearchStrategy:
    line = st.one_of(st.text(max_size=30), ODD_TEXT)
    body = st.tuples(st.lists(line, max_size=20), NEWLINES, st.booleans()).map(
        lambda t: (("\ufeff" if t[2] else "") + t[1].join(t[0])).encode("utf-8", "surrogatepass"))
    return st.dictionaries(st.sampled_from(["a.txt", "b/c.txt", ".h.txt", "d.e.txt"]), body, min_size=1, max_size=3)


def _token():
    return st.fixed_dictionaries({"form": st.one_of(WORD, JSON_SCALAR)},
                                 optional={"lemma": JSON_SCALAR, "upos": st.one_of(WORD, st.none()),
                                           "feats": JSON_SCALAR, "space_after": JSON_SCALAR, "misc": JSON_SCALAR})


def _paragraphs():
    sentence = st.fixed_dictionaries({}, optional={"tokens": st.one_of(st.lists(_token(), max_size=5), JSON_SCALAR)})
    para = st.fixed_dictionaries({}, optional={"sentences": st.one_of(st.lists(sentence, max_size=3), JSON_SCALAR)})
    return st.one_of(st.lists(para, max_size=3), JSON_VALUE)


def _record(text_fields=("text",), id_fields=("doc_id",)):
    text = st.one_of(st.text(max_size=20), ODD_TEXT, JSON_VALUE)
    fields = {f: text for f in text_fields}
    fields.update({f: st.one_of(st.text(max_size=6), st.integers(), JSON_VALUE) for f in id_fields})
    fields["paragraphs"] = _paragraphs()
    fields["extra"] = JSON_VALUE
    return st.fixed_dictionaries({}, optional=fields)


def _json_line(value) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=True)


def jsonl_files(text_fields=("text",), id_fields=("doc_id",), names=("a.jsonl", "sub/b.jsonl")) -> st.SearchStrategy:
    item = st.one_of(_record(text_fields, id_fields).map(_json_line), JSON_VALUE.map(_json_line),
                     st.sampled_from(["", "   ", "{", "[1, 2]", '{"text": "\\ud800x"}', '{"text": NaN}',
                                      '{"text": "a", "doc_id": 123456789012345678901234567890}']))
    body = st.tuples(st.lists(item, max_size=12), NEWLINES, st.booleans()).map(
        lambda t: (("\ufeff" if t[2] else "") + t[1].join(t[0]) + "\n").encode("utf-8", "surrogatepass"))
    return st.dictionaries(st.sampled_from(list(names)), body, min_size=1, max_size=2)


def json_files() -> st.SearchStrategy:
    top = st.one_of(st.lists(st.one_of(_record(), JSON_VALUE), max_size=8), _record(), JSON_VALUE)
    return st.dictionaries(st.sampled_from(["a.json", "x/b.json"]), top.map(lambda v: _json_line(v).encode()),
                           min_size=1, max_size=2)


COLESLAW_TEXT = ("text", "fullText", "jedro", "izrek", "obrazlozitev", "skodni_dogodek", "poskodba", "strah")


def coleslaw_files() -> st.SearchStrategy:
    return jsonl_files(COLESLAW_TEXT + ("subcorpus",), ("doc_id", "id"),
                       names=("PISRS/a.jsonl", "SodnaPraksa/b.jsonl", "top.jsonl"))


def _conllu_sentence(text_comments: bool):
    misc = st.sampled_from(["_", "SpaceAfter=No", "X=1|SpaceAfter=No", "SpaceAfter=Nope", "SpaceAfter=No|Y=2"])
    col = st.one_of(WORD, st.just("_"))
    token = st.tuples(WORD, col, col, col, misc)
    comment = st.one_of(st.builds(lambda w: f"# newdoc id = {w}", WORD),
                        st.builds(lambda a, b: f"# sent_id = {a}.{b}", WORD, WORD),
                        st.just("# newdoc"), st.just("# comment"))
    if text_comments:
        comment = st.one_of(comment, st.builds(lambda w: f"# text = {w}", WORD))
    return st.tuples(st.lists(comment, max_size=2), st.lists(token, min_size=0, max_size=6), st.booleans())


def _conllu_file(sentences, newline: str) -> bytes:
    lines = []
    for comments, tokens, multiword in sentences:
        lines.extend(comments)
        for i, (form, lemma, upos, feats, misc) in enumerate(tokens, 1):
            if multiword and i == 1 and len(tokens) > 1:
                lines.append(f"1-2\t{form}{form}\t_\t_\t_\t_\t_\t_\t_\t_")
            lines.append(f"{i}\t{form}\t{lemma}\t{upos}\tX\t{feats}\t0\tdep\t_\t{misc}")
        lines.append("")
    return newline.join(lines).encode("utf-8")


def conllu_files(text_comments: bool) -> st.SearchStrategy:
    body = st.tuples(st.lists(_conllu_sentence(text_comments), max_size=8), NEWLINES).map(lambda t: _conllu_file(*t))
    return st.dictionaries(st.sampled_from(["a.conllu", "b.conll", "s/c.conllu"]), body, min_size=1, max_size=2)


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _tei_token():
    join = st.sampled_from([None, "right", "left", "both", "natural"])
    kind = st.sampled_from(["w", "pc", "w_name"])
    return st.tuples(kind, WORD, join, st.one_of(st.none(), WORD), st.sampled_from([None, "UPosTag=NOUN|Case=Nom",
                                                                                     "Case=Nom", ""]))


def _tei_tokens(tokens) -> str:
    out = []
    for kind, form, join, lemma, msd in tokens:
        attrs = "".join(f' {k}="{_xml(v)}"' for k, v in (("join", join), ("lemma", lemma), ("msd", msd))
                        if v is not None)
        tag = "pc" if kind == "pc" else "w"
        el = f"<{tag}{attrs}>{_xml(form)}</{tag}>"
        out.append(f"<name>{el}</name>" if kind == "w_name" else el)
    return "".join(out)


def tei_files() -> st.SearchStrategy:
    sentences = st.lists(st.lists(_tei_token(), max_size=5), min_size=1, max_size=3)
    per_file = sentences.map(lambda ss: "<p>" + "".join(f"<s>{_tei_tokens(t)}</s>" for t in ss) + "</p>")
    utterances = st.lists(st.tuples(st.one_of(st.none(), st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)),
                                    sentences), min_size=1, max_size=3).map(
        lambda us: "".join(f'<u{f" xml:id={chr(34)}{i}{chr(34)}" if i else ""}><seg>'
                           + "".join(f"<s>{_tei_tokens(t)}</s>" for t in ss) + "</seg></u>" for i, ss in us))
    plain = st.lists(st.tuples(st.one_of(st.none(), st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)),
                               st.lists(WORD, max_size=4)), max_size=4).map(
        lambda ps: "".join(f'<p{f" xml:id={chr(34)}{i}{chr(34)}" if i else ""}>{_xml(" ".join(ws))}</p>'
                           for i, ws in ps))
    body = st.one_of(per_file, utterances, plain).map(
        lambda b: f'<?xml version="1.0" encoding="UTF-8"?>\n<TEI {NS}><text><body>{b}</body></text></TEI>\n'.encode())
    return st.dictionaries(st.sampled_from(["a.xml", "b.xml", "d/c.xml"]), body, min_size=1, max_size=3)


def macocu_files() -> st.SearchStrategy:
    attrs = st.dictionaries(st.sampled_from(["id", "title", "url", "lm_score", "crawl_date", "other"]), WORD,
                            max_size=4)
    doc = st.tuples(attrs, st.lists(st.lists(WORD, max_size=4), max_size=3)).map(
        lambda t: "<doc" + "".join(f' {k}="{_xml(v)}"' for k, v in t[0].items()) + ">"
                  + "".join(f"<p>{_xml(' '.join(ws))}</p>" for ws in t[1]) + "</doc>")
    body = st.lists(doc, max_size=5).map(lambda ds: ("<corpus>" + "\n".join(ds) + "</corpus>\n").encode())
    return st.dictionaries(st.sampled_from(["a.xml", "s/b.xml"]), body, min_size=1, max_size=2)


# ----------------------------------------------------------------------------- the properties, per extractor


CASES = {  # extractor: (input files, its `metadata:` block)
    "text": (text_files(), None),
    "jsonl": (jsonl_files(), {"metadata_fields": ["extra", "doc_id"]}),
    "json": (json_files(), None),
    "coleslaw": (coleslaw_files(), None),
    "conllu": (conllu_files(text_comments=True), None),
    "tei": (tei_files(), None),
    "macocu": (macocu_files(), None),
}
ROUND_TRIP = {"conllu": conllu_files(text_comments=False), "tei": tei_files()}
FUZZ_SETTINGS = dict(deadline=None, database=None, print_blob=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                            HealthCheck.filter_too_much, HealthCheck.large_base_example])


def fuzz(extractor: str, strategy: st.SearchStrategy, examples: int, long_seed: int | None, rebuilt: bool = False,
         metadata=None) -> None:
    @settings(max_examples=examples, derandomize=long_seed is None, **FUZZ_SETTINGS)
    @given(files=strategy)
    def one(files):
        with workspace() as root:
            report = run_dataset(root, extractor, files, metadata=metadata)
            check_run(root, "k", report, rebuilt_text=rebuilt)

    if long_seed is not None:
        print(f"\nfuzz {extractor}: seed={long_seed} (replay: SLM4IE_FUZZ_SEED={long_seed})")
        one = seed(long_seed)(one)
    one()


@pytest.mark.parametrize("extractor", sorted(CASES))
def test_generated_inputs_publish_valid_aligned_output_and_a_complete_ledger(extractor):
    strategy, metadata = CASES[extractor]
    fuzz(extractor, strategy, NORMAL_EXAMPLES, None, metadata=metadata)


@pytest.mark.parametrize("extractor", sorted(CASES))
def test_mutated_inputs_never_crash_and_every_skip_is_named(extractor):
    strategy, metadata = CASES[extractor]
    fuzz(extractor, mutated(strategy), NORMAL_EXAMPLES, None, metadata=metadata)


@pytest.mark.parametrize("extractor", sorted(ROUND_TRIP))
def test_text_rebuilt_from_tokens_and_space_after_equals_the_document_text(extractor):
    """ADDENDUM 5.2 / 6.2: without `# text`, a CoNLL-U document's text is its sentences rebuilt from
    the forms and SpaceAfter; a TEI annotated document's text always is."""
    fuzz(extractor, ROUND_TRIP[extractor], NORMAL_EXAMPLES * 2, None, rebuilt=True)


@pytest.mark.long
@pytest.mark.parametrize("extractor", sorted(CASES))
def test_long_generated_and_mutated(extractor):
    strategy, metadata = CASES[extractor]
    fuzz(extractor, strategy, LONG_EXAMPLES, LONG_SEED, metadata=metadata)
    fuzz(extractor, mutated(strategy), LONG_EXAMPLES, LONG_SEED + 1, metadata=metadata)
    if extractor in ROUND_TRIP:
        fuzz(extractor, ROUND_TRIP[extractor], LONG_EXAMPLES, LONG_SEED + 2, rebuilt=True)


# ----------------------------------------------------------------------------- huggingface (in a child process)


def _hf_child(config: str, conn) -> None:
    """Build nothing, just run the pipeline; a crash of pyarrow on corrupt bytes kills only this child."""
    import datasets

    datasets.disable_progress_bars()
    from slm4ie_assets.catalog import load_catalog as load
    from slm4ie_assets.pipeline import extract_dataset as run

    cat = load(config)
    report = run(cat.dataset("k"), cat, workers=1)
    conn.send({"manifest": report.manifest, "warnings": report.warnings})


def _hf_save(root: Path, rows: list, as_dict: bool, ops: list) -> None:
    import datasets

    datasets.disable_progress_bars()
    columns = {"text": [r[0] for r in rows], "id": [r[1] for r in rows], "other": [r[2] for r in rows]}
    features = datasets.Features({"text": datasets.Value("string"), "id": datasets.Value("string"),
                                  "other": datasets.Value("int64")})
    ds = datasets.Dataset.from_dict(columns, features=features)
    target = root / "raw" / "k" / "cfg"
    (datasets.DatasetDict({"train": ds}) if as_dict else ds).save_to_disk(str(target))
    if ops:
        files = sorted(p for p in target.rglob("*") if p.is_file())
        victim = files[int(ops[0][1] * (len(files) - 1))]
        victim.write_bytes(mutate(victim.read_bytes(), ops))


HF_ROWS = st.lists(st.tuples(st.one_of(st.none(), st.text(max_size=10), ODD_TEXT),
                             st.one_of(st.none(), st.text(max_size=5)), st.one_of(st.none(), st.integers(-5, 5))),
                   max_size=8)


def hf_fuzz(examples: int, long_seed: int | None) -> None:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["datasets", "pyarrow", "slm4ie_assets.pipeline",
                                "slm4ie_assets.extractors.huggingface"])

    @settings(max_examples=examples, derandomize=long_seed is None, **FUZZ_SETTINGS)
    @given(rows=HF_ROWS, as_dict=st.booleans(), ops=st.lists(MUTATION, max_size=3))
    def one(rows, as_dict, ops):
        with workspace() as root:
            _hf_save(root, rows, as_dict, ops)
            cfg = write_config(root, {"k": {"extractor": "huggingface", "domain": "fuzz"}})
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_hf_child, args=(str(cfg), child))
            proc.start()
            child.close()
            result = parent.recv() if parent.poll(120) else None
            proc.join(30)
            assert proc.exitcode == 0 and result is not None, f"the run died (exit code {proc.exitcode})"

            class Report:
                manifest = result["manifest"]
                warnings = result["warnings"]

            records = check_run(root, "k", Report)
            if not ops:  # unmutated: every row with a non-blank string text is a document
                assert len(records) == sum(1 for t, _, _ in rows if isinstance(t, str) and t.strip())

    if long_seed is not None:
        print(f"\nfuzz huggingface: seed={long_seed}")
        one = seed(long_seed)(one)
    one()


def test_huggingface_generated_and_corrupted_configs():
    hf_fuzz(5, None)


@pytest.mark.long
def test_huggingface_long():
    hf_fuzz(150, LONG_SEED + 3)


# ----------------------------------------------------------------------------- deep JSON records (D25)
# Records nested around every limit there was (orjson writes 255 levels, reads 1,024; the stdlib's
# limit is the recursion limit less the frames on the stack) and the project's MAX_JSON_DEPTH, holding
# what sends a value to the stdlib (NaN, Infinity, 19+ digits, lone surrogates), under a field that
# is only read (`x`), written (`m`), the id, the text or `paragraphs`. The same bytes, drops and
# warnings must come out unsplit and split, on a deeper stack, and from the CLI and Dagster (issue 39).

DEEP_WHITELIST = "    metadata: {metadata_fields: [doc_id, m]}\n"
DEEP_LEAVES = ("1", "NaN", "Infinity", "-Infinity", "1234567890123456789", "-12345678901234567890123",
               '"\\ud800"', '"a\\udc00"', '"[{\\"}"', "null", "{}", "[]")
DEEP_EDGES = (2, 253, 254, 255, 256, 511, 512, 513, 514, 900, 990, 1000, 1024, 1025)
DEEP_PLACES = ("x", "m", "doc_id", "text", "paragraphs")
DEEP_RECORD = st.tuples(st.one_of(st.sampled_from(DEEP_EDGES), st.integers(1, 1100)), st.sampled_from(DEEP_LEAVES),
                        st.sampled_from(DEEP_PLACES), st.booleans(), st.booleans())


def deep_value(depth: int, leaf: str, objects: bool) -> str:
    """`leaf` inside `depth` levels: arrays, or arrays and objects in turn."""
    opens = ["[" if not objects or i % 2 else '{"k": ' for i in range(depth)]
    return "".join(opens) + leaf + "".join("]" if o == "[" else "}" for o in reversed(opens))


def deep_jsonl(records: list) -> bytes:
    """One line per record (made `depth` deep by its `place` field), each followed by a record with
    neither id nor depth, whose fallback id counts the documents before it."""
    lines = []
    for i, (depth, leaf, place, own_id, objects) in enumerate(records):
        fields = {"text": f'"t{i}"', "doc_id": f'"r{i}"' if own_id else None}
        fields[place] = deep_value(max(0, depth - 1), leaf, objects)
        lines.append("{" + ", ".join(f'"{k}": {v}' for k, v in fields.items() if v is not None) + "}")
        lines.append(f'{{"text": "after {i}"}}')
    return ("\n".join(lines) + "\n").encode()


def deep_differential(tmp_path_factory, examples: int, long_seed: int | None) -> None:
    from support.split_outputs import assert_same, extract

    @settings(max_examples=examples, derandomize=long_seed is None, **FUZZ_SETTINGS)
    @given(records=st.lists(DEEP_RECORD, min_size=1, max_size=10), split=st.integers(300, 6000))
    def check(records, split):
        root = tmp_path_factory.mktemp("deep")
        files = {"a.jsonl": deep_jsonl(records)}
        whole = extract(root / "whole", "jsonl", files, 0, 1, DEEP_WHITELIST)
        deeper = _on_a_deeper_stack(600, lambda: extract(root / "deeper", "jsonl", files, 0, 1, DEEP_WHITELIST))
        assert_same(deeper, whole, "600 more frames on the stack")
        got = extract(root / "split", "jsonl", files, split, 2, DEEP_WHITELIST)
        assert_same(got, whole, f"split_bytes={split}, 2 workers")

    if long_seed is not None:
        print(f"\ndeep json: seed={long_seed} (replay: SLM4IE_FUZZ_SEED={long_seed})")
        check = seed(long_seed)(check)
    check()


def _on_a_deeper_stack(frames: int, call):
    return call() if frames <= 0 else _on_a_deeper_stack(frames - 1, call)


def test_deep_json_records_give_the_same_bytes_split_unsplit_and_on_any_stack(tmp_path_factory):
    deep_differential(tmp_path_factory, 6, None)


@pytest.mark.long
def test_long_deep_json_records_give_the_same_bytes_split_unsplit_and_on_any_stack(tmp_path_factory):
    deep_differential(tmp_path_factory, 60, LONG_SEED + 4)


def random_deep_records(rng) -> list:
    """DEEP_RECORD's fields drawn by a seeded `random.Random` (for the runs hypothesis cannot drive)."""
    return [(rng.choice([rng.randint(1, 1100), rng.choice(DEEP_EDGES)]), rng.choice(DEEP_LEAVES),
             rng.choice(DEEP_PLACES), rng.random() < 0.5, rng.random() < 0.5) for _ in range(rng.randint(4, 12))]


def cli_against_dagster(root: Path, datasets: int, rng_seed: int) -> None:
    """`datasets` generated jsonl datasets, each published by `slm4ie extract` in one project and by
    one `dagster asset materialize` of them all in a copy: the same bytes, drops and warnings."""
    import random
    import subprocess

    from support.dagster_cli import dagster_env, run_dagster
    from support.paths import VENV_BIN

    keys = [f"deep{i}" for i in range(datasets)]
    inputs = {key: deep_jsonl(random_deep_records(random.Random(rng_seed * 1000 + i))) for i, key in enumerate(keys)}
    entry = {"extractor": "jsonl", "domain": "fuzz", "metadata": {"metadata_fields": ["doc_id", "m"]}}
    for project in ("cli", "dagster"):
        for key, data in inputs.items():
            (root / project / "raw" / key).mkdir(parents=True)
            (root / project / "raw" / key / "a.jsonl").write_bytes(data)
        write_config(root / project, {key: entry for key in keys})
    for key in keys:
        done = subprocess.run([str(VENV_BIN / "slm4ie"), "extract", key, "--workers", "1"], cwd=root / "cli",
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    home = root / "home"
    home.mkdir()
    res = run_dagster(["asset", "materialize", "--select", ",".join(f"extracted/{k}" for k in keys)],
                      dagster_env(root / "dagster" / "extract.yaml", home), timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    for key in keys:
        assert _published(root / "cli" / "out", key) == _published(root / "dagster" / "out", key), key


def _published(out: Path, key: str) -> tuple:
    """The text and sidecar bytes, the manifest (but its time and the inputs' stamps) and the parts'
    warnings."""
    meta = out / ".slm4ie" / key
    manifest = json.loads((meta / "current" / "manifest.json").read_bytes())
    manifest.pop("published_at")
    manifest.pop("shards")
    warnings = [w for p in sorted((meta / "parts").glob("*.meta.json")) for w in json.loads(p.read_bytes())["warnings"]]
    sidecar = out / f"{key}.annotations.jsonl.gz"
    return (out / f"{key}.jsonl").read_bytes(), sidecar.read_bytes() if sidecar.exists() else None, manifest, warnings


@pytest.mark.slow
def test_deep_json_records_publish_the_same_from_the_cli_and_from_dagster(tmp_path):
    cli_against_dagster(tmp_path, 4, 39)


@pytest.mark.long
def test_long_deep_json_records_publish_the_same_from_the_cli_and_from_dagster(tmp_path):
    cli_against_dagster(tmp_path, 24, LONG_SEED + 5)
