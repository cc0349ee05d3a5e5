"""Which root archive each archive is charged to, and how deep it lies in it (D16). A root is a raw
archive, one no other archive produced; everything unpacked from it, at any depth, spends one
budget (issue 34: a budget per archive multiplied with each level of nesting), and its tree may
be at most MAX_ROUNDS archives deep, counted from the root whatever run unpacked which level
(issue 39: counted in the rounds of one run, a deeper chain failed, then the next run went on)."""

import os
from dataclasses import dataclass
from pathlib import Path

from ..catalog import ArchiveLimits
from .ownership import Owners
from .staging import Budget
from .state import ArchiveEntry

# an archive this many levels inside its root is not unpacked; the root is skipped as `bad_archive`
MAX_ROUNDS = 32


@dataclass(slots=True)
class Root:
    """A raw archive and the budget every archive unpacked from it, at any depth, is charged to."""

    rel: str
    st: os.stat_result
    budget: Budget
    refused: bool = False  # something in its tree refused it: what is left of the tree is not unpacked


class Roots:
    """Each archive's root and depth: known for the archives this run produced, else found by
    following the recorded outputs (`owners`) from the archive up to a raw one."""

    def __init__(self, raw_dir: Path, limits: ArchiveLimits, archives: dict[str, ArchiveEntry], owners: Owners):
        self.raw_dir = raw_dir
        self.limits = limits
        self.archives = archives
        self.owners = owners
        self._produced: dict[str, tuple[Root, int]] = {}  # archive produced in this run -> its root, depth

    def chain(self, rel: str) -> list[str]:
        """`rel`, the archive whose recorded outputs hold it, the one holding that, ... up to a root."""
        chain = [rel]
        while (parent := self.owners.owner(chain[-1])) is not None and parent not in chain:
            chain.append(parent)
        return chain

    def of(self, rel: str, st: os.stat_result) -> tuple[Root, int]:
        """The root whose budget unpacking `rel` is charged to, and how deep `rel` lies in it: the
        one that produced it in this run; else, for an archive an earlier run unpacked from
        another, that one's root, charged with what the rest of its tree holds (as recorded); else
        `rel` itself, at depth 0."""
        known = self._produced.get(rel)
        if known is not None:
            return known
        chain = self.chain(rel)
        top = chain[-1]
        try:
            top_st = os.lstat(self.raw_dir / top)
        except OSError:
            top = rel
        if top == rel:
            return Root(rel, st, self.budget(st.st_size, rel)), 0
        budget = self.budget(top_st.st_size, top)
        budget.written, budget.members = self._recorded_usage(top, rel)
        return Root(top, top_st, budget), len(chain) - 1

    def produced(self, inner: list[str], root: Root, depth: int) -> None:
        """`inner` came out of an archive at `depth` in `root`, in this run."""
        self._produced.update((out, (root, depth + 1)) for out in inner)

    def _recorded_usage(self, top: str, exclude: str) -> tuple[int, int]:
        """Bytes and files the state records for the tree of archive `top`, without the subtree
        of `exclude` (unpacked again now, so charged as it is written)."""
        written = files = 0
        stack, seen = [top], {exclude}
        while stack:
            rel = stack.pop()
            entry = self.archives.get(rel)
            if rel in seen or entry is None:
                continue
            seen.add(rel)
            for out, stamp in entry.outputs.items():
                written += stamp.size
                files += 1
                stack.append(out)
        return written, files

    def budget(self, size: int, root: str) -> Budget:
        """A fresh budget for the root archive `root` of `size` bytes."""
        by_ratio = int(self.limits.max_ratio * size)
        members, where = self.limits.max_members, f"{self.raw_dir.name}/{root}"
        if by_ratio < self.limits.max_bytes:
            return Budget(by_ratio, f"max_ratio {self.limits.max_ratio:g} x {size:,} root archive bytes",
                          members, where)
        return Budget(self.limits.max_bytes, f"max_bytes {self.limits.max_bytes:,}", members, where)
