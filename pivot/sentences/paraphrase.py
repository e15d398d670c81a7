"""Sentence paraphrasing with a paraphrase database: a monotone phrase-based decoder.

A sentence is normalised like the build (:func:`pivot.text.normalize`: NFC, Moses tokens,
lowercase). Every span of up to ``max_span`` words that the database knows gets its top-``k``
paraphrases under the chosen model (:meth:`PhraseTable.options`, cached per span); every word
also gets the identity option. A left-to-right (monotone) beam search picks one option per
stretch of the sentence, maximising

    score = tm · Σ log p(e2|e1)  + tm_rev · Σ log p(e1|e2)     over the replaced spans
          + rule · Σ (rule log-odds)                             over the replaced spans
          + λ · ln p_LM(output)             kenlm, natural log, with <s> and </s>
          + β · (number of source words kept as they are)
          + ω · (number of output words)

``λ`` (``lm``), ``β`` (``identity``) and ``ω`` (``word_penalty``) are :class:`pivot.sentences.rewrite.Weights`; the
defaults :data:`DEFAULT_WEIGHTS` were tuned on the MSRP training positives for iBLEU
(bench/bench_sentences.py --tune, bench/results/sentences_tuning.json). The rule log-odds come
from a :class:`pivot.sentences.rules.RuleModel` (0 without one); with a *gate*, the best output
that changes something is kept only when the mean log-odds of its replaced spans reaches the
gate, else the source is returned (bench/bench_sentences.py --tune-rules).

Hypotheses are grouped by the number of source words they cover (monotone: every hypothesis of
a stack covers the same prefix, so no future cost is needed) and pruned to ``beam`` per stack;
hypotheses with the same output so far are recombined. The output is detokenised with the
Moses detokeniser (sacremoses) after true-casing: words kept from the source keep their
original case, replaced words are lower-case, except that a replaced first word is capitalised
when the source's first word was.
"""
from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from pivot.errors import InputError
from pivot.sentences.rewrite import FUNCTION_WORDS, Weights, is_partial
from pivot.sentences.rules import RuleModel

LN10 = math.log(10.0)


# Tuned for iBLEU on the first 400 MSRP train positives, model General with the general LM
# (bench/bench_sentences.py --tune; bench/results/sentences_tuning.json): the best setting among
# those that change at least half of the sentences (55% there). The unconstrained best
# (lm 0.25, identity 1.0) changes only 7% of the sentences, since on MSRP almost every change
# costs more BLEU against the reference than it saves against the source (docs/sentences.md).
DEFAULT_WEIGHTS = Weights(lm=1.0, identity=2.0, word_penalty=0.0, tm=1.0, tm_rev=0.0)

_PUNCT = re.compile(r"^\W+$")
REV_FLOOR = math.log(1e-3)


@dataclass(frozen=True)
class Option:
    """One lattice edge: source words [start, end) rewritten as `out` (a tuple of tokens)."""

    start: int
    end: int
    out: tuple
    logp: float          # log p(e2|e1); 0.0 for the identity
    identity: bool
    logp_rev: float = 0.0   # log p(e1|e2) (REV_FLOOR where the reverse pair is missing); 0.0 for the identity
    rule: float = 0.0       # learned log-odds that the rewrite is one a news paraphrase makes (RuleModel)


@dataclass
class Paraphrased:
    """One decoded output."""

    text: str                       # detokenised, true-cased
    tokens: list                    # normalised output tokens
    score: float
    features: dict                  # tm, lm (ln), identity words, output words
    replaced: list = field(default_factory=list)   # [(source span, paraphrase, log p)]

    @property
    def changed(self) -> bool:
        return bool(self.replaced)

    def to_json(self) -> dict:
        return asdict(self)


# ------------------------------------------------------------------------------ phrase table


class PhraseTable:
    """Paraphrase options of spans from a :class:`pivot.store.db.ParaphraseDB`, cached per span.

    ``options(span)`` returns [(paraphrase tokens tuple, log p, log p_rev)] best first: the top ``k``
    paraphrases of the span under ``model`` with a positive score, the span itself excluded.
    With ``drop_partial`` (default) a paraphrase that only adds or removes words at the span's
    edges (:func:`pivot.sentences.rewrite.is_partial`) or changes its punctuation (:func:`_same_punct`) is dropped.
    Spans that are punctuation only get no options; with ``content_only`` neither do spans of
    function words only (:data:`pivot.sentences.rewrite.FUNCTION_WORDS`: "'s" -> "is", "an" -> "a", "it" -> "he" are
    pivoting's commonest wrong substitutions). Existence is asked in one SQL query per
    batch of spans (most spans are not phrases of the database).
    """

    def __init__(self, db, model: str = "general", k: int = 8, drop_partial: bool = True,
                 content_only: bool = False):
        self.db = db
        self.model = model
        self.k = k
        self.drop_partial = drop_partial
        self.content_only = content_only
        # InputError for an unknown model; a combined model has no reverse score (its log p_rev is 0)
        self._combined = db.model_info(model)["kind"] == "combined"
        self._cache: dict[str, list] = {}
        self.details: dict[tuple, tuple] = {}   # (span, paraphrase tokens) -> (n_pivots, rank among all)

    def prefetch(self, spans) -> None:
        todo = [s for s in dict.fromkeys(spans) if s not in self._cache]
        if not todo:
            return
        known = set(self.db.phrase_ids(todo))
        for s in todo:
            if s not in known or all(_PUNCT.match(w) for w in s.split()) or (
                    self.content_only and all(w in FUNCTION_WORDS for w in s.split())):
                self._cache[s] = []
                continue
            opts = []
            for h in self.db.lookup(s, k=self.k, model=self.model, normalize=False):
                if h.score <= 0 or h.paraphrase == s:
                    continue
                if self.drop_partial and (is_partial(s, h.paraphrase) or not _same_punct(s, h.paraphrase)):
                    continue
                rev = math.log(h.p_rev) if h.p_rev else (0.0 if self._combined else REV_FLOOR)
                out = tuple(h.paraphrase.split())
                opts.append((out, math.log(h.score), rev))
                self.details[(s, out)] = (h.n_pivots, h.rank)
            self._cache[s] = opts

    def options(self, span: str) -> list:
        if span not in self._cache:
            self.prefetch([span])
        return self._cache[span]

    def __len__(self):
        return len(self._cache)


def _same_punct(a: str, b: str) -> bool:
    """Both phrases hold the same punctuation tokens ("a new drug" -> "a new ," is noise)."""
    return sorted(w for w in a.split() if _PUNCT.match(w)) == sorted(w for w in b.split() if _PUNCT.match(w))


def build_lattice(tokens, table: PhraseTable, max_span: int = 5) -> list[list[Option]]:
    """Options by start position: the identity of each word, then every span's paraphrases."""
    n = len(tokens)
    spans = [(i, j) for i in range(n) for j in range(i + 1, min(n, i + max_span) + 1)]
    table.prefetch(" ".join(tokens[i:j]) for i, j in spans)
    lattice = [[Option(i, i + 1, (tokens[i],), 0.0, True)] for i in range(n)]
    for i, j in spans:
        for out, logp, rev in table.options(" ".join(tokens[i:j])):
            lattice[i].append(Option(i, j, out, logp, False, rev))
    return lattice


# ------------------------------------------------------------------------------ language model


class LanguageModel:
    """kenlm model scoring in natural log; ``None`` path gives a uniform (zero) model."""

    def __init__(self, path=None):
        self.path = path
        self.model = None
        if path is not None:
            import kenlm

            p = Path(path)
            if not p.is_file():
                raise InputError("no such language model file", p)
            config = kenlm.Config()
            config.show_progress = False            # no "Reading ... ****" on stderr
            config.arpa_complain = kenlm.ARPALoadComplain.NONE
            try:
                self.model = kenlm.Model(str(p), config)
            except (OSError, RuntimeError, Exception) as exc:  # kenlm raises OSError or a bare Exception
                raise InputError(f"not a kenlm ARPA or binary language model ({exc})", p) from None

    def begin(self):
        if self.model is None:
            return None
        import kenlm

        s = kenlm.State()
        self.model.BeginSentenceWrite(s)
        return s

    def score_words(self, state, words):
        """(ln p of the words after `state`, new state)."""
        if self.model is None:
            return 0.0, None
        import kenlm

        total = 0.0
        m = self.model
        for w in words:
            out = kenlm.State()
            total += m.BaseScore(state, w, out)
            state = out
        return total * LN10, state

    def end(self, state):
        if self.model is None:
            return 0.0
        import kenlm

        return self.model.BaseScore(state, "</s>", kenlm.State()) * LN10

    def sentence(self, words) -> float:
        """ln p(<s> words </s>)."""
        if self.model is None:
            return 0.0
        return self.model.score(" ".join(words), bos=True, eos=True) * LN10


# ------------------------------------------------------------------------------ search


def decode_lattice(lattice, lm: LanguageModel, weights: Weights = DEFAULT_WEIGHTS, *, beam: int = 8,
                   nbest: int = 1, require_change: bool = False):
    """Beam search over a lattice: up to `nbest` distinct outputs, best first, as tuples
    (score, options, features dict).

    ``require_change``: only outputs with at least one replaced span qualify (the identity is
    returned only when no other output survives the beam).
    """
    n = len(lattice)
    lam, beta, omega = weights.lm, weights.identity, weights.word_penalty
    tm_w, rev_w, rule_w = weights.tm, weights.tm_rev, weights.rule
    # hypothesis: (score, tm, tm_rev, rule, lm, n_identity, n_out, lm_state, options tuple); stacks
    # are keyed by the output so far (recombination of equal outputs, the better one kept)
    stacks: list[dict] = [dict() for _ in range(n + 1)]
    stacks[0][()] = (0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, lm.begin(), ())
    for i in range(n):
        if not stacks[i]:
            continue
        hyps = sorted(stacks[i].items(), key=lambda kv: -kv[1][0])[:beam]
        for opt in lattice[i]:
            width = opt.end - opt.start
            stack = stacks[opt.end]
            for out, (score, tm, tmr, rl, lms, n_id, n_out, state, opts) in hyps:
                ls, new_state = lm.score_words(state, opt.out)
                if opt.identity:
                    tm2, tmr2, rl2, n_id2 = tm, tmr, rl, n_id + width
                else:
                    tm2, tmr2, rl2, n_id2 = tm + opt.logp, tmr + opt.logp_rev, rl + opt.rule, n_id
                lm2 = lms + ls
                n_out2 = n_out + len(opt.out)
                s = tm_w * tm2 + rev_w * tmr2 + rule_w * rl2 + lam * lm2 + beta * n_id2 + omega * n_out2
                new_out = out + opt.out
                old = stack.get(new_out)
                if old is None or s > old[0]:
                    stack[new_out] = (s, tm2, tmr2, rl2, lm2, n_id2, n_out2, new_state, opts + (opt,))
    finals = []
    for out, (score, tm, tmr, rl, lms, n_id, n_out, state, opts) in stacks[n].items():
        e = lm.end(state)
        finals.append((score + lam * e, opts, {"tm": tm, "tm_rev": tmr, "rule": rl, "lm": lms + e,
                                               "identity_words": n_id, "output_words": n_out}))
    finals.sort(key=lambda h: (-h[0], [o.out for o in h[1]]))
    if require_change:
        changed = [f for f in finals if any(not o.identity for o in f[1])]
        finals = changed or finals
    return finals[:nbest]


# ------------------------------------------------------------------------------ text in and out


def _cased_tokens(text: str, lang: str = "en"):
    """The build's tokenisation of `text` without the lowercasing (for true-casing)."""
    from pivot.text import _PUNCT_MAP, _tokenizer

    tokenize = _tokenizer(lang, "moses-cpp")
    return " ".join(" ".join(tokenize(unicodedata.normalize("NFC", text).translate(_PUNCT_MAP))).split()).split()


_DETOK = {}


def detokenize(tokens, lang: str = "en") -> str:
    """Moses detokeniser (sacremoses) of a token list."""
    if lang not in _DETOK:
        from sacremoses import MosesDetokenizer

        _DETOK[lang] = MosesDetokenizer(lang)
    return _DETOK[lang].detokenize(list(tokens))


class Paraphraser:
    """Decode sentences with a database, one model and a language model.

    >>> p = Paraphraser(ParaphraseDB("bio.db"), model="general", lm="general.arpa")  # doctest: +SKIP
    >>> p.paraphrase("The drug treats the disease.")[0].text                           # doctest: +SKIP
    """

    def __init__(self, db, model: str = "general", lm=None, *, weights: Weights = DEFAULT_WEIGHTS,
                 k: int = 8, max_span: int = 5, beam: int = 8, require_change: bool = False,
                 drop_partial: bool = True, content_only: bool = True, rules=None, gate: float | None = None):
        self.db = db
        self.model = model
        # rules: a pivot.sentences.rules.RuleModel giving every option its log-odds `rule`;
        # gate: with it, the best output with a change is kept only when its replaced spans' mean
        # log-odds is >= gate, else the source is returned (a change is made only when confident)
        self.rules = rules
        self.gate = gate
        self.table = PhraseTable(db, model, k, drop_partial, content_only)
        self.lm = lm if isinstance(lm, LanguageModel) else LanguageModel(lm)
        self.weights = weights
        self.max_span = max_span
        self.beam = beam
        self.require_change = require_change
        self.lang = db.meta.get("normalization", {}).get("lang", "en") if hasattr(db, "meta") else "en"

    def normalize(self, text: str) -> list:
        from pivot.text import normalize

        return normalize(text, self.lang).split()

    def lattice(self, tokens):
        lattice = build_lattice(tokens, self.table, self.max_span)
        return self.rules.annotate(self.table, tokens, lattice) if self.rules is not None else lattice

    def paraphrase(self, text: str, nbest: int = 1, *, weights: Weights | None = None) -> list[Paraphrased]:
        """Up to `nbest` paraphrases of one sentence, best first (the identity may be among them)."""
        tokens = self.normalize(text)
        if not tokens:
            return [Paraphrased("", [], 0.0, {"tm": 0.0, "tm_rev": 0.0, "rule": 0.0, "lm": 0.0, "identity_words": 0,
                                              "output_words": 0})]
        return self.decode_tokens(tokens, nbest, weights=weights, source_text=text)

    def decode_tokens(self, tokens, nbest: int = 1, *, weights: Weights | None = None, source_text=None,
                      lattice=None):
        lattice = lattice if lattice is not None else self.lattice(tokens)
        cased = None
        if source_text is not None:
            cased = _cased_tokens(source_text, self.lang)
            if len(cased) != len(tokens) or any(c.lower() != t for c, t in zip(cased, tokens)):
                cased = None
        out = []
        weights = weights or self.weights
        if self.gate is None:
            hyps = decode_lattice(lattice, self.lm, weights, beam=self.beam, nbest=nbest,
                                  require_change=self.require_change)
        else:
            hyps = decode_lattice(lattice, self.lm, weights, beam=self.beam, nbest=nbest, require_change=True)
            if gate_margin(hyps[0][1]) < self.gate:     # not confident: the source, scored alone
                identity = [[o for o in opts if o.identity] for opts in lattice]
                hyps = decode_lattice(identity, self.lm, weights, beam=1, nbest=1)
        for score, opts, feats in hyps:
            words, shown, replaced = [], [], []
            for o in opts:
                words.extend(o.out)
                if o.identity:
                    shown.extend(cased[o.start:o.end] if cased else o.out)
                else:
                    replaced.append((" ".join(tokens[o.start:o.end]), " ".join(o.out), round(o.logp, 6)))
                    w = list(o.out)
                    if cased:       # a word of the source span keeps its source spelling
                        spelt = {c.lower(): c for c in cased[o.start:o.end]}
                        w = [spelt.get(x, x) for x in w]
                    if o.start == 0 and cased and w and cased[0][:1].isupper():
                        w[0] = w[0][:1].upper() + w[0][1:]
                    shown.extend(w)
            out.append(Paraphrased(detokenize(shown, self.lang), words, score, feats, replaced))
        return out


def gate_margin(options) -> float:
    """Mean ``rule`` log-odds of the replaced options of an output (-inf when nothing is replaced)."""
    rules = [o.rule for o in options if not o.identity]
    return sum(rules) / len(rules) if rules else -math.inf


def naive_substitution(tokens, table: PhraseTable) -> list:
    """Baseline: every word with a DB paraphrase is replaced by its top-1 paraphrase."""
    out = []
    for w in tokens:
        opts = table.options(w)
        out.extend(opts[0][0] if opts else (w,))
    return out


# ------------------------------------------------------------------------------ finding the LMs


def lm_name_for(db, model: str) -> str:
    """'general' for the General model (the first model), 'in_domain' for every domain model."""
    return "general" if model == db.models[0] else "in_domain"


def _candidate_work_dirs(db_path: Path):
    parent = db_path.resolve().parent
    stem = db_path.stem
    seen = []
    for d in (parent / "work", parent / "work" / stem, Path.cwd() / "work" / stem, Path.cwd() / "work", parent):
        if d not in seen:
            seen.append(d)
    return seen


def find_lm(db, db_path, model: str, work=None) -> Path | None:
    """The build's LM for `model` (see :func:`lm_name_for`), or None.

    The LM stage folders (``lm-*``) of the work dir (``work``, else ``<db dir>/work``,
    ``<db dir>/work/<db stem>``, ``./work/<db stem>``, ``./work``) are matched to the database
    by the LM statistics the build recorded in its meta table (tokens and n-gram counts), so
    an LM of another build is never used. The General LM is ``general`` (a separate general
    corpus) or ``general.0`` (Moore-Lewis's first fold of the bitext English); a kenlm
    binary is preferred over the ARPA file.
    """
    want = lm_name_for(db, model)
    stats = (db.meta.get("lm") or {}).get("models") or {}
    names = [want] if want == "in_domain" else ["general", "general.0"]
    dirs = [Path(work)] if work else _candidate_work_dirs(Path(db_path))
    for d in dirs:
        if not d.is_dir():
            continue
        for lm_dir in sorted(d.glob("lm-*"), key=lambda p: p.stat().st_mtime, reverse=True):
            try:
                got = json.loads((lm_dir / "stats.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            for name in names:
                s, g = stats.get(name), got.get(name)
                if not s or not g:
                    continue
                if s.get("n_tokens") != g.get("n_tokens") or s.get("ngram_counts") != g.get("ngram_counts"):
                    continue
                for suffix in (".binary", ".arpa"):
                    if (lm_dir / f"{name}{suffix}").is_file():
                        return lm_dir / f"{name}{suffix}"
    return None


def resolve_lm(db, db_path, model: str, lm=None, work=None, allow_none: bool = False):
    """The LM path to use: `lm` if given, else the build's (:func:`find_lm`); InputError if none."""
    if lm:
        return Path(lm)
    found = find_lm(db, db_path, model, work)
    if found is None and not allow_none:
        raise InputError(f"cannot find the build's {lm_name_for(db, model)} language model for model {model!r} "
                         "(looked for lm-*/ in the work dir beside the database); give it with --lm PATH "
                         "(an ARPA or kenlm binary file), or --work DIR", db_path)
    return found


#: The decoder's weights, as a weights file names them.
WEIGHT_NAMES = tuple(f.name for f in fields(Weights))


def load_weights(path) -> Weights:
    """Decoder weights from a JSON file: an object of weights ({"lm": 1.0, "identity": 2.0}),
    or an object holding them under "weights" (a row of bench/results/sentences_tuning.json).
    Weights not given keep their defaults (Weights()). An unknown name, a value that is not a
    finite number, or a file that is not such JSON is an InputError naming the file."""
    from pivot.recipes import did_you_mean

    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("weights file not found", path) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 (byte {exc.start + 1} of the file)", path) from None
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", path) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg} (column {exc.colno})", path, exc.lineno) from None
    w = data.get("weights", data) if isinstance(data, dict) else data
    if not isinstance(w, dict):
        raise InputError(f"must be a JSON object of decoder weights, e.g. {{\"lm\": 1.0, \"identity\": 2.0}} "
                         f"(got a JSON {type(w).__name__})", path)
    for name, value in w.items():
        if name not in WEIGHT_NAMES:
            raise InputError(f"unknown weight {name!r}{did_you_mean(name, WEIGHT_NAMES)}; the weights are "
                             f"{', '.join(WEIGHT_NAMES)}", path)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InputError(f"weight {name!r} = {json.dumps(value)}: must be a finite number", path)
    return Weights(**{k: float(v) for k, v in w.items()})


# ------------------------------------------------------------------------------ the command


def _stdin_lines():
    import sys

    for number, raw in enumerate(sys.stdin.buffer, start=1):
        raw = raw.rstrip(b"\n").rstrip(b"\r")
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 (byte {exc.start + 1} of the line)", "<stdin>", number) from None


def format_nbest(index: int, hyp: Paraphrased) -> str:
    """One n-best line: ``index ||| text ||| score ||| tm=.. tm_rev=.. lm=.. ||| span -> paraphrase (log p); ...``."""
    f = hyp.features
    feats = (f"tm={f['tm']:.4f} tm_rev={f['tm_rev']:.4f} lm={f['lm']:.4f} "
             f"identity_words={f['identity_words']} output_words={f['output_words']}")
    spans = "; ".join(f"{a} -> {b} ({lp:.3f})" for a, b, lp in hyp.replaced)
    return f"{index} ||| {hyp.text} ||| {hyp.score:.4f} ||| {feats} ||| {spans}"


def run_command(args, out=None) -> int:
    """`pivot paraphrase`: see pivot.cli."""
    import sys

    from tqdm import tqdm

    from pivot.store.db import ParaphraseDB

    out = out or sys.stdout
    if args.text and args.input:
        raise InputError("give the sentence as TEXT or a file with -i, not both")
    rules, gate, weights = None, None, DEFAULT_WEIGHTS
    if getattr(args, "rules", None):

        rules = RuleModel.load(args.rules)
        gate, weights = rules.gate, rules.weights or weights
    if getattr(args, "gate", None) is not None:
        if rules is None:
            raise InputError("--gate needs --rules FILE (the gate compares the rule model's log-odds)")
        gate = args.gate
    if args.weights:
        weights = load_weights(args.weights)
    over = {k: v for k, v in (("lm", args.lm_weight), ("identity", args.identity_bias)) if v is not None}
    if over:
        weights = Weights(**{**asdict(weights), **over})
    with ParaphraseDB(args.db) as db:
        db.model_info(args.model)
        lm_path = resolve_lm(db, args.db, args.model, args.lm, args.work)
        para = Paraphraser(db, args.model, LanguageModel(lm_path), weights=weights, k=args.k,
                           max_span=args.max_span, beam=args.beam, require_change=args.force_change,
                           drop_partial=rules.drop_partial if rules else True, rules=rules, gate=gate)
        n = max(args.n, 1) if args.nbest or args.format == "json" else 1
        if args.text:
            lines = iter([(1, " ".join(args.text))])
            total = 1
        elif args.input:
            from pivot.text import _count_lines, numbered_lines

            total = _count_lines(args.input)
            lines = numbered_lines(args.input)
        else:
            lines, total = _stdin_lines(), None
        bar = tqdm(lines, total=total, unit="sent", disable=args.quiet or total == 1, file=sys.stderr,
                   desc="paraphrase")
        for index, (_, line) in enumerate(bar):
            hyps = para.paraphrase(line, n)
            if args.format == "json":
                out.write(json.dumps({"index": index, "source": line, "nbest": [h.to_json() for h in hyps]},
                                     ensure_ascii=False) + "\n")
            elif args.nbest:
                for h in hyps:
                    out.write(format_nbest(index, h) + "\n")
            else:
                out.write(hyps[0].text + "\n")
    return 0
