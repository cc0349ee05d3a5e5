"""The `slm4ie` command line: arguments, the catalog, and one line for every expected error."""

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from ..catalog import Catalog, CatalogError, DatasetSpec, load_catalog
from ..pool_server import effective_workers, start_early


class UsageError(Exception):
    """A bad argument: one line, exit 2."""


class OneLineParser(argparse.ArgumentParser):
    """argparse prints its usage block before an error; a script reading our stderr wants one line."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {message} (see {self.prog.split()[0]} --help)")


@dataclass(frozen=True)
class Slice:
    """The I-th of N slices (1-based), as `--slice I/N` gives it."""

    index: int
    count: int


def parse_slice(text: str) -> Slice:
    i, sep, n = text.partition("/")
    if not (sep and i.isdigit() and n.isdigit() and 1 <= int(i) <= int(n)):
        raise argparse.ArgumentTypeError(f"--slice wants I/N with 1 <= I <= N, not {text!r}")
    return Slice(int(i), int(n))


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"wants a whole number of at least 1, not {text!r}")
    return int(text)


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="slm4ie", description="Look at extracted datasets; extract and publish without a "
                           "Dagster instance. Reads extract.yaml ($SLM4IE_EXTRACT_CONFIG).")
    parser.add_argument("--config", help="the catalog (default: $SLM4IE_EXTRACT_CONFIG, else ./extract.yaml)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    p = sub.add_parser("inspect", help="page through published documents, one shard's, or the dropped records")
    p.add_argument("key", help="dataset key in extract.yaml")
    p.add_argument("--shard", help="the documents of this shard's current part instead of the published file")
    p.add_argument("--n", type=positive, default=5, help="how many documents (default 5)")
    p.add_argument("--skip", type=int, default=0, help="documents to skip first (paging)")
    p.add_argument("--dropped", action="store_true", help="the records the drop ledger counted: file:line, reason")
    p.add_argument("--annotated", action="store_true", help="only annotated documents, with their tokens")
    p = sub.add_parser("stats", help="summary, length distributions and drop ledger of the published version")
    p.add_argument("key", help="dataset key in extract.yaml")
    p = sub.add_parser("extract", help="unpack, extract the stale shards and publish (plain Python, no Dagster)")
    p.add_argument("key", help="dataset key in extract.yaml")
    p.add_argument("--force", action="store_true", help="extract every shard again and publish")
    p.add_argument("--workers", type=positive, help="worker processes (default: max_workers in extract.yaml)")
    p.add_argument("--slice", type=parse_slice, metavar="I/N",
                   help="only the I-th of N slices of the shards (a batch array job); needs --no-publish")
    p.add_argument("--no-publish", action="store_true", help="write parts only; `slm4ie publish KEY` later")
    p = sub.add_parser("publish", help="publish once every part is current (names what is missing otherwise)")
    p.add_argument("key", help="dataset key in extract.yaml")
    return parser


def dataset(catalog: Catalog, key: str) -> DatasetSpec:
    if key not in catalog.datasets:
        raise UsageError(f"slm4ie: no dataset {key!r} in {catalog.path} (one of {', '.join(catalog.datasets)})")
    return catalog.dataset(key)


def dispatch(args: argparse.Namespace) -> int:
    catalog = load_catalog(args.config)
    spec = dataset(catalog, args.key)
    if args.command == "extract":  # the pool's server imports on another core while we import the pipeline
        start_early(effective_workers(args.workers, catalog.max_workers))
    from . import look, run

    if args.command == "inspect":
        return look.inspect(spec, args)
    if args.command == "stats":
        return look.stats(spec)
    if args.command == "publish":
        return run.publish_when_current(spec, catalog)
    if args.slice is not None and not args.no_publish:
        raise UsageError("slm4ie extract: --slice needs --no-publish (publish once, after every slice)")
    return run.extract(spec, catalog, args.force, args.workers, args.slice, publish=not args.no_publish)


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status: 0 done, 1 an expected error (its message, one line), 2 a bad argument."""
    try:
        return dispatch(build_parser().parse_args(argv))
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except CatalogError as exc:
        print(exc, file=sys.stderr)
        return 1
    except BrokenPipeError:  # `slm4ie inspect ... | head`
        sys.stderr.close()
        return 0
    except Exception as exc:
        message = expected_error_line(exc)
        if message is None:
            raise  # a bug: keep its traceback
        print(f"slm4ie: {message}", file=sys.stderr)
        return 1


def expected_error_line(exc: Exception) -> str | None:
    """The Dagster layer's wording for the same expected errors (user_errors.py), as one line."""
    from ..user_errors import remedy_for

    remedy = remedy_for(exc)
    if remedy is None:
        return None
    text = str(exc).rstrip(". ")
    return f"{text}. What to do: {remedy.what_to_do}." if remedy.what_to_do else f"{text}."


if __name__ == "__main__":
    sys.exit(main())
