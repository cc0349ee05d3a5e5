"""The drop ledger: what an extraction skipped, counted by reason, and the warnings it keeps (D6)."""

from collections import Counter
from dataclasses import dataclass, field

MAX_WARNINGS_KEPT = 100


@dataclass
class DropLedger:
    """Everything skipped, counted by reason, and the warnings kept verbatim, in the order they
    arose. The one cap (docs/splitting.md, "Warnings"): each input file keeps the warnings of its
    first 100 drops and of its first 100 repaired documents (MAX_WARNINGS_KEPT per kind), whether
    it is read whole or in ranges; `start_file` opens a file's (or a range's) room, less what the
    file's earlier ranges already kept."""

    counts: Counter = field(default_factory=Counter)
    warnings: list = field(default_factory=list)  # drop and repair warnings, in input order
    limit: int = MAX_WARNINGS_KEPT  # drop warnings the current file may still keep
    repair_limit: int = MAX_WARNINGS_KEPT  # repair warnings likewise

    def start_file(self, drops_before: int = 0, repairs_before: int = 0, keep: bool = True) -> None:
        """A new input file (or range) begins: its room is the file's first 100 of each kind, less
        the drops and repaired documents of its earlier ranges; `keep` False keeps none (a count)."""
        self.limit = max(0, MAX_WARNINGS_KEPT - drops_before) if keep else 0
        self.repair_limit = max(0, MAX_WARNINGS_KEPT - repairs_before) if keep else 0

    def add(self, reason: str, message: str) -> None:
        self.counts[reason] += 1
        if self.limit > 0:
            self.limit -= 1
            self.warnings.append(message)

    def add_repair(self, message: str) -> None:
        """A repaired document's warning (its count is the part writer's `repairs`)."""
        if self.repair_limit > 0:
            self.repair_limit -= 1
            self.warnings.append(message)

    @property
    def total(self) -> int:
        return sum(self.counts.values())
