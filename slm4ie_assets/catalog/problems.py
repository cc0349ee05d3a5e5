"""The catalog's problems, gathered while extract.yaml is checked and raised as one error at the end
(D15): every problem at once, each at the `file:line` of the key it is about, in line order."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .fields import Setting

if TYPE_CHECKING:
    from .located_yaml import KeyPath, YamlLocations


class CatalogError(ValueError):
    """One or more problems in extract.yaml; the message lists every one."""


def dotted(path: KeyPath) -> str:
    return ".".join(str(part) for part in path)


@dataclass
class Problems:
    """Every problem found so far, each with the line it points at when the file's lines are known."""

    locations: YamlLocations | None
    found: list[tuple[int, str]] = field(default_factory=list)

    def add(self, path: KeyPath, message: str) -> None:
        self._append(path, f"{dotted(path)}: {message}" if path else message)

    def add_reported(self, base: KeyPath, text: str) -> None:
        """A message from an extractor's own validation, which starts with the dotted path it is about."""
        head = text.split(": ", 1)[0]
        prefix = dotted(base)
        path = base
        if head.startswith(prefix + ".") and len(head) > len(prefix) + 1:
            path = base + tuple(head[len(prefix) + 1:].split("."))
        self._append(path, text)

    def _append(self, path: KeyPath, text: str) -> None:
        line = self.locations.line_of(path) if self.locations is not None else 0
        self.found.append((line, text))

    def __len__(self) -> int:
        return len(self.found)

    def raise_if_any(self, file: Path) -> None:
        if not self.found:
            return
        ordered = sorted(self.found, key=lambda item: item[0])  # stable: one line's problems keep their order
        if self.locations is None:
            lines = "\n".join(f"  - {text}" for _, text in ordered)
        else:
            lines = "\n".join(f"  - {file}:{line}: {text}" for line, text in ordered)
        raise CatalogError(f"{file}: {len(ordered)} problem(s) in the extraction config:\n{lines}")


def setting_value(mapping: dict, where: KeyPath, setting: Setting, problems: Problems, default: Any = None) -> Any:
    """A plain setting checked by its row of the field table, else `default` (the table's when None)."""
    default = setting.default if default is None else default
    value = mapping.get(setting.name, default)
    if value is None and setting.nullable:
        return default
    if not setting.accepts(value):
        problems.add(where + (setting.name,), f"expected {setting.expected}, got {value!r}")
        return default
    return value
