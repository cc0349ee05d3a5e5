"""The text content of a TEI element, with one reading per `<choice>` (D13, S6).

Used for a token's form when the token has child markup, for a plain `<p>`, for a D19 `<seg>`, and,
a batch at a time while the parse goes on (`take`), for macocu's paragraphs under a cap.
Iterative, so nesting depth is bounded by the parser (256, or 2048 under huge_tree) and never by
Python's recursion limit.
"""

from lxml import etree

from .names import CHOICE, CHOICE_PREFERENCE

_ENTITY = etree.Entity
# libxml2 stores 65,535 for a later line and then gives an element the line of its first child or a
# neighbour, and a reference the line of the node before it or of its parent (xmlGetLineNo)
BIG_LINE = 65535


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

    def take(self, el, lines: bool = False) -> str:
        """What `text(el)` reads so far of an element a feed parser is still building, which then
        lets go of it: the text read is removed from the tree and the children read are deleted, so
        the texts `take` gives and `text(el)` at the end, joined, are `text(el)` of the whole.

        The elements still open are the chain of last children from `el`, so every other child has
        ended and its tail is complete (a sibling began after it). The walk goes down the chain and
        stops at a `<choice>` or a skipped tag, whose reading needs its end; past the bottom it
        reads the chain's tails upwards (each lies after everything below it), and the text node
        the parser is still appending to is read and removed too: the parser then starts a new one
        (libxml2 merges only into a text node that is still its element's last child).

        `lines`: keep the line libxml2 gives every entity reference (that of the node before it,
        or its parent's when that node is gone or a reference), for a file whose DOCTYPE makes
        references possible. Then a node is read only when an element follows it, whose line is
        its own, and a text node still open at the end (a tail, a leaf's text) stays whole; from
        line 65,535 on, where an element's line is read from its children, nothing is taken."""
        if lines and not _lines_are_their_own(el):
            return ""
        parts: list = []
        cuts: list = []  # (node, its text read, how many of its first children were read)
        chain = []
        tails = not lines  # the chain's tails, once everything below them was read
        node = el
        while True:
            children = list(node)
            count = len(children)
            is_element = [child.tag.__class__ is str for child in children]
            if not count:
                read, text = 0, not lines
            elif lines:
                # up to the last child followed by an element: what comes after that keeps its line
                read = next((i for i in range(count - 1, 0, -1) if is_element[i]), 0)
                text = read > 0 or is_element[0]
            else:
                read, text = (count - 1 if is_element[-1] else count), True
            if text and node.text:
                parts.append(node.text)
            self._read(iter(children[:read]), parts)
            cuts.append((node, text, read))
            if read == count or not is_element[-1]:
                break  # the bottom (read through), or an entity reference kept for its line
            last = children[-1]
            if last.tag == CHOICE or last.tag in self.skip:
                tails = False  # its tail and the tails above wait for its end
                break
            chain.append(last)
            node = last
        if tails:
            for done in reversed(chain):
                if done.tail:
                    parts.append(done.tail)
                    cuts.append((done, False, -1))
        for node, text, read in cuts:  # after reading: a reference's line is read from its neighbours
            if read < 0:
                node.tail = None
                continue
            if text:
                node.text = None
            if read:
                del node[:read]
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


def _lines_are_their_own(el) -> bool:
    """Whether `el` and the open elements in it (the chain of last children) all begin before line
    65,535: past it an element's line is read from its children and neighbours, which `take`
    would change."""
    node = el
    while True:
        line = node.sourceline
        if line is None or line >= BIG_LINE:
            return False
        if not len(node):
            return True
        node = node[-1]
        if node.tag.__class__ is not str:
            return True


def report_unexpanded(found: list, drop, where: str, missing: str = "its text is missing") -> None:
    """One `unexpanded_entity` drop per (entity text, line) in `found`, which is then emptied."""
    for name, line in found:
        drop("unexpanded_entity", f"entity reference {name} in {where} is never expanded; {missing}", line)
    found.clear()
