"""The two published line formats as Dagster table schemas (docs/formats.md, ADDENDUM 2.1 and 2.2).

`dagster/column_schema` is the metadata key Dagster's UI shows as the asset's columns; a JSONL file
has no table engine behind it, so these describe one JSON object per line, in key order.
"""

from dagster import TableColumn, TableColumnConstraints, TableSchema

_REQUIRED = TableColumnConstraints(nullable=False)

DOCUMENT_SCHEMA = TableSchema(columns=[
    TableColumn("text", "string", "the document text; never blank", constraints=_REQUIRED),
    TableColumn("source", "string", "the dataset key", constraints=_REQUIRED),
    TableColumn("domain", "string", "the dataset's `domain` from extract.yaml", constraints=_REQUIRED),
    TableColumn("doc_id", "string", "the document's id as its source gives it; never blank; may repeat (the "
                "unique_uids check warns)", constraints=_REQUIRED),
    TableColumn("uid", "string", "`<source>:<doc_id>`", constraints=_REQUIRED),
    TableColumn("metadata", "object", "the extractor's document metadata; left out when empty"),
])

SIDECAR_SCHEMA = TableSchema(columns=[
    TableColumn("doc_id", "string", "the text line's doc_id; the sidecar has one line per text line",
                constraints=_REQUIRED),
    TableColumn("uid", "string", "the text line's uid", constraints=_REQUIRED),
    TableColumn("forms", "list<string>", "token forms; absent in a stub line (a document without tokens)"),
    TableColumn("lemmas", "list<string|null>", "parallel to forms"),
    TableColumn("upos", "list<string|null>", "parallel to forms"),
    TableColumn("feats", "list<string|null>", "parallel to forms"),
    TableColumn("space_after", "list<bool>", "parallel to forms"),
    TableColumn("sentences", "list<[int, int]>", "inclusive [start, end] token spans"),
])

COLUMN_SCHEMA = "dagster/column_schema"
SIDECAR_COLUMN_SCHEMA = "sidecar_column_schema"
ROW_COUNT = "dagster/row_count"
