"""Hostile and broken XML for the tei and macocu extractors (docs/guarantees.md 3; D6, S3, ADDENDUM 3.2 / 4.6 / 6.1).

Every attack file holds a good document before the attack and one after it. The whole set is
extracted by the plain pipeline in a subprocess under resource limits (address space, CPU time, a
wall-clock timeout), with a TCP listener standing in for the network, then once more through the
real `dagster asset materialize` CLI. Proven for each file: no secret content reaches the output,
the manifest, the logs or the Dagster instance; nothing is fetched from the network; memory and time
stay bounded; the documents closed before the attack are kept; and whatever is lost is a drop-ledger
entry naming the file (and line). `extractors/test_tei.py` / `extractors/test_macocu.py` cover single cases in-process;
this file covers the whole set end to end (billion laughs and deep nesting for macocu too, network
DOCTYPEs, 100,000 nested elements, quadratic blow-up, XInclude, stylesheet PIs, names of 1 MB).
"""

import json
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support.dagster_cli import dagster_env, run_dagster
from support.files import read_jsonl, read_sidecar, write_config

NS = 'xmlns="http://www.tei-c.org/ns/1.0"'
SECRET = "TOP-SECRET-7f3a9c"
ADDRESS_SPACE_LIMIT = 4 << 30  # bytes; an expanding entity bomb would hit it
PEAK_RSS_LIMIT_MB = 400
WALL_LIMIT_S = 60

# The attacks: (DOCTYPE internal subset or external id, payload inside the middle document). The
# DOCTYPE root name `R` is replaced by the extractor's root element.
def attacks(secret: Path, evil_dtd: Path, net: str) -> dict:
    lol = '<!ENTITY l0 "lol">' + "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    xi = 'xmlns:xi="http://www.w3.org/2001/XInclude"'
    return {
        "xxe_file": (f'<!DOCTYPE R [<!ENTITY xxe SYSTEM "file://{secret}">]>', "x &xxe; y"),
        "xxe_parameter": (f'<!DOCTYPE R [<!ENTITY % pe SYSTEM "file://{evil_dtd}"> %pe; ]>', "x &leak; &leak2; y"),
        "external_dtd": (f'<!DOCTYPE R SYSTEM "file://{evil_dtd}">', "x &leak; &leak2; y"),
        "network_dtd": (f'<!DOCTYPE R SYSTEM "{net}/evil.dtd" [<!ENTITY net SYSTEM "{net}/entity">'
                        f'<!ENTITY % npe SYSTEM "{net}/pe.dtd"> %npe;]>', "x &net; y"),
        "xinclude": ("", f'x <xi:include {xi} href="file://{secret}" parse="text"/> '
                         f'<xi:include {xi} href="{net}/inc.xml"/> y'),
        "billion_laughs": (f"<!DOCTYPE R [{lol}]>", "x &l9; y"),
        "quadratic_blowup": ('<!DOCTYPE R [<!ENTITY big "' + "A" * 100_000 + '">]>', "x " + "&big;" * 20_000 + " y"),
        "internal_markup_entity": ('<!DOCTYPE R [<!ENTITY m "<b>injected</b>">]>', "x &m; y"),
        "deep_nesting": ("", "x " + "<hi>" * 100_000 + "deep" + "</hi>" * 100_000 + " y"),
        "huge_text_node": ("", "x " + "beseda " * 2_000_000 + " y"),
        "long_name": ("", "x <" + "n" * 1_000_000 + ">z</" + "n" * 1_000_000 + "> y"),
    }


def hostile_files(secret: Path, evil_dtd: Path, net: str) -> dict:
    """{(extractor, file name): bytes}"""
    files = {}
    pi = f'<?xml-stylesheet type="text/xsl" href="{net}/style.xsl"?>\n'
    for name, (doctype, payload) in attacks(secret, evil_dtd, net).items():
        head = pi if name == "network_dtd" else ""
        files[("tei", f"{name}.xml")] = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n{head}{doctype.replace("<!DOCTYPE R", "<!DOCTYPE TEI")}\n'
            f'<TEI {NS}><text><body><p xml:id="{name}.before">pred napadom</p><p xml:id="{name}.attack">{payload}</p>'
            f'<p xml:id="{name}.after">po napadu</p></body></text></TEI>\n').encode()
        files[("macocu", f"{name}.xml")] = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n{head}{doctype.replace("<!DOCTYPE R", "<!DOCTYPE corpus")}\n'
            f'<corpus><doc id="{name}.before"><p>pred napadom</p></doc>'
            f'<doc id="{name}.attack"><p>{payload}</p></doc><doc id="{name}.after"><p>po napadu</p></doc></corpus>\n'
        ).encode()
    # an external entity inside a token of an annotated TEI file (the per-file route)
    files[("tei", "xxe_token.xml")] = (
        f'<?xml version="1.0"?>\n<!DOCTYPE TEI [<!ENTITY xxe SYSTEM "file://{secret}">]>\n'
        f'<TEI {NS}><text><body><p><s><w>pred</w><w>&xxe;</w><pc>.</pc></s></p></body></text></TEI>\n').encode()
    # 100,000 nested elements between documents, outside any paragraph
    files[("macocu", "deep_between_docs.xml")] = (
        '<corpus><doc id="deep_between_docs.before"><p>pred napadom</p></doc>' + "<x>" * 100_000 + "</x>" * 100_000
        + '<doc id="deep_between_docs.after"><p>po napadu</p></doc></corpus>').encode()
    for key, head, good, tail in (("tei", f"<TEI {NS}><text><body>", '<p xml:id="before">pred napadom</p>',
                                   "</body></text></TEI>"),
                                  ("macocu", "<corpus>", '<doc id="before"><p>pred napadom</p></doc>', "</corpus>")):
        opening = '<p xml:id="cut">od' if key == "tei" else '<doc id="cut"><p>od'
        for name in ("invalid_bytes", "truncated"):
            start = (head + good.replace("before", f"{name}.before") + opening).encode()
            broken = b"\xff\xfe rest</p>" + tail.encode() if name == "invalid_bytes" else b""
            files[(key, f"{name}.xml")] = start + broken
        files[(key, "empty.xml")] = b""
        files[(key, "binary.xml")] = bytes(range(256)) * 16
        files[(key, "good.xml")] = (head + good.replace("before", "good.good") + tail).encode()
    return files


# Expected outcome per file: the documents kept (ids, in order) and the drop reasons.
EXPECTED = {
    "tei": {
        "xxe_file": (["before", "attack", "after"], {"unexpanded_entity"}),
        "xxe_parameter": (["before", "attack", "after"], {"unexpanded_entity"}),
        "external_dtd": (["before", "attack", "after"], {"unexpanded_entity"}),
        # the DTDs the DOCTYPE names are answered with empty text (xml.parser.refuse_external): no
        # "Attempt to load network entity" error any more, nothing fetched either way
        "network_dtd": (["before", "attack", "after"], {"unexpanded_entity"}),
        "xinclude": (["before", "attack", "after"], set()),
        "billion_laughs": (["before"], {"xml_syntax_error"}),
        "quadratic_blowup": (["before"], {"xml_syntax_error"}),
        "internal_markup_entity": (["before", "attack", "after"], {"unexpanded_entity"}),
        "deep_nesting": (["before"], {"xml_syntax_error"}),
        "huge_text_node": (["before", "attack", "after"], set()),
        "long_name": (["before"], {"xml_syntax_error"}),
        "xxe_token": (["xxe_token"], {"unexpanded_entity"}),
        "invalid_bytes": (["before"], {"invalid_bytes"}),
        "truncated": (["before"], {"xml_syntax_error"}),
        "empty": ([], {"xml_syntax_error"}),
        "binary": ([], {"xml_syntax_error"}),
        "good": (["good"], set()),
    },
    "macocu": {
        "xxe_file": (["before", "attack", "after"], {"unexpanded_entity"}),
        "xxe_parameter": (["before", "attack", "after"], {"undefined_entity"}),
        "external_dtd": (["before", "attack", "after"], {"undefined_entity"}),
        "network_dtd": (["before", "attack", "after"], {"unexpanded_entity"}),
        "xinclude": (["before", "attack", "after"], set()),
        "billion_laughs": (["before"], {"xml_syntax_error"}),
        "quadratic_blowup": (["before"], {"xml_syntax_error"}),
        "internal_markup_entity": (["before", "attack", "after"], {"unexpanded_entity"}),
        "deep_nesting": (["before"], {"xml_syntax_error"}),
        "deep_between_docs": (["before"], {"xml_syntax_error"}),
        "huge_text_node": (["before", "attack", "after"], set()),  # the huge_tree retry, as in tei
        "long_name": (["before"], {"xml_syntax_error"}),
        "invalid_bytes": (["before"], {"invalid_bytes"}),
        "truncated": (["before"], {"xml_syntax_error"}),
        "empty": ([], {"xml_syntax_error"}),
        "binary": ([], {"xml_syntax_error"}),
        "good": (["good"], set()),
    },
}


class Listener:
    """A TCP port standing in for the network: counts every connection attempt."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self):
        self.sock.close()


def build_project(root: Path, listener: Listener) -> Path:
    secret = root / "secret.txt"
    secret.write_text(SECRET + "\n")
    evil = root / "evil.dtd"
    evil.write_text(f'<!ENTITY leak SYSTEM "file://{secret}"><!ENTITY leak2 "{SECRET}-FROM-DTD">')
    for (key, name), data in hostile_files(secret, evil, listener.url).items():
        path = root / "raw" / key / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return write_config(root, {"tei": {"extractor": "tei", "domain": "test"},
                               "macocu": {"extractor": "macocu", "domain": "test"}})


RUNNER = """
import json, sys, time
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset
cat = load_catalog(sys.argv[1])
out = {}
for key in ("tei", "macocu"):
    started = time.monotonic()
    report = extract_dataset(cat.dataset(key), cat, workers=1)
    out[key] = {"seconds": time.monotonic() - started, "drops": report.manifest.drops, "warnings": report.warnings}
# VmHWM, not ru_maxrss: the latter starts at the forking pytest worker's peak (Linux keeps it across
# exec), which is a long session's RSS, not this run's
out["maxrss_mb"] = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) / 1024
print(json.dumps(out))
"""


def limited():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (WALL_LIMIT_S * 2, WALL_LIMIT_S * 2))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    listener = Listener()
    cfg = build_project(root, listener)
    started = time.monotonic()
    res = subprocess.run([sys.executable, "-c", RUNNER, str(cfg)], capture_output=True, text=True,
                         timeout=WALL_LIMIT_S * 3, preexec_fn=limited)
    wall = time.monotonic() - started
    listener.close()
    assert res.returncode == 0, res.stderr[-4000:]
    result = json.loads(res.stdout)
    result.update(root=root, wall=wall, stdout=res.stdout, stderr=res.stderr, connections=listener.connections)
    return result


def test_no_secret_reaches_output_manifest_or_logs(hostile):
    """XXE (general and parameter entities, external DTDs, XInclude): the secret file's content never
    appears in any output, sidecar, manifest, part, warning or log line."""
    root: Path = hostile["root"]
    assert SECRET not in hostile["stdout"] + hostile["stderr"]
    for path in (root / "out").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if path.name.endswith(".gz"):
                import gzip

                data = gzip.decompress(data)
            assert SECRET.encode() not in data, path
    assert all("injected" not in r["text"] for r in read_jsonl(root / "out" / "tei.jsonl"))


def test_no_network_access_is_attempted(hostile):
    """DOCTYPE system ids, external entities, parameter entities, XInclude and stylesheet PIs that
    point at the network are never fetched: the listener sees no connection."""
    from slm4ie_assets.extractors.xml.parser import parser_options

    assert hostile["connections"] == 0
    for huge in (False, True):
        opts = parser_options(huge)
        assert opts["no_network"] and not opts["load_dtd"] and not opts["resolve_entities"]


def test_memory_and_time_stay_bounded(hostile):
    """Entity bombs (billion laughs, quadratic blow-up), 100,000 nested elements, a 14 MB text node
    and 1 MB names are read or refused in bounded memory and time (under a 4 GiB address-space limit)."""
    assert hostile["maxrss_mb"] < PEAK_RSS_LIMIT_MB, hostile["maxrss_mb"]
    assert hostile["wall"] < WALL_LIMIT_S, hostile["wall"]


@pytest.mark.parametrize("key", ["tei", "macocu"])
def test_each_hostile_file_keeps_earlier_documents_and_is_named_in_the_ledger(hostile, key):
    """D6/S3: documents closed before the problem are kept, the rest of the file is skipped, and every
    loss is a ledger entry whose warning names the dataset, the file and the line."""
    root: Path = hostile["root"]
    lines = read_jsonl(root / "out" / f"{key}.jsonl")
    produced: dict = {}
    for rec in lines:  # ids are `<file>.<which>` (the per-file tei document is the file stem)
        name, _, which = rec["doc_id"].partition(".")
        produced.setdefault(name, []).append(which or rec["doc_id"])
    assert set(produced) <= set(EXPECTED[key]), sorted(produced)
    warnings = hostile[key]["warnings"]
    total = 0
    for name, (ids, reasons) in EXPECTED[key].items():
        assert produced.get(name, []) == ids, (name, produced.get(name))
        named = [w for w in warnings if w.startswith(f"{key}/{name}.xml")]
        got = {w.rsplit("[", 1)[1].rstrip("]") for w in named}
        assert got == reasons, (name, named)
        for w in named:
            if "xml_syntax_error" in w or "invalid_bytes" in w:
                assert "skipped the rest of the file" in w, w
        total += len(named)
    assert sum(hostile[key]["drops"].values()) == total == len(warnings)


def test_tei_sidecar_stays_aligned_through_the_hostile_set(hostile):
    root: Path = hostile["root"]
    lines = read_jsonl(root / "out" / "tei.jsonl")
    side = read_sidecar(root / "out" / "tei.annotations.jsonl.gz")
    assert [r["uid"] for r in side] == [r["uid"] for r in lines]


def test_declared_entities_that_are_not_expanded_are_counted_in_macocu_as_in_tei(hostile):
    """D6: content that cannot be placed is counted, never silently lost. tei counts
    `unexpanded_entity`; macocu should count the declared (internal or SYSTEM) entity it leaves unexpanded."""
    warnings = hostile["macocu"]["warnings"]
    for name in ("xxe_file", "internal_markup_entity", "network_dtd"):
        assert any(w.startswith(f"macocu/{name}.xml") for w in warnings), name


@pytest.mark.slow
def test_hostile_set_through_the_dagster_cli_leaks_nothing_into_logs_or_the_instance(tmp_path):
    """The same files through the literal CLI: the run succeeds (drops are warnings), nothing is
    fetched, and the secret is in neither the CLI output nor any file of the Dagster instance
    (event log, compute logs, run storage)."""
    listener = Listener()
    cfg = build_project(tmp_path, listener)
    home = tmp_path / "dagster_home"
    home.mkdir()
    res = run_dagster(["asset", "materialize", "--select", "extracted/tei,extracted/macocu"],
                      dagster_env(cfg, home), timeout=600)
    listener.close()
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:]
    assert "RUN_SUCCESS" in log
    assert SECRET not in log
    assert listener.connections == 0
    assert "macocu/billion_laughs.xml" in log and "tei/deep_nesting.xml" in log  # the warnings reach the run log
    for path in home.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    for key in ("tei", "macocu"):
        assert [r["doc_id"] for r in read_jsonl(tmp_path / "out" / f"{key}.jsonl")][:1] == ["billion_laughs.before"]


def test_an_empty_tei_file_is_reported_as_empty_not_with_an_earlier_files_error(hostile):
    """D6: the warning names the file and says what is wrong with it. Here billion_laughs.xml is read
    just before empty.xml by the same process."""
    [warning] = [w for w in hostile["tei"]["warnings"] if w.startswith("tei/empty.xml")]
    assert "amplification" not in warning, warning


# ----------------------------------------------------------------------------- hostile JSON


DEEP = 100_000


@pytest.mark.parametrize("extractor", ["jsonl", "coleslaw", "json"])
def test_pathological_json_is_a_named_skip_never_a_crash(tmp_path, extractor):
    """Nesting deeper than records may have (D25: refused before any decoder runs), nesting the
    encoder cannot write (orjson stops at 255 levels), a 5,000-digit integer (beyond Python's int-string
    limit), NaN and lone surrogates: each costs its own record (counted, the file and line named);
    the records around them are kept."""
    from slm4ie_assets.catalog import load_catalog
    from slm4ie_assets.pipeline import extract_dataset
    from support.files import write_files

    records = ['{"doc_id": "before", "text": "pred"}',
               "[" * DEEP + "]" * DEEP,
               '{"doc_id": "deep_field", "text": "x", "m": ' + "[" * DEEP + "]" * DEEP + "}",
               '{"doc_id": "too_deep_to_write", "text": "x", "m": ' + "[" * 300 + "]" * 300 + "}",
               '{"doc_id": "digits", "text": "x", "n": ' + "7" * 5000 + "}",
               '{"doc_id": "nan", "text": "x", "n": NaN}',
               '{"doc_id": "surrogate", "text": "x \\ud800 y"}',
               '{"doc_id": "after", "text": "po"}']
    if extractor == "json":
        keep = [r for r in records if r.startswith("{") and '"deep_field"' not in r and '"digits"' not in r]
        files = {"a.json": "[" + ", ".join(keep) + "]", "b.json": "[" * DEEP + "]" * DEEP,
                 "c.json": '{"doc_id": "c", "text": "c"}', "d.json": "[" + records[4] + "]"}
    else:
        files = {"a.jsonl": "\n".join(records) + "\n"}
    write_files(tmp_path / "raw" / "k", files)
    cat = load_catalog(write_config(tmp_path, {"k": {"extractor": extractor, "domain": "test"}}))
    report = extract_dataset(cat.dataset("k"), cat, workers=1)
    ids = [r["doc_id"] for r in read_jsonl(tmp_path / "out" / "k.jsonl")]
    drops = report.manifest.drops
    if extractor == "json":
        # one file is one JSON value: a file that cannot be decoded is skipped whole, the others are read
        assert ids == ["before", "nan", "surrogate", "after", "c"], ids
        assert drops == {"malformed_json": 2, "unencodable": 1}, drops
        assert {w.split(":")[0] for w in report.warnings if "malformed" in w} == {"k/b.json", "k/d.json"}
    else:
        assert ids[0] == "before" and ids[-1] == "after", ids
        assert "deep_field" not in ids and "too_deep_to_write" not in ids and "digits" not in ids
        assert drops["malformed_json"] == 3 and drops["unencodable"] == 1, drops
        assert any(w.startswith("k/a.jsonl:2: malformed JSON") for w in report.warnings), report.warnings
    assert "nan" in ids and "surrogate" in ids  # repaired (D1), not lost
    assert sum(drops.values()) == sum(1 for w in report.warnings if w.endswith("]"))
