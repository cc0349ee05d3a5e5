"""One compressed file unpacked as `archives.formats` unpacks it, on a chosen number of threads
whatever the host's cores (tests of the parallel decoders, in process and in a child)."""

from pathlib import Path

from slm4ie_assets.archives.decoders import open_codec, read_chunks
from slm4ie_assets.archives.errors import BudgetExceeded
from slm4ie_assets.archives.staging import Budget, Staging


def unpack_one(path: Path, codec: str, budget_bytes: int, threads: int) -> BudgetExceeded | None:
    """Stage and commit `path`'s decoded bytes next to it, under a budget of `budget_bytes`: the
    budget's error (everything rolled back), or None."""
    name = path.name.rsplit(".", 1)[0]
    staging = Staging(path, "", "ds/" + path.name, Budget(budget_bytes, "test"), warn=lambda m: None)
    with open(path, "rb") as raw:
        try:
            staging.file([name], name, read_chunks(open_codec(codec, raw, threads)))
        except BudgetExceeded as exc:
            staging.rollback()
            return exc
    staging.commit()
    return None
