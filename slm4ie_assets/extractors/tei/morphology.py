"""TEI token morphology: `msd`, `ana="mte:…"` and `pos` to (upos, feats) (ADDENDUM 6.2, D21, S9).

The same attribute strings repeat millions of times in a corpus, so every parse result is cached
per distinct string and the cached tuples (with their shared `upos`/`feats` objects) are reused.
"""

# The 17 Universal Dependencies part-of-speech tags: a `pos` attribute counts only when it is one.
UPOS_TAGS = frozenset({
    "ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
    "PUNCT", "SCONJ", "SYM", "VERB", "X",
})

# MULTEXT-East category character -> UPOS (ADDENDUM 6.2, `_MTE_CATEGORY_UPOS`); case-sensitive.
MTE_CATEGORY_UPOS = {
    "N": "NOUN", "V": "VERB", "C": "CCONJ", "Z": "PUNCT", "A": "ADJ", "P": "PRON", "R": "ADV",
    "S": "ADP", "M": "NUM", "Q": "PART", "I": "INTJ", "Y": "X", "X": "X",
}
# Refinements by the second character: Np… proper noun, Va… auxiliary, Cs… subordinating.
MTE_REFINED_UPOS = {"Np": "PROPN", "Va": "AUX", "Cs": "SCONJ"}

UPOS_PREFIX = "UPosTag="
MTE_PREFIX = "mte:"
NO_MORPHOLOGY = (None, None)
_CACHE_LIMIT = 200_000  # distinct strings kept per cache; a pathological corpus just starts over


def upos_from_mte(code: str) -> str | None:
    """UPOS of a MULTEXT-East code by its category character; None for an unknown category."""
    refined = MTE_REFINED_UPOS.get(code[:2])
    if refined is not None:
        return refined
    return MTE_CATEGORY_UPOS.get(code[:1])


def parse_msd(msd: str) -> tuple:
    """(upos, feats) of a non-empty `msd`: the last `UPosTag=` part is the upos; every other part,
    empty ones included, is rejoined with `|` as feats (None when no part is left)."""
    upos = None
    rest = []
    for part in msd.split("|"):
        if part.startswith(UPOS_PREFIX):
            upos = part[len(UPOS_PREFIX):]
        else:
            rest.append(part)
    return upos, ("|".join(rest) if rest else None)


def parse_ana(ana: str | None) -> tuple:
    """(upos, feats) from the first whitespace-separated `mte:` part of `ana`; an empty code or no
    such part gives (None, None). The code is kept verbatim as `MTE=<code>` even when its category
    is unknown (upos None)."""
    if not ana:
        return NO_MORPHOLOGY
    for part in ana.split():
        if part.startswith(MTE_PREFIX):
            code = part[len(MTE_PREFIX):]
            if not code:
                return NO_MORPHOLOGY
            return upos_from_mte(code), "MTE=" + code
    return NO_MORPHOLOGY


class MorphologyCache:
    """Memoised `parse_msd` / `parse_ana`. The hot loop reads `msd_cache` / `ana_cache` directly
    and calls `from_msd` / `from_ana` only on a miss."""

    __slots__ = ("msd_cache", "ana_cache")

    def __init__(self):
        self.msd_cache: dict = {}
        self.ana_cache: dict = {}

    def from_msd(self, msd: str) -> tuple:
        if len(self.msd_cache) >= _CACHE_LIMIT:
            self.msd_cache.clear()
        result = self.msd_cache[msd] = parse_msd(msd)
        return result

    def from_ana(self, ana: str | None) -> tuple:
        if len(self.ana_cache) >= _CACHE_LIMIT:
            self.ana_cache.clear()
        result = self.ana_cache[ana] = parse_ana(ana)
        return result

    def resolve(self, msd: str | None, ana: str | None, pos: str | None) -> tuple:
        """(upos, feats) by S9: a non-empty msd gives feats (and upos when it has `UPosTag=`), and
        ana is then ignored; otherwise ana's `mte:` code; a still-missing upos comes from `pos`
        when that is exactly one of the 17 UPOS tags. `pos` never changes feats."""
        if msd:
            upos, feats = self.msd_cache.get(msd) or self.from_msd(msd)
        else:
            upos, feats = self.ana_cache.get(ana) or self.from_ana(ana)
        if upos is None and pos in UPOS_TAGS:
            upos = pos
        return upos, feats
