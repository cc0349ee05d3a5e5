#!/usr/bin/env python3
"""Deterministic TEI generator for the tei extractor benchmarks.

    python bench/gen_tei.py LAYOUT SIZE_MB OUT.xml [--seed N]   (bench.generate uses its layouts)

LAYOUT is one of
  utterance  ParlaMint-style: <u who ana xml:id> > <seg> > <s> > <w>/<pc> (some in <name>), a UD-SYN
             <linkGrp> per sentence, speaker <note>s between utterances (many documents);
  perfile    CLASSLA/ssj500k-style: <body> > <div> > <p> > <s> > <w>/<pc> with msd, ana, lemma, join
             and a <linkGrp> per sentence (one document per file);
  plain      ELTeC-style: <body> > <div> > <head> + <p n=...> prose (many documents, no xml:id).

The same seed gives the same bytes. Output is streamed, so any size fits in a few MB of memory.
"""

import argparse
import random
import sys

TEI_NS = "http://www.tei-c.org/ns/1.0"

ONSETS = ["", "b", "č", "d", "g", "j", "k", "l", "m", "n", "p", "pr", "r", "s", "st", "š", "t", "tr", "v", "z", "ž",
          "kr", "sl", "zd"]
VOWELS = ["a", "e", "i", "o", "u", "a", "e", "o"]
CODAS = ["", "", "", "n", "l", "r", "j", "m", "s", "k", "t", "v"]

# (UPOS, msd features, MTE code) combos; the MTE code follows the English MULTEXT-East tagset.
TAGS = [
    ("NOUN", "Case=Nom|Gender=Fem|Number=Sing", "Ncfsn"),
    ("NOUN", "Case=Gen|Gender=Masc|Number=Sing", "Ncmsg"),
    ("NOUN", "Case=Acc|Gender=Neut|Number=Plur", "Ncnpa"),
    ("ADJ", "Case=Nom|Degree=Pos|Gender=Fem|Number=Sing", "Agpfsn"),
    ("ADJ", "Case=Loc|Degree=Pos|Gender=Masc|Number=Sing", "Agpmsl"),
    ("VERB", "Aspect=Imp|Mood=Ind|Number=Sing|Person=3|Tense=Pres|VerbForm=Fin", "Vmpr3s"),
    ("VERB", "Aspect=Perf|Gender=Masc|Number=Sing|VerbForm=Part", "Vmep-sm"),
    ("AUX", "Mood=Ind|Number=Sing|Person=3|Polarity=Pos|Tense=Pres|VerbForm=Fin", "Va-r3s-n"),
    ("ADP", "Case=Loc", "Sl"),
    ("ADV", "Degree=Pos", "Rgp"),
    ("PRON", "Case=Acc|PronType=Prs|Reflex=Yes|Variant=Short", "Px------y"),
    ("CCONJ", "", "Cc"),
    ("SCONJ", "", "Cs"),
    ("PART", "", "Q"),
    ("NUM", "NumForm=Digit|NumType=Card", "Mdc"),
]
PROPN = ("PROPN", "Case=Nom|Gender=Masc|Number=Sing", "Npmsn")
PUNCT = [",", ".", "!", "?", ":"]


class Words:
    """A fixed Zipf-ish vocabulary of Slovene-looking words with lemmas and tags."""

    def __init__(self, rng: random.Random, size: int = 4000):
        self.rng = rng
        vocab = []
        seen = set()
        while len(vocab) < size:
            n = rng.choice((1, 2, 2, 3, 3, 4))
            w = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(n))
            if len(w) < 2 or w in seen:
                continue
            seen.add(w)
            tag = TAGS[rng.randrange(len(TAGS))]
            lemma = w[:-1] + rng.choice("aeo") if len(w) > 3 else w
            vocab.append((w, lemma, tag))
        self.vocab = vocab
        self.weights = [1.0 / (i + 1) for i in range(size)]
        self.cum = []
        total = 0.0
        for wt in self.weights:
            total += wt
            self.cum.append(total)

    def sentence(self) -> list:
        """[(form, lemma, (upos, feats, mte), join, in_name)] of one sentence."""
        rng = self.rng
        n = rng.randint(4, 24)
        picks = rng.choices(self.vocab, cum_weights=self.cum, k=n)
        out = []
        name_at = rng.randrange(n) if rng.random() < 0.3 else -1
        for i, (w, lemma, tag) in enumerate(picks):
            if i == 0:
                w = w.capitalize()
            if i == name_at:
                out.append((w.capitalize(), lemma.capitalize(), PROPN, None, True))
                continue
            out.append((w, lemma, tag, None, False))
            if i < n - 1 and rng.random() < 0.08:
                out[-1] = out[-1][:3] + ("right",) + out[-1][4:]
                out.append((",", ",", ("PUNCT", "", "Z"), None, False))
        last = out[-1]
        out[-1] = last[:3] + ("right",) + last[4:]
        out.append((rng.choice(PUNCT), None, ("PUNCT", "", "Z"), None, False))
        return out


def esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def token_xml(tid: str, form: str, lemma, tag, join) -> str:
    upos, feats, mte = tag
    msd = f"UPosTag={upos}" + (f"|{feats}" if feats else "")
    el = "pc" if upos == "PUNCT" else "w"
    attrs = f'xml:id="{tid}" msd="{msd}" ana="mte:{mte}"'
    if lemma is not None and el == "w":
        attrs += f' lemma="{esc(lemma)}"'
    if join:
        attrs += f' join="{join}"'
    return f"<{el} {attrs}>{esc(form)}</{el}>\n"


def sentence_xml(words: Words, sid: str, indent: str) -> str:
    toks = words.sentence()
    parts = [f'{indent}<s xml:id="{sid}">\n']
    in_name = False
    for i, (form, lemma, tag, join, name) in enumerate(toks, 1):
        if name and not in_name:
            parts.append(f'{indent}   <name type="PER">\n')
            in_name = True
        elif not name and in_name:
            parts.append(f"{indent}   </name>\n")
            in_name = False
        parts.append(token_xml(f"{sid}.{i}", form, lemma, tag, join))
    if in_name:
        parts.append(f"{indent}   </name>\n")
    parts.append('<linkGrp type="UD-SYN" targFunc="head argument">\n')
    for i in range(1, len(toks) + 1):
        head = f"{sid}.{max(1, i - 1)}" if i > 1 else sid
        parts.append(f'<link ana="ud-syn:dep" target="#{head} #{sid}.{i}"/>\n')
    parts.append("</linkGrp>\n")
    parts.append(f"{indent}</s>\n")
    return "".join(parts)


def header(title: str) -> str:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<TEI xmlns="{TEI_NS}" xml:lang="sl">\n'
            f"  <teiHeader>\n    <fileDesc>\n      <titleStmt><title>{esc(title)}</title></titleStmt>\n"
            f"      <publicationStmt><p>Generated for benchmarking; not real data.</p></publicationStmt>\n"
            f"      <sourceDesc><p>bench/gen_tei.py</p></sourceDesc>\n    </fileDesc>\n  </teiHeader>\n"
            f"  <text>\n   <body>\n")


FOOTER = "   </body>\n  </text>\n</TEI>\n"


def gen_utterance(out, words: Words, rng: random.Random, target: int, stem: str) -> None:
    written = out.write(header("utterance benchmark"))
    speakers = [f"#Govornik{n}" for n in range(40)]
    u_no = seg_no = 0
    written += out.write('    <div type="debateSection">\n')
    while written < target:
        u_no += 1
        who = rng.choice(speakers)
        written += out.write(f'     <note type="speaker">{esc(who[1:].upper())}:</note>\n')
        written += out.write(f'     <u who="{who}" xml:id="{stem}.u{u_no}" '
                             f'ana="{rng.choice(("#regular", "#chair"))}">\n')
        for _ in range(rng.randint(1, 6)):
            seg_no += 1
            written += out.write(f'      <seg xml:id="{stem}.seg{seg_no}">\n')
            for k in range(rng.randint(1, 5)):
                written += out.write(sentence_xml(words, f"{stem}.seg{seg_no}.{k + 1}", "       "))
            written += out.write("      </seg>\n")
        written += out.write("     </u>\n")
    out.write("    </div>\n" + FOOTER)


def gen_perfile(out, words: Words, rng: random.Random, target: int, stem: str) -> None:
    written = out.write(header("per-file benchmark"))
    written += out.write('    <div type="text">\n')
    p_no = 0
    while written < target:
        p_no += 1
        written += out.write(f'     <p xml:id="p{p_no}">\n')
        for k in range(rng.randint(1, 8)):
            written += out.write(sentence_xml(words, f"p{p_no}.s{k + 1}", "      "))
        written += out.write("     </p>\n")
    out.write("    </div>\n" + FOOTER)


def gen_plain(out, words: Words, rng: random.Random, target: int, stem: str) -> None:
    written = out.write(header("plain benchmark"))
    chapter = p_no = 0
    while written < target:
        chapter += 1
        written += out.write(f'    <div type="chapter">\n     <head>{chapter}. poglavje</head>\n')
        for _ in range(rng.randint(5, 40)):
            p_no += 1
            sents = []
            for _ in range(rng.randint(1, 8)):
                toks = words.sentence()
                s = []
                for form, _lemma, _tag, join, _name in toks:
                    s.append(form)
                    if join != "right":
                        s.append(" ")
                sents.append("".join(s).strip())
            written += out.write(f'     <p n="{stem}.{p_no}">{esc(" ".join(sents))}</p>\n')
        written += out.write("    </div>\n")
    out.write(FOOTER)


LAYOUTS = {"utterance": gen_utterance, "perfile": gen_perfile, "plain": gen_plain}


def generate(layout: str, size_bytes: int, path: str, seed: int = 1) -> None:
    rng = random.Random(seed)
    words = Words(rng)
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    if layout == "utterance":  # ParlaMint-length ids (`<session>.ana.seg1.1.1`)
        stem = f"ParlaMint-SI_2007-11-{seed % 28 + 1:02d}-SDZ4-Izredna-{seed % 97}.ana"
    with open(path, "w", encoding="utf-8", newline="\n", buffering=1 << 20) as out:
        LAYOUTS[layout](out, words, rng, size_bytes, stem)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("layout", choices=sorted(LAYOUTS))
    ap.add_argument("size_mb", type=float, help="approximate size in MB (10^6 bytes; characters, not bytes)")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    generate(args.layout, int(args.size_mb * 1e6), args.out, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
