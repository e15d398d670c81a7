"""The `pivot` command line (also `python -m pivot`). Data on stdout, logs on stderr."""
from __future__ import annotations

import argparse
import json
import logging
import sys

import pivot
from pivot.errors import InputError

QUICK_USAGE = """\
quick usage:
  pivot build --domain bio --data ../shared/data      build bio.db (General model)
  pivot lookup bio.db treatment -k 10                 best paraphrases, best first
  pivot lookup bio.db treat --format json             the same as JSON (or ppdb)
  pivot export bio.db --format ppdb > bio.ppdb        every pair as PPDB 2.0 lines
"""


def _add_build(sub):
    p = sub.add_parser("build", help="build a paraphrase database from a recipe",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    src = p.add_argument_group("what to build")
    which = src.add_mutually_exclusive_group()
    which.add_argument("--domain", default="bio", help="shipped recipe recipes/DOMAIN.toml")
    which.add_argument("--recipe", help="a recipe TOML file of your own")
    src.add_argument("--data", help="data root holding the recipe's files (default: $PIVOT_DATA)")
    dst = p.add_argument_group("where")
    dst.add_argument("--out", help="database path (default: DOMAIN.db)")
    dst.add_argument("--work", help="stage artifacts, reused on rerun (default: work/DOMAIN)")
    p.add_argument("--threads", type=int, default=0, help="threads for the pivot (0: all cores)")
    p.set_defaults(func=cmd_build)


def _add_lookup(sub):
    p = sub.add_parser("lookup", help="paraphrases of a phrase, best first",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("db", help="database written by `pivot build`")
    p.add_argument("phrase", nargs="+", help="the phrase (normalised like the corpus)")
    p.add_argument("-k", type=int, default=10, help="how many paraphrases")
    p.add_argument("--model", default="general", help="model to rank by (see --list-models)")
    p.add_argument("--format", choices=["table", "json", "ppdb"], default="table")
    p.add_argument("--list-models", action="store_true", help="print the database's models and exit")
    p.set_defaults(func=cmd_lookup)


def _add_export(sub):
    p = sub.add_parser("export", help="write every pair of a model in a standard format",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("db")
    p.add_argument("--format", choices=["ppdb"], default="ppdb", help="PPDB 2.0 six-field lines")
    p.add_argument("--model", default="general")
    p.add_argument("--label", default="OtherRelated",
                   help="entailment label field (pivot does not classify entailment)")
    p.add_argument("-o", "--output", help="file to write (default: stdout)")
    p.set_defaults(func=cmd_export)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pivot", description="Domain-specific paraphrase databases by weighted bilingual pivoting.",
        epilog=QUICK_USAGE, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pivot {pivot.__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars or info logs")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_build(sub)
    _add_lookup(sub)
    _add_export(sub)
    return parser


# ---------------------------------------------------------------------------- commands


def cmd_build(args) -> int:
    from pivot.build import run_build

    path = run_build(args.domain if not args.recipe else None, recipe=args.recipe, data=args.data,
                     out=args.out, work=args.work, threads=args.threads, quiet=args.quiet)
    print(path)
    return 0


def cmd_lookup(args) -> int:
    from pivot.db import ParaphraseDB, ppdb_line

    phrase = " ".join(args.phrase)
    with ParaphraseDB(args.db) as db:
        if args.list_models:
            for name in db.models:
                info = db.model_info(name)
                print(f"{name}\t{info['kind']}\t{info['description']}")
            return 0
        hits = db.lookup(phrase, k=args.k, model=args.model)
        query = db.normalize(phrase)
        if args.format == "json":
            json.dump({"phrase": query, "model": args.model, "signature": db.signature,
                       "paraphrases": [h.__dict__ for h in hits]}, sys.stdout, ensure_ascii=False, indent=1)
            print()
        elif args.format == "ppdb":
            for h in hits:
                print(ppdb_line(query, h.paraphrase, h.score, h.p_rev, h.n_pivots, model=args.model))
        else:
            if not hits:
                print(f"no paraphrases of {query!r} under model {args.model}", file=sys.stderr)
                return 1
            width = max(len(h.paraphrase) for h in hits)
            print(f"{'#':>3}  {'paraphrase':<{width}}  {'score':>9}  {'p(e1|e2)':>9}  pivots")
            for h in hits:
                rev = f"{h.p_rev:9.4f}" if h.p_rev is not None else f"{'-':>9}"
                print(f"{h.rank + 1:>3}  {h.paraphrase:<{width}}  {h.score:9.4f}  {rev}  "
                      f"{h.n_pivots}: {', '.join(h.pivots)}")
    return 0


def cmd_export(args) -> int:
    from pivot.db import ParaphraseDB, export_ppdb

    with ParaphraseDB(args.db) as db:
        out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
        try:
            n = export_ppdb(db, out, model=args.model, label=args.label)
        finally:
            if args.output:
                out.close()
    logging.getLogger("pivot").info("exported %d pairs (model %s)", n, args.model)
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr)
    try:
        return args.func(args)
    except InputError as exc:
        print(f"pivot {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `pivot export db | head`
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
