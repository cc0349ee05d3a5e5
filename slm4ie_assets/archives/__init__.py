"""Safe, atomic, idempotent unpacking of the archives under raw/<key>/ (D16, S14).

Runs before any extractor, so extractors only ever see plain files. Every archive at any depth is
unpacked in place next to itself, and archives that come out of archives are unpacked in the same
run, until nothing new appears. One archive's outputs are written under temporary names that match
no extractor and are renamed into place together once the whole archive has been read: a failure
leaves nothing half-written, and a previous good version stays until the new one is complete. A
state file outside the raw tree remembers what each archive produced (with the size and mtime of
every output), so an unchanged archive whose outputs are intact is not unpacked again, and files a
newer version no longer holds are removed. It also remembers failures that lie in an archive's own
bytes, so an unchanged corrupt archive or bomb is reported again without being read again (the
sensor calls this every tick). Before an archive's outputs are renamed into place they are written
down in an intent journal beside the state file (fsynced), which the next run reads back first: a
kill between the renames and the state save frees no output from its record (issue 39). An archive
unpacked again as the same version (a kill, an output lost) first withdraws what it produced, as
recorded, so a root's tree never holds more than its budget; only a NEW version's previous outputs
stay beside it until it is complete.

A member is renamed only over a file the state records as an archive's output: any other file is
somebody's own and is never replaced or removed (issue 39). A member over such a file refuses its
root, unless the file already holds the member's bytes; then it is taken as it is, as found.

Refused with `ArchiveError` (the dataset fails): member paths that are absolute, contain `..`, or
pass through a symlink; links, devices, fifos and any other non-regular member (links are refused
even when they point inside the folder: a link target is resolved at use time, so checking it is
fragile, and corpora have no need for them). Skipped with a warning (S14): an archive that
cannot be read (corrupt, truncated, unsupported) or whose members clash with the tree, and a root
archive (a raw file, not one unpacked from another) that unpacks, at any depth, beyond
`ArchiveLimits`: everything unpacked from one root, nested archives included, is charged to that
root's budget, counted on the bytes actually written, never on header claims, and a breach removes
everything of its tree (issue 34: per-archive budgets multiplied with each level of nesting). A
root whose tree nests archives MAX_ROUNDS deep, or where a member would replace a file no archive
produced, is skipped the same way.

Symlinks in the raw tree are not followed. A linked directory could loop or lead out of the raw
tree (the discovery rule of ADDENDUM 3.1). A linked archive may live outside raw/<key>/ or be a
second name for an archive unpacked elsewhere: its content is not the dataset folder's own, and its
change detection would depend on a file the dataset does not hold. Each one is named in a warning.

The caller holds the dataset lock: leftover temporary files of an interrupted run are removed at
the start of the next one.

The modules, by concern: `names` (which files are archives, member-path rules, temporary names),
`staging` (one archive's outputs, committed or rolled back together), `decoders` (the compressed
stream of an archive on as many threads as pay, zip member streams), with `streams` (the
one-thread gzip, bzip2, xz and zstd decoders, and zstd's frame walker), `pieces` (the blocks of
an xz file, the frames of a zstd file), `parallel_decode` (pieces decoded on threads, in order;
the thread count, `decoding_threads`; the one-thread decoder as the judge) and `gzip_parallel`
(rapidgzip), `formats` (tar, zip, single file), `state` (the state file and the report, typed),
`journal` (the intents), `outputs` (recorded outputs and intents against the disk), `ownership`
(which files an archive produced), `roots` (each archive's root and depth), `run` (the loop).
Only what this module exports is for use outside the package.
"""

from .errors import ArchiveError
from .names import is_temp_name
from .parallel_decode import decoding_threads
from .run import unpack_archives
from .state import ArchiveReport, SkippedArchive

__all__ = ["ArchiveError", "ArchiveReport", "SkippedArchive", "decoding_threads", "is_temp_name", "unpack_archives"]
