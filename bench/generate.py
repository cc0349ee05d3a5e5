"""The one deterministic input generator of the benchmarks: every extractor's format at a chosen size.

    python -m bench.generate OUT_DIR [--scale 1.0] [--files 4] [--seed 1] [--only conllu,text]

Writes `OUT_DIR/raw/<key>/...` (each dataset as several files, so two workers have something to
share) and `OUT_DIR/extract.yaml` naming them. Sizes are DEFAULT_MB[key] * scale megabytes
(10^6 bytes). The vocabulary is made up but Slovene-looking (č, š, ž; see bench.gen_tei.Words),
and the structure is the real one: CoNLL-U with `# newdoc id`, SpaceAfter=No and NER in MISC;
ParlaMint-like TEI utterances and CLASSLA-like per-file TEI with msd/ana/join (bench.gen_tei);
MaCoCu `<doc>`/`<p>`; blank-line text blocks; jsonl with and without `paragraphs`; Arrow configs
written by `datasets.Dataset.save_to_disk`; the four COLESLAW subcorpora. SPLIT_DATASETS (named
with `--only`) are one big file (one config) of a format each, for splitting into ranges. The same
seed and scale give the same bytes, and nothing is held in memory beyond one document.
"""

import argparse
import random
import sys
from pathlib import Path

import orjson

from bench import gen_tei
from bench.gen_tei import Words

# dataset key -> (extractor, default MB at scale 1.0); text is bigger because it is the fastest path
DATASETS = {
    "conllu": ("conllu", 200),
    "tei_perfile": ("tei", 200),
    "tei_utterances": ("tei", 200),
    "macocu": ("macocu", 200),
    "text": ("text", 500),
    "jsonl_paragraphs": ("jsonl", 200),
    "jsonl": ("jsonl", 200),
    "huggingface": ("huggingface", 200),
    "coleslaw": ("coleslaw", 200),
}
# one big file each (one config for huggingface): they use more than one core only through splitting
# (docs/splitting.md); generated like the dataset they name, in a single file
SPLIT_DATASETS = {
    "text_1file": ("text", 500),
    "jsonl_1file": ("jsonl", 200),
    "conllu_1file": ("conllu", 200),
    "macocu_1file": ("macocu", 200),
    "huggingface_1config": ("huggingface", 200),
}
SINGLE_FILE_OF = {"text_1file": "text", "jsonl_1file": "jsonl", "conllu_1file": "conllu", "macocu_1file": "macocu",
                  "huggingface_1config": "huggingface"}
ALL_DATASETS = {**DATASETS, **SPLIT_DATASETS}
DOMAINS = {"tei_utterances": "parliamentary", "coleslaw": "legal", "macocu": "web", "macocu_1file": "web"}


class Sink:
    """A UTF-8 text file that counts the bytes written, so sizes are exact in bytes."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(path, "wb", buffering=1 << 20)
        self.size = 0

    def write(self, s: str) -> int:
        b = s.encode("utf-8")
        self.fh.write(b)
        self.size += len(b)
        return len(b)

    def close(self) -> None:
        self.fh.close()


def _sentence_text(toks) -> str:
    out = []
    for form, _lemma, _tag, join, _name in toks:
        out.append(form)
        if join != "right":
            out.append(" ")
    return "".join(out).rstrip()


def _paragraph(words: Words, rng: random.Random, lo: int = 1, hi: int = 8) -> str:
    return " ".join(_sentence_text(words.sentence()) for _ in range(rng.randint(lo, hi)))


# ----------------------------------------------------------------------------- CoNLL-U


def gen_conllu(path: Path, target: int, words: Words, rng: random.Random, stem: str) -> None:
    out = Sink(path)
    d = 0
    while out.size < target:
        d += 1
        out.write(f"# newdoc id = {stem}.doc{d}\n")
        for p in range(rng.randint(1, 4)):
            out.write(f"# newpar id = {stem}.doc{d}.p{p + 1}\n")
            for s in range(rng.randint(1, 6)):
                toks = words.sentence()
                lines = [f"# sent_id = {stem}.doc{d}.p{p + 1}.s{s + 1}\n", f"# text = {_sentence_text(toks)}\n"]
                ner_open = False
                for i, (form, lemma, (upos, feats, mte), join, name) in enumerate(toks, 1):
                    misc = []
                    if name:
                        misc.append("NER=B-PER")
                        ner_open = True
                    elif ner_open:
                        misc.append("NER=O")
                        ner_open = False
                    else:
                        misc.append("NER=O")
                    if join == "right":
                        misc.append("SpaceAfter=No")
                    head = i - 1
                    lines.append(f"{i}\t{form}\t{lemma if lemma is not None else form}\t{upos}\t{mte}\t"
                                 f"{feats or '_'}\t{head}\t{'root' if head == 0 else 'dep'}\t_\t{'|'.join(misc)}\n")
                lines.append("\n")
                out.write("".join(lines))
    out.close()


# ----------------------------------------------------------------------------- MaCoCu


def gen_macocu(path: Path, target: int, words: Words, rng: random.Random, stem: str) -> None:
    out = Sink(path)
    out.write('<?xml version="1.0" encoding="utf-8"?>\n<corpus id="MaCoCu-sl-2.0">\n')
    n = 0
    while out.size < target:
        n += 1
        ps = []
        for i in range(rng.randint(5, 40)):
            text = gen_tei.esc(_paragraph(words, rng, 1, 4))
            if rng.random() < 0.05:
                text += " &amp; več"
            ps.append(f'<p id="{stem}.{n}.{i + 1}" quality="{rng.choice(("good", "short", "neargood"))}" '
                      f'sensitive="no" lang="sl" lm_score="{rng.random():.3f}">{text}</p>')
        out.write(f'<doc id="{stem}.{n}" title="{gen_tei.esc(_sentence_text(words.sentence())[:60])}" '
                  f'crawl_date="2022-07-{rng.randint(1, 28):02d}" '
                  f'lang_distr="[(&apos;sl&apos;, 0.9{rng.randint(0, 9)})]" '
                  f'url="https://primer{n % 977}.si/{stem}/{n}" domain="si" file_type="html" '
                  f'lm_score="{rng.random():.3f}" lang_var="sl" biroamer_entities="0">\n'
                  + "\n".join(ps) + "\n</doc>\n")
    out.write("</corpus>\n")
    out.close()


# ----------------------------------------------------------------------------- text


def gen_text(path: Path, target: int, words: Words, rng: random.Random, stem: str) -> None:
    out = Sink(path)
    while out.size < target:
        lines = [_paragraph(words, rng, 1, 6) for _ in range(rng.randint(1, 8))]
        out.write("\n".join(lines) + ("\n\n" if rng.random() < 0.9 else "\n \n\n"))
    out.close()


# ----------------------------------------------------------------------------- jsonl


def _tokens(words: Words) -> list:
    toks = []
    for form, lemma, (upos, feats, _mte), join, _name in words.sentence():
        t = {"form": form, "lemma": lemma if lemma is not None else form, "upos": upos, "feats": feats or None}
        if join == "right":
            t["space_after"] = False
        toks.append(t)
    return toks


def gen_jsonl(path: Path, target: int, words: Words, rng: random.Random, stem: str, paragraphs: bool = False) -> None:
    out = Sink(path)
    n = 0
    while out.size < target:
        n += 1
        rec = {"doc_id": f"{stem}.{n}", "url": f"https://novice{n % 331}.si/clanek/{n}",
               "title": _sentence_text(words.sentence())[:80],
               "date": f"2021-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"}
        if paragraphs:
            paras = []
            texts = []
            for _ in range(rng.randint(1, 6)):
                sents = [{"tokens": _tokens(words)} for _ in range(rng.randint(1, 5))]
                paras.append({"sentences": sents})
                texts.append(" ".join("".join(t["form"] + ("" if t.get("space_after") is False else " ")
                                              for t in s["tokens"]).rstrip() for s in sents))
            rec["text"] = "\n".join(texts)
            rec["paragraphs"] = paras
        else:
            rec["text"] = "\n".join(_paragraph(words, rng) for _ in range(rng.randint(1, 12)))
        out.fh.write(orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE))
        out.size = out.fh.tell()
    out.close()


# ----------------------------------------------------------------------------- COLESLAW

COLESLAW_SUBCORPORA = ("PISRS", "USRS", "SodnaPraksa_courts", "SodnaPraksa_claims")


def _coleslaw_record(sub: str, n: int, words: Words, rng: random.Random) -> dict:
    body = lambda lo, hi: "\n\n".join(_paragraph(words, rng) for _ in range(rng.randint(lo, hi)))  # noqa: E731
    if sub == "PISRS":
        return {"id": n, "title": _sentence_text(words.sentence())[:80], "text": body(2, 15), "year": 1991 + n % 33}
    if sub == "USRS":
        return {"id": f"Up-{n}/21", "fullText": body(3, 20), "court": "Ustavno sodišče", "date": "2021-03-04"}
    if sub == "SodnaPraksa_courts":
        return {"id": f"VSL-{n}", "jedro": body(1, 2), "izrek": body(1, 1), "obrazlozitev": body(3, 15),
                "court": "Višje sodišče v Ljubljani", "area": "civilno pravo"}
    return {"id": str(n), "skodni_dogodek": body(1, 2), "poskodba": body(1, 1), "telesne_bolecine": body(1, 2),
            "strah": body(0, 1), "zmanjsanje_zivljenjske_aktivnosti": body(1, 2), "dodatne_informacije": body(0, 2),
            "odskodnina": rng.randint(500, 50000)}


def gen_coleslaw_file(path: Path, target: int, words: Words, rng: random.Random, sub: str) -> None:
    out = Sink(path)
    n = 0
    while out.size < target:
        n += 1
        out.fh.write(orjson.dumps(_coleslaw_record(sub, n, words, rng), option=orjson.OPT_APPEND_NEWLINE))
        out.size = out.fh.tell()
    out.close()


# ----------------------------------------------------------------------------- Hugging Face


def gen_hf_config(path: Path, target: int, words: Words, rng: random.Random, stem: str) -> None:
    """One config directory (`save_to_disk` of a Dataset), written in row batches of ~8 MB."""
    import datasets

    datasets.disable_progress_bars()
    rows_per_batch = 4000

    def batches():
        made = 0
        n = 0
        while made < target:
            batch = {"id": [], "text": [], "url": [], "score": [], "tags": []}
            for _ in range(rows_per_batch):
                n += 1
                text = "\n".join(_paragraph(words, rng) for _ in range(rng.randint(1, 8)))
                batch["id"].append(f"{stem}-{n}")
                batch["text"].append(text)
                batch["url"].append(f"https://splet{n % 101}.si/{n}")
                batch["score"].append(round(rng.random(), 4))
                batch["tags"].append(["sl", rng.choice(("novice", "forum", "blog"))])
                made += len(text.encode("utf-8")) + 60
                if made >= target:
                    break
            yield batch

    def rows():
        for b in batches():
            for i in range(len(b["id"])):
                yield {k: v[i] for k, v in b.items()}

    ds = datasets.Dataset.from_generator(rows, keep_in_memory=False, cache_dir=str(path.parent / ".hf_cache"))
    ds.save_to_disk(str(path))


# ----------------------------------------------------------------------------- driver


def _split(total: int, files: int) -> list[int]:
    """Unequal file sizes (as real corpora have), summing to `total`."""
    weights = [files + i for i in range(files)]
    return [total * w // sum(weights) for w in weights]


def generate_dataset(root: Path, key: str, size: int, files: int, seed: int) -> None:
    raw = root / "raw" / key
    rng = random.Random(f"{seed}:{key}")
    words = Words(rng)
    kind = SINGLE_FILE_OF.get(key, key)  # the format to write
    sizes = _split(size, 1 if key in SINGLE_FILE_OF else files)
    for i, target in enumerate(sizes):
        stem = f"{key}_{i:02d}"
        if kind == "conllu":
            gen_conllu(raw / f"{stem}.conllu", target, words, rng, stem)
        elif kind == "tei_perfile":
            # one document per file, as in CLASSLA/ssj500k: several files of the dataset's share
            raw.mkdir(parents=True, exist_ok=True)
            with open(raw / f"{stem}.xml", "w", encoding="utf-8", newline="\n", buffering=1 << 20) as fh:
                gen_tei.gen_perfile(fh, words, rng, target, stem)
        elif kind == "tei_utterances":
            raw.mkdir(parents=True, exist_ok=True)
            with open(raw / f"ParlaMint-SI_2022-0{i + 1}-01.ana.xml", "w", encoding="utf-8", newline="\n",
                      buffering=1 << 20) as fh:
                gen_tei.gen_utterance(fh, words, rng, target, f"ParlaMint-SI_2022-0{i + 1}-01.ana")
        elif kind == "macocu":
            gen_macocu(raw / f"{stem}.xml", target, words, rng, f"macocu.sl.{i}")
        elif kind == "text":
            gen_text(raw / f"{stem}.txt", target, words, rng, stem)
        elif kind == "jsonl":
            gen_jsonl(raw / f"{stem}.jsonl", target, words, rng, stem)
        elif kind == "jsonl_paragraphs":
            gen_jsonl(raw / f"{stem}.jsonl", target, words, rng, stem, paragraphs=True)
        elif kind == "huggingface":
            gen_hf_config(raw / f"config{i}", target, words, rng, f"c{i}")
        elif kind == "coleslaw":
            pass
        else:
            raise KeyError(key)
    if key == "coleslaw":  # the four subcorpora, each as `files` files
        per_sub = _split(size, len(COLESLAW_SUBCORPORA))
        for sub, sub_size in zip(COLESLAW_SUBCORPORA, per_sub, strict=True):
            for i, target in enumerate(_split(sub_size, max(1, files // 2))):
                gen_coleslaw_file(raw / sub / f"{sub.lower()}_{i:02d}.jsonl", target, words, rng, sub)
    if kind == "huggingface":
        import shutil

        for p in raw.glob("*/.hf_cache"):
            shutil.rmtree(p, ignore_errors=True)
        shutil.rmtree(raw / ".hf_cache", ignore_errors=True)


def write_yaml(root: Path, keys: list[str]) -> Path:
    lines = ["# generated by bench/generate.py", "input_dir: raw", "output_dir: out", "datasets:"]
    for key in keys:
        lines += [f"  {key}:", f"    extractor: {ALL_DATASETS[key][0]}", f"    domain: {DOMAINS.get(key, 'mixed')}"]
    path = root / "extract.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def input_bytes(root: Path, key: str) -> int:
    return sum(p.stat().st_size for p in (root / "raw" / key).rglob("*") if p.is_file())


def generate(root: Path, scale: float = 1.0, files: int = 4, seed: int = 1, only: list[str] | None = None,
             reuse: bool = True) -> Path:
    """Generate every dataset not already present (a stamp file records what made it)."""
    keys = only or list(DATASETS)  # the split datasets only when named (bench.run names them)
    root.mkdir(parents=True, exist_ok=True)
    for key in keys:
        size = int(ALL_DATASETS[key][1] * scale * 1e6)
        stamp = root / "raw" / f".{key}.stamp"
        want = f"{size}:{files}:{seed}"
        if reuse and stamp.exists() and stamp.read_text() == want:
            continue
        import shutil

        shutil.rmtree(root / "raw" / key, ignore_errors=True)
        generate_dataset(root, key, size, files, seed)
        stamp.write_text(want)
        print(f"generated {key}: {input_bytes(root, key) / 1e6:.1f} MB", file=sys.stderr)
    return write_yaml(root, keys)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default="", help="comma-separated dataset keys (default: all)")
    args = ap.parse_args(argv)
    only = [k for k in args.only.split(",") if k] or None
    print(generate(args.out, args.scale, args.files, args.seed, only))
    return 0


if __name__ == "__main__":
    sys.exit(main())
