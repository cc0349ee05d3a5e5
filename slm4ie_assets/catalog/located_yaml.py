"""YAML loading that remembers where every key was written, so config errors carry `file:line`.

Plain `yaml.safe_load` forgets positions and silently keeps the last of two equal keys; the catalog
needs both the line of each key (for located errors) and every key written twice (an error).
"""

from dataclasses import dataclass
from typing import Any

import yaml

MERGE_TAG = "tag:yaml.org,2002:merge"

KeyPath = tuple  # the keys (and list positions) leading from the top of the document to a value


@dataclass(frozen=True, slots=True)
class DuplicateKey:
    path: KeyPath
    first_line: int
    again_line: int


@dataclass(frozen=True)
class YamlLocations:
    """Where each key of a loaded document was written (1-based lines), and the keys written twice."""

    key_lines: dict  # KeyPath -> line of that key; () -> line where the document starts
    duplicates: tuple[DuplicateKey, ...] = ()

    def line_of(self, path: KeyPath) -> int:
        """The line of `path`, or of its nearest written ancestor (a missing key points at its parent)."""
        for end in range(len(path), -1, -1):
            line = self.key_lines.get(path[:end])
            if line is not None:
                return line
        return 1


class _LocatingLoader(yaml.SafeLoader):
    """SafeLoader that remembers the line of every mapping key and every key written twice."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.key_lines_of: dict[int, dict] = {}  # id(mapping) -> {key: line}
        self.duplicates_of: dict[int, list] = {}  # id(mapping) -> [(key, first line, again line)]
        self.mappings: list[dict] = []  # kept alive, so no two mappings ever share an id

    def construct_located_map(self, node: yaml.MappingNode):
        data: dict = {}
        yield data
        self.mappings.append(data)
        self.duplicates_of[id(data)] = self._own_duplicates(node)  # before merge keys are flattened in
        data.update(self.construct_mapping(node))
        self.key_lines_of[id(data)] = {self.construct_object(k): k.start_mark.line + 1 for k, _ in node.value}

    def _own_duplicates(self, node: yaml.MappingNode) -> list:
        """Keys this mapping writes twice itself; overriding a key brought in by `<<:` is allowed."""
        first: dict = {}
        found = []
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:
                continue
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            try:
                if key in first:
                    found.append((key, first[key], line))
                else:
                    first[key] = line
            except TypeError:
                continue  # an unhashable key: construct_mapping refuses it with YAML's own error
        return found


_LocatingLoader.add_constructor("tag:yaml.org,2002:map", _LocatingLoader.construct_located_map)


def load_located_yaml(text: str) -> tuple[Any, YamlLocations]:
    """Parse `text` like `yaml.safe_load`, also returning where every key was written."""
    loader = _LocatingLoader(text)
    try:
        node = loader.get_single_node()
        doc = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    key_lines: dict = {(): node.start_mark.line + 1 if node is not None else 1}
    duplicates: list[DuplicateKey] = []
    _collect_locations(doc, (), loader, key_lines, duplicates, set())
    return doc, YamlLocations(key_lines, tuple(duplicates))


def _collect_locations(value: Any, path: KeyPath, loader: _LocatingLoader, key_lines: dict,
                       duplicates: list, visited: set) -> None:
    """Walk the loaded document once per object (an alias is not walked again, so cycles end)."""
    if not isinstance(value, (dict, list)) or id(value) in visited:
        return
    visited.add(id(value))
    if isinstance(value, list):
        for index, item in enumerate(value):
            _collect_locations(item, path + (index,), loader, key_lines, duplicates, visited)
        return
    for key, line in loader.key_lines_of.get(id(value), {}).items():
        key_lines[path + (key,)] = line
    for key, first, again in loader.duplicates_of.get(id(value), ()):
        duplicates.append(DuplicateKey(path + (key,), first, again))
    for key, item in value.items():
        _collect_locations(item, path + (key,), loader, key_lines, duplicates, visited)
