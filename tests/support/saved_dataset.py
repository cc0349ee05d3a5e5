"""A `save_to_disk` folder as `datasets` writes one (state.json, dataset_info.json, an Arrow stream
in batches of 1000 rows whose schema carries the features), written with pyarrow alone: importing
`datasets` costs seconds. The huggingface extractor reads it on its pyarrow path (arrow_dir.py)."""

import json
from collections.abc import Callable
from pathlib import Path

FEATURES = {"text": {"dtype": "string", "_type": "Value"}, "id": {"dtype": "string", "_type": "Value"}}
ARROW_FILE = "data-00000-of-00001.arrow"


def write_saved_dataset(folder: Path, rows: int, text_of: Callable[[int], str]) -> Path:
    """`rows` rows (text `text_of(i)`, id `r<i>`) in a new folder; returns its Arrow file."""
    import pyarrow as pa

    folder.mkdir(parents=True)
    schema = pa.schema([("text", pa.string()), ("id", pa.string())],
                       metadata={"huggingface": json.dumps({"info": {"features": FEATURES}})})
    with pa.OSFile(str(folder / ARROW_FILE), "wb") as sink, pa.ipc.new_stream(sink, schema) as out:
        for start in range(0, rows, 1000):
            ids = range(start, min(rows, start + 1000))
            out.write_batch(pa.record_batch([[text_of(i) for i in ids], [f"r{i}" for i in ids]], schema=schema))
    (folder / "dataset_info.json").write_text(json.dumps({"features": FEATURES}))
    (folder / "state.json").write_text(json.dumps({
        "_data_files": [{"filename": ARROW_FILE}], "_fingerprint": "f", "_format_columns": None,
        "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False, "_split": None}))
    return folder / ARROW_FILE
