"""The `slm4ie` command line: arguments, the catalog, and one line for every expected error.

argparse, not click or typer: with `OneLineParser` it already gives one-line errors and exit 2, and
the commands are a handful of flags; a library would add a dependency and change no behaviour."""

import argparse
import sys
from collections.abc import Sequence

from ..catalog import Catalog, CatalogError, DatasetSpec, load_catalog
from ..engine.pool_server import effective_workers, start_early
from ..remedies import remedy_for, with_remedy
from .config import choose_catalog
from .output import UsageError, shown, shown_message
from .select import parse_field, parse_regex, parse_where
from .slices import parse_slice


class OneLineParser(argparse.ArgumentParser):
    """argparse prints its usage block before an error; a script reading our stderr wants one line."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {message} (see {self.prog.split()[0]} --help)")


DEFAULT_N = 5  # documents `inspect` shows


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"wants a whole number of at least 1, not {text!r}")
    return int(text)


def not_negative(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"wants a whole number of at least 0, not {text!r}")
    return int(text)


def whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"wants a whole number, not {text!r}") from None


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="slm4ie", description="Look at extracted datasets; extract and publish without a "
                           "Dagster instance. The first line names the catalog read (on stderr with --json).")
    parser.add_argument("--config", help="the catalog (default: $SLM4IE_EXTRACT_CONFIG, else ./extract.yaml in "
                                         "the working folder, else the project's own)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    p = sub.add_parser("inspect", help="page through published documents, one shard's, or the dropped records")
    p.add_argument("key", help="dataset key in extract.yaml")
    p.add_argument("--shard", help="the documents of this shard's current part instead of the published file")
    p.add_argument("--n", type=positive, help=f"how many documents (default {DEFAULT_N})")
    p.add_argument("--skip", type=not_negative, help="documents to skip first (paging)")
    p.add_argument("--sample", type=positive, metavar="N", help="N documents drawn at random, in file order")
    p.add_argument("--seed", type=whole, help="with --sample: its seed (default 0: the same sample every time)")
    p.add_argument("--grep", type=parse_regex, metavar="REGEX", help="only documents whose text matches")
    p.add_argument("--where", type=parse_where, action="append", metavar="FIELD=VALUE",
                   help="only documents whose field (uid, metadata.NAME, ...) is VALUE or lists it; repeatable")
    p.add_argument("--dropped", action="store_true", help="the records the drop ledger counted: file:line, reason")
    p.add_argument("--annotated", action="store_true", help="only annotated documents, with their tokens")
    p.add_argument("--json", action="store_true", help="one JSON object per document (JSON Lines)")
    p = sub.add_parser("stats", help="every dataset in one table; with KEY its summary, length distributions "
                                     "and drop ledger")
    p.add_argument("key", nargs="?", help="dataset key in extract.yaml (none: every dataset)")
    p.add_argument("--by", type=parse_field, metavar="FIELD", help="with KEY: counts per value of FIELD "
                                                                   "(metadata.NAME)")
    p.add_argument("--json", action="store_true", help="JSON instead of the table")
    p = sub.add_parser("extract", help="unpack, extract the stale shards and publish (plain Python, no Dagster)")
    p.add_argument("key", help="dataset key in extract.yaml")
    p.add_argument("--force", action="store_true", help="extract every shard again and publish")
    p.add_argument("--workers", type=positive, help="worker processes (default: max_workers in extract.yaml)")
    p.add_argument("--slice", type=parse_slice, metavar="I/N",
                   help="only the I-th of N slices of the shards (a batch array job); needs --no-publish")
    p.add_argument("--no-publish", action="store_true", help="write parts only; `slm4ie publish KEY` later")
    p = sub.add_parser("publish", help="publish once every part is current (names what is missing otherwise)")
    p.add_argument("key", help="dataset key in extract.yaml")
    p = sub.add_parser("status", help="which shards are current, stale or missing, and which slice owns each")
    p.add_argument("key", help="dataset key in extract.yaml")
    p.add_argument("--slices", type=positive, metavar="N", help="name the owner of each shard among N slices")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    return parser


def dataset(catalog: Catalog, key: str) -> DatasetSpec:
    if key not in catalog.datasets:
        raise UsageError(f"slm4ie: no dataset {key!r} in {catalog.path} (one of {', '.join(catalog.datasets)})")
    return catalog.dataset(key)


def given(args: argparse.Namespace, *flags: str) -> list[str]:
    """Which of `flags` the command line set (every one of them defaults to None or False)."""
    return [f"--{flag}" for flag in flags if getattr(args, flag) not in (None, False, [])]


def check_combinations(args: argparse.Namespace) -> None:
    """Flags that cannot go together, or one that would be ignored: one line, exit 2, before anything is read."""
    if args.command == "inspect":
        if args.dropped and (extra := given(args, "sample", "seed", "n", "skip", "grep", "where", "annotated",
                                            "shard")):
            raise UsageError(f"slm4ie inspect: --dropped lists the drop ledger; it takes no {', '.join(extra)}")
        if args.sample is not None and (extra := given(args, "n", "skip")):
            raise UsageError(f"slm4ie inspect: --sample N draws N from every document; it takes no "
                             f"{' or '.join(extra)}")
        if args.seed is not None and args.sample is None:
            raise UsageError("slm4ie inspect: --seed picks the random sample; it needs --sample N")
        args.n, args.skip, args.seed = args.n or DEFAULT_N, args.skip or 0, args.seed or 0
    if args.command == "stats" and args.by is not None and args.key is None:
        raise UsageError("slm4ie stats: --by needs a dataset key (slm4ie stats KEY --by metadata.NAME)")
    if args.command == "extract" and args.slice is not None and not args.no_publish:
        raise UsageError("slm4ie extract: --slice needs --no-publish (publish once, after every slice)")


def dispatch(args: argparse.Namespace) -> int:
    check_combinations(args)
    choice = choose_catalog(args.config)
    catalog = load_catalog(choice.path)  # its errors, and a key not in it, name the file: one line
    spec = None if args.command == "stats" and args.key is None else dataset(catalog, args.key)
    # then the first line says which catalog was read (stderr under --json: stdout stays pure JSON)
    print(shown(choice.line()), file=sys.stderr if getattr(args, "json", False) else sys.stdout, flush=True)
    if args.command == "stats":
        from . import stats

        return stats.stats(catalog, spec, args)
    assert spec is not None
    if args.command == "extract":  # the pool's server imports on another core while we import the pipeline
        start_early(effective_workers(args.workers, catalog.max_workers))
    from . import look, run

    if args.command == "inspect":
        return look.inspect(spec, args)
    if args.command == "publish":
        return run.publish_when_current(spec, catalog)
    if args.command == "status":
        from . import status as status_command

        return status_command.status(spec, catalog, slices=args.slices, as_json=args.json)
    return run.extract(spec, catalog, args.force, args.workers, args.slice, publish=not args.no_publish)


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status: 0 done, 1 an expected error (its message, one line; a bad catalog lists every
    problem), 2 a bad argument (one line, nothing on stdout before it when it is the command line's)."""
    try:
        return dispatch(build_parser().parse_args(argv))
    except UsageError as exc:
        print(shown(exc), file=sys.stderr)
        return 2
    except CatalogError as exc:
        print(shown_message(str(exc)), file=sys.stderr)
        return 1
    except BrokenPipeError:  # `slm4ie inspect ... | head`
        sys.stderr.close()
        return 0
    except Exception as exc:
        message = expected_error_line(exc)
        if message is None:
            raise  # a bug: keep its traceback
        print(shown(f"slm4ie: {message}"), file=sys.stderr)
        return 1


def expected_error_line(exc: Exception) -> str | None:
    """An expected error worded as the Dagster layer words it (remedies.py), as one line; None for a bug."""
    remedy = remedy_for(exc)
    return None if remedy is None else with_remedy(str(exc), remedy)


if __name__ == "__main__":
    sys.exit(main())
