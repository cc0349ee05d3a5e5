"""Assumed counts: which counts of a split file's ranges a run took on trust, and which parts wait
for them to be proven (docs/splitting.md, "Assumed counts").

A count-only pass over a range that this run also extracts may skip what makes it expensive (text:
the UTF-8 check) and assume the range holds nothing that is dropped. The range's own extraction
then reports its real counts: equal, the assumption is proven; different, it was wrong. A part
whose `before` holds an assumed count is written with its meta pending and committed only once
every count it rests on is proven; one resting on a wrong count is discarded and written again.
Since `before` is exactly the sum of the earlier ranges' counts, proving each of them proves it.
"""

from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

from .extractors.extract_context import RangeCounts
from .extractors.input_file import InputFile

RangeKey = tuple[str, int]  # (file, range index)
OutcomeT = TypeVar("OutcomeT")


class RangeCount(NamedTuple):
    """A count-only pass's result; `assumed`: taken on trust (`Splitter.quick_count(checked=False)`),
    right only if the range's own extraction in this run reports the same."""

    counts: RangeCounts
    assumed: bool


def range_key(file: InputFile) -> RangeKey:
    assert file.range is not None
    return file.rel, file.range.index


@dataclass(frozen=True)
class Held(Generic[OutcomeT]):
    """A part written from assumed counts, waiting for them."""

    task: int
    outcome: OutcomeT
    rests_on: frozenset[RangeKey]


class Proofs(Generic[OutcomeT]):
    """The assumed counts not proven yet, those proven wrong, and the parts held back."""

    def __init__(self) -> None:
        self._assumed: dict[RangeKey, RangeCounts] = {}
        self._wrong: set[RangeKey] = set()
        self._held: list[Held[OutcomeT]] = []

    def assume(self, file: InputFile, counts: RangeCounts) -> None:
        self._assumed[range_key(file)] = counts

    def rests_on(self, file: InputFile) -> frozenset[RangeKey]:
        """The unproven assumed counts among the ranges before `file` (its `before` sums them)."""
        if file.range is None or not self._assumed:
            return frozenset()
        return frozenset(k for k in self._assumed if k[0] == file.rel and k[1] < file.range.index)

    def prove(self, file: InputFile, real: RangeCounts) -> bool:
        """The range's real counts came in; False when they differ from what was assumed."""
        key = range_key(file)
        assumed = self._assumed.pop(key, None)
        if assumed is None or assumed == real:
            return True
        self._wrong.add(key)
        return False

    def unproven(self) -> list[RangeKey]:
        return list(self._assumed)

    def hold(self, task: int, outcome: OutcomeT, rests_on: frozenset[RangeKey]) -> None:
        self._held.append(Held(task, outcome, rests_on))

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def decided(self) -> list[tuple[Held[OutcomeT], bool]]:
        """The held parts whose counts are all proven (True) or one of them wrong (False), no
        longer held."""
        waiting: list[Held[OutcomeT]] = []
        done: list[tuple[Held[OutcomeT], bool]] = []
        for held in self._held:
            if held.rests_on & self._wrong:
                done.append((held, False))
            elif held.rests_on.isdisjoint(self._assumed):
                done.append((held, True))
            else:
                waiting.append(held)
        self._held = waiting
        return done
