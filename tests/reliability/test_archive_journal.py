"""The intent journal read back (issue 39, case 3; D16): a last line cut short by a kill is ignored
(its archive's renames had not begun), and a journal the saved state already holds is not read
again. `test_archive_kills.py` kills a nested unpack at every step; this file holds the two
windows of the journal itself."""

import json

from slm4ie_assets.archives import unpack_archives
from slm4ie_assets.archives.journal import Intent, Journal, journal_path, read_journal
from slm4ie_assets.archives.state import ArchiveEntry, OutputStamp, load_state, save_state
from support.archive_files import files_under, tar_of
from support.files import write_files


def test_a_journal_cut_short_or_already_saved_is_not_read_back(tmp_path):
    """A last line cut short by a kill is ignored (its renames had not begun); a journal the saved
    state already holds (a kill between the state's save and the journal's removal) is not read
    again: its intents could undo what the run did after them."""
    raw, state = tmp_path / "raw" / "t", tmp_path / "state" / "archives.json"
    write_files(raw, {"a.tar": tar_of({"x.txt": b"x\n"})})
    unpack_archives(raw, state)
    entry = load_state(state, print).archives["a.tar"]
    ghost = ArchiveEntry(entry.size, entry.mtime_ns, {**entry.outputs, "ghost.txt": OutputStamp(1, 1)})
    journal = Journal(journal_path(state))

    journal.append(Intent("a.tar", ghost))  # whole, but the saved state holds it already
    held = load_state(state, print)
    held.journal = journal.name
    save_state(state, held)
    journal.close()
    assert unpack_archives(raw, state).up_to_date == ["a.tar"], "read back, the ghost would unpack it again"
    assert list(load_state(state, print).archives["a.tar"].outputs) == ["x.txt"]
    assert not journal_path(state).exists()

    journal = Journal(journal_path(state))
    journal.append(Intent("a.tar", entry))
    journal.close()
    with open(journal_path(state), "ab") as fh:
        fh.write(json.dumps({"archive": "a.tar", "entry": ghost.to_json()}).encode()[:-3])  # no newline
    assert [intent.entry for intent in read_journal(journal_path(state), "", print)[1]] == [entry]
    assert unpack_archives(raw, state).up_to_date == ["a.tar"]
    assert list(load_state(state, print).archives["a.tar"].outputs) == ["x.txt"]
    assert not journal_path(state).exists() and files_under(raw) == {"a.tar", "x.txt"}
