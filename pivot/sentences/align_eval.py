"""Word-alignment quality on the English-French Hansards gold (HLT-NAACL 2003 shared task).

Gold: ``gold/hansards-align/test.{e,f,wa.nonullalign}`` under the data root: 447 sentence
pairs, lower-cased and tokenised (split on whitespace: the gold positions count those tokens);
links ``sentence e_pos f_pos S|P``, 1-based, NULL links left out. Training text: the 447 gold
pairs plus every pair of the Tatoeba fr-en bitext (``bitext/tatoeba-fr-en/fra-eng.zip``,
``fra-eng/fra.txt``), lower-cased and split by a regular-expression tokeniser close to the
gold's style (words; English clitics ``'s`` and French elisions ``c'`` kept whole; every other
punctuation mark alone). This is bench/bench_align.py's set-up, as a library function.

Metrics (the 2003 comparison of statistical alignment models), over the gold pairs only, with P taken as P | S:

    precision = |A & P| / |A|,  recall = |A & S| / |S|,  AER = 1 - (|A & S| + |A & P|) / (|A| + |S|)

``ibm2`` is the project's aligner (:func:`pivot.pipeline.ibm.align_both`: diagonal IBM Model 2
both ways, grow-diag-final-and), deterministic; ``eflomal`` is run through the align stage's
:func:`pivot.pipeline.align.run_eflomal` (same symmetrisation); eflomal has no seed, so it is
run several times and the mean, min and max are reported.
"""
from __future__ import annotations

import io
import json
import re
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

from pivot.errors import InputError

EN_TOKEN = re.compile(r"'\w+|\w+|[^\w\s]")     # "it's" -> it 's
FR_TOKEN = re.compile(r"\w+'|\w+|[^\w\s]")     # "c'est" -> c' est


def read_gold(gold_dir):
    """(english token lists, french token lists, sure set, possible set); links 0-based."""
    gold_dir = Path(gold_dir)

    def lines(name):
        path = gold_dir / name
        if not path.is_file():
            raise InputError("missing Hansards gold file", path)
        text = path.read_bytes().decode("utf-8", errors="replace")
        return [ln.lower().split() for ln in text.split("\n")[:-1]] if text.endswith("\n") else \
            [ln.lower().split() for ln in text.split("\n")]

    en, fr = lines("test.e"), lines("test.f")
    if len(en) != len(fr):
        raise InputError(f"{len(en)} English and {len(fr)} French gold sentences", gold_dir)
    sure, possible = set(), set()
    path = gold_dir / "test.wa.nonullalign"
    if not path.is_file():
        raise InputError("missing Hansards gold file", path)
    for number, ln in enumerate(path.read_text(encoding="ascii", errors="replace").split("\n"), 1):
        parts = ln.split()
        if not parts:
            continue
        if len(parts) < 3 or not all(p.isdigit() for p in parts[:3]):
            raise InputError("expected 'sentence e_pos f_pos [S|P]'", path, number)
        link = (int(parts[0]) - 1, int(parts[1]) - 1, int(parts[2]) - 1)
        (possible if len(parts) > 3 and parts[3] == "P" else sure).add(link)
    return en, fr, sure, possible


def read_tatoeba(zip_path):
    en, fr = [], []
    zip_path = Path(zip_path)
    if not zip_path.is_file():
        raise InputError("missing Tatoeba fr-en zip", zip_path)
    with zipfile.ZipFile(zip_path) as z:
        text = io.TextIOWrapper(z.open("fra-eng/fra.txt"), encoding="utf-8")
        for ln in text:
            cols = ln.rstrip("\n").split("\t")
            if len(cols) < 2:
                continue
            e, f = EN_TOKEN.findall(cols[0].lower()), FR_TOKEN.findall(cols[1].lower())
            if e and f:
                en.append(e)
                fr.append(f)
    return en, fr


def encode(sentences):
    vocab, tokens, offsets = {}, [], [0]
    for s in sentences:
        tokens.extend(vocab.setdefault(w, len(vocab)) for w in s)
        offsets.append(len(tokens))
    return np.array(tokens, dtype=np.int32), np.array(offsets, dtype=np.int64), len(vocab)


def link_set(link_e, link_f, offsets, n):
    out = set()
    for s in range(n):
        for x in range(offsets[s], offsets[s + 1]):
            out.add((s, int(link_e[x]), int(link_f[x])))
    return out


def score(links, sure, possible, n_gold) -> dict:
    from pivot.pipeline import ibm

    err, prec, rec = ibm.aer(link_set(*links, n_gold), sure, possible)
    return {"aer": round(err, 4), "precision": round(prec, 4), "recall": round(rec, 4)}


def load_sets(data_root, bitext: bool = True):
    root = Path(data_root)
    gold_en, gold_fr, sure, possible = read_gold(root / "gold" / "hansards-align")
    en, fr = list(gold_en), list(gold_fr)
    if bitext:
        tat_en, tat_fr = read_tatoeba(root / "bitext" / "tatoeba-fr-en" / "fra-eng.zip")
        en += tat_en
        fr += tat_fr
    return en, fr, len(gold_en), sure, possible


def eval_ibm2(en, fr, n_gold, sure, possible, threads: int = 1, iterations: int = 5) -> dict:
    from pivot.pipeline import ibm

    e_tok, e_off, n_e = encode(en)
    f_tok, f_off, n_f = encode(fr)
    t0 = time.perf_counter()
    links = ibm.align_both(e_tok, e_off, f_tok, f_off, n_e, n_f, iterations=iterations, n_threads=threads)
    return {**score(links, sure, possible, n_gold), "seconds": round(time.perf_counter() - t0, 2)}


def eval_eflomal(en, fr, n_gold, sure, possible, runs: int = 3) -> dict:
    from pivot.pipeline import align as align_stage
    from pivot.pipeline.links import symmetrize

    en_lines, fr_lines = [" ".join(s) for s in en], [" ".join(s) for s in fr]
    e_len, f_len = [len(s) for s in en], [len(s) for s in fr]
    results = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="pivot-align-eval-") as work:
            t0 = time.perf_counter()
            fwd, rev = align_stage.run_eflomal(en_lines, fr_lines, work)
            sym = symmetrize(fwd, rev, e_len, f_len)
            results.append({**score(sym, sure, possible, n_gold), "seconds": round(time.perf_counter() - t0, 2)})
    out = {}
    for key in ("aer", "precision", "recall"):
        vals = [r[key] for r in results]
        out[key] = round(float(np.mean(vals)), 4)
        out[f"{key}_min"], out[f"{key}_max"] = min(vals), max(vals)
    out["runs"] = results
    return out


def run_command(args) -> int:
    """`pivot align-eval`: see pivot.cli."""
    import sys

    from pivot import recipes
    from pivot.locking import resolve_threads

    root = recipes.resolve_data_root(args.data)
    en, fr, n_gold, sure, possible = load_sets(root, bitext=not args.no_bitext)
    threads = resolve_threads(args.threads or 0)
    if args.method == "ibm2":
        res = eval_ibm2(en, fr, n_gold, sure, possible, threads=threads)
    else:
        res = eval_eflomal(en, fr, n_gold, sure, possible, runs=max(args.runs, 1))
    info = {"method": args.method, "gold_pairs": n_gold, "training_pairs": len(en),
            "sure_links": len(sure), "possible_links_incl_sure": len(sure | possible)}
    if args.format == "json":
        json.dump({"aer": res["aer"], "precision": res["precision"], "recall": res["recall"], **info,
                   "details": res}, sys.stdout, indent=1)
        print()
        return 0
    spread = ""
    if args.method == "eflomal":
        spread = f"  (AER over {len(res['runs'])} runs: {res['aer_min']:.4f} .. {res['aer_max']:.4f})"
    print(f"{args.method} + grow-diag-final-and on {n_gold} Hansards gold pairs "
          f"(trained on {len(en)} pairs): AER {res['aer']:.4f}, precision {res['precision']:.4f}, "
          f"recall {res['recall']:.4f}{spread}")
    return 0
