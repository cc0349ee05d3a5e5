"""The text content of a TEI element, with one reading per `<choice>` (D13, S6).

Used for a token's form when the token has child markup, for a plain `<p>`, and for a D19 `<seg>`.
Iterative, so nesting depth is bounded by the parser (256, or 2048 under huge_tree) and never by
Python's recursion limit.
"""

from itertools import islice

from lxml import etree

from .names import CHOICE, CHOICE_PREFERENCE

_ENTITY = etree.Entity


def choose_reading(choice):
    """The `<choice>` child to read: reg, corr, expan, then orig, sic, abbr, then the first child
    element; None when it has no element child."""
    first = None
    best = None
    best_rank = len(CHOICE_PREFERENCE)
    for child in choice:
        tag = child.tag
        if tag.__class__ is not str:
            continue  # comment, processing instruction, entity reference
        if first is None:
            first = child
        try:
            rank = CHOICE_PREFERENCE.index(tag)
        except ValueError:
            continue
        if rank < best_rank:
            best, best_rank = child, rank
            if rank == 0:
                break
    return best if best is not None else first


class TextCollector:
    """Collects text content; counts entity references it cannot expand (they are never expanded,
    for safety) so the caller can put them in the drop ledger (`report_unexpanded`)."""

    __slots__ = ("skip", "unexpanded", "verbatim")

    def __init__(self, skip: frozenset = frozenset(), verbatim=frozenset()):
        self.skip = skip  # tags whose content is not text (their tails still are), e.g. <note>
        self.unexpanded: list = []  # (entity text, line) of every entity reference met
        # references kept as written instead (`"&name;" in verbatim`): macocu's undeclared ones,
        # which it counts apart as `undefined_entity`
        self.verbatim = verbatim

    def text(self, el) -> str:
        """All descendant text and tails of `el` (not its own tail); comments and processing
        instructions excluded (their tails kept); inside `<choice>` only the chosen reading."""
        parts = []
        if el.text:
            parts.append(el.text)
        self._read(iter(el), parts)
        return "".join(parts)

    def take(self, el) -> str:
        """What `text(el)` reads so far of an element a feed parser is still building, which then
        lets go of it: the text read is removed from the tree and the children read are deleted, so
        the texts `take` gives and `text(el)` at the end, joined, are `text(el)` of the whole.

        The elements still open are the chain of last children from `el`, so every other child has
        ended and its tail is complete (a sibling began after it). A text node the parser is still
        appending to is read and removed too: the parser then starts a new one (libxml2 merges only
        into a text node that is still its element's last child). The walk goes down the chain and
        stops at a `<choice>` or a skipped tag, whose reading needs its end; past the bottom it
        reads the chain's tails upwards (each lies after everything below it)."""
        parts: list = []
        chain = []
        node = el
        while True:
            if node.text:
                parts.append(node.text)
                node.text = None
            count = len(node)
            if not count:
                break
            if count > 1:
                self._read(islice(iter(node), count - 1), parts)
                del node[:-1]
            last = node[-1]
            tag = last.tag
            if tag.__class__ is not str:  # an entity reference, comment or PI: whole once made
                self._read(iter((last,)), parts)
                del node[-1]  # it was the only child left, and what it holds was read
                break
            if tag == CHOICE or tag in self.skip:
                return "".join(parts)  # its tail and the tails above wait for its end
            chain.append(last)
            node = last
        for done in reversed(chain):
            if done.tail:
                parts.append(done.tail)
                done.tail = None
        return "".join(parts)

    def _read(self, children, parts: list) -> None:
        """Append to `parts` the text of each of `children` (siblings, in order) and its tail."""
        skip = self.skip
        # frames: (iterator over children still to visit, text to append once they are done)
        stack = [(children, None)]
        while stack:
            children, after = stack[-1]
            for child in children:
                tag = child.tag
                if tag.__class__ is str:
                    if tag == CHOICE:
                        chosen = choose_reading(child)
                        if chosen is not None and chosen.tag not in skip:
                            if chosen.text:
                                parts.append(chosen.text)
                            # the reading's own tail lies inside <choice>: only the choice's tail follows
                            stack.append((iter(chosen), child.tail))
                            break
                    elif tag not in skip:
                        if child.text:
                            parts.append(child.text)
                        stack.append((iter(child), child.tail))
                        break
                elif tag is _ENTITY:
                    if child.text in self.verbatim:
                        parts.append(child.text)
                    else:
                        self.unexpanded.append((child.text, child.sourceline))
                if child.tail:
                    parts.append(child.tail)
            else:
                stack.pop()
                if after:
                    parts.append(after)


def report_unexpanded(found: list, drop, where: str, missing: str = "its text is missing") -> None:
    """One `unexpanded_entity` drop per (entity text, line) in `found`, which is then emptied."""
    for name, line in found:
        drop("unexpanded_entity", f"entity reference {name} in {where} is never expanded; {missing}", line)
    found.clear()
