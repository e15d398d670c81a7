"""The lmtext stage: the in-domain text and the general text(s) the LMs are estimated on.

One function of plain arguments (:func:`write_lm_texts`), so that the stage runs as one task of
the engine: on a cluster beside the aligner, in one process as a call. It reads the English
side of the corpus stages (each ``corpus.<lang>/bitext.en``, the languages in recipe order,
which is what the encode stage's ``english.txt`` concatenates), so it waits for the corpus
stages only, not for the aligner.

The default general text is the bitext's own English side, and a 5-gram LM scores the
sentences it was trained on far better than unseen ones: every bitext sentence then looks
general (measured on the bio recipe: AUC of sigma for WMT-biomedical vs Tatoeba 0.65, 6
sentences below the change point). So the general LM is cross-fitted: each English sentence
goes to fold 0 or 1 by a seeded hash of its text (repeats of a sentence, e.g. the same Tatoeba
English in fr-en and de-en, share a fold), one general LM is trained per fold, and each
sentence is scored by the LM of the other fold. With a named general corpus (e.g. Brown),
which holds no bitext sentence, one general LM scores everything.

Matched (``[domain] matched = true``, the default; the Moore–Lewis protocol of 2010, see
pivot.pipeline.mono): the in-domain text and every general text are sampled down to the same
number of tokens (the smallest of them), and all are written over one vocabulary fixed from
the in-domain sample (``vocab.txt``), other words as ``<oov>``.
"""
from __future__ import annotations

import hashlib
import json
from itertools import islice
from pathlib import Path

import numpy as np

from pivot.pipeline.stage import Stage

#: Sentences held at a time while the English side is streamed.
CHUNK = 50_000


def cross_fit_folds(sentences: list[str], seed: int) -> np.ndarray:
    """Fold 0 or 1 per sentence from a seeded hash of its text (equal texts, equal folds)."""
    out = np.empty(len(sentences), dtype=np.int8)
    salt = str(seed).encode() + b"\n"
    for i, s in enumerate(sentences):
        out[i] = hashlib.blake2b(salt + s.encode(), digest_size=1).digest()[0] & 1
    return out


def iter_english(texts, chunk: int = CHUNK):
    """Lists of at most ``chunk`` English sentences of ``texts`` ((path, n_lines) pairs, read in
    turn: the first ``n_lines`` lines of each, without their "\\n"), in global sentence order.
    A file with fewer lines than it should hold raises ValueError."""
    batch = []
    for path, n in texts:
        with open(path, encoding="utf-8", newline="\n") as fh:
            got = 0
            for line in islice(fh, n):
                batch.append(line[:-1] if line.endswith("\n") else line)
                got += 1
                if len(batch) == chunk:
                    yield batch
                    batch = []
        if got != n:
            raise ValueError(f"{path}: ends at line {got}, expected {n} lines")
    if batch:
        yield batch


def write_lm_texts(out_dir, data_root, dom: dict, texts) -> dict:
    """Write the stage's files into ``out_dir``: ``in_domain.txt``, ``general.txt`` (a named
    general corpus) or ``general.0.txt`` and ``general.1.txt`` (the bitext's English side,
    cross-fitted), ``folds.npy`` (each bitext sentence's fold), ``vocab.txt`` (matched) and
    ``stats.json``. ``dom``: the recipe's [domain] table; ``texts``: (path, n_lines) of each
    language's English side, in recipe order. Returns the stats."""
    from pivot.pipeline import mono

    out_dir, data_root = Path(out_dir), Path(data_root)
    texts = [(str(p), int(n)) for p, n in texts]
    n_sentences = sum(n for _, n in texts)
    matched = bool(dom.get("matched", True))
    seed = dom["seed"]
    tgt = mono.in_domain_text(data_root, dom["in_domain"])
    n_tgt = mono.n_tokens(tgt)
    stats = {"in_domain_full": {"sentences": len(tgt), "tokens": n_tgt}}
    if dom.get("general"):
        # A named general corpus holds no bitext sentence: one general LM.
        general = mono.general_text(data_root, dom["general"], seed=seed)
        n_match = min(n_tgt, mono.n_tokens(general)) if matched else n_tgt
        general = mono.sample_by_tokens(general, n_match, seed)
        folds = np.zeros(n_sentences, dtype=np.int8)
        chosen = None
    else:
        # Two passes over the English side: folds and lengths, then the chosen lines.
        folds = np.empty(n_sentences, dtype=np.int8)
        lengths = np.empty(n_sentences, dtype=np.int64)
        i = 0
        for batch in iter_english(texts):
            folds[i:i + len(batch)] = cross_fit_folds(batch, seed)
            lengths[i:i + len(batch)] = [len(x.split()) for x in batch]
            i += len(batch)
        # Matched: every sample holds as many tokens as the smallest text (each fold's
        # general text is at most half the bitext's English side).
        fold_tokens = [int(lengths[folds == k].sum()) for k in (0, 1)]
        n_match = min(n_tgt, *fold_tokens) if matched else n_tgt
        chosen = {}
        for k in (0, 1):
            members = np.flatnonzero(folds == k)
            picked = members[mono.sample_indices_by_tokens(lengths[members], n_match, seed)]
            chosen[k] = np.zeros(n_sentences, dtype=bool)
            chosen[k][picked] = True
    if matched:
        tgt = mono.sample_by_tokens(tgt, n_match, seed)
        vocab_list = mono.shared_vocabulary(tgt, dom.get("vocab_min_count", 2))
        vocab = frozenset(vocab_list)
        (out_dir / "vocab.txt").write_text("".join(w + "\n" for w in vocab_list + [mono.OOV_TOKEN]),
                                           encoding="utf-8")
    else:
        vocab = None

    def write(path, lines, name):
        """Write the lines (mapped to the shared vocabulary when matched); record their size."""
        n_lines = n_tok = n_oov = 0
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            for x in lines:
                if vocab is not None:
                    x, k = mono.map_to_vocab(x, vocab)
                    n_oov += k
                fh.write(x + "\n")
                n_lines += 1
                n_tok += len(x.split())
        stats[name] = {"sentences": n_lines, "tokens": n_tok, "oov_tokens": n_oov,
                       "oov_rate": round(n_oov / max(n_tok, 1), 6)}

    write(out_dir / "in_domain.txt", tgt, "in_domain")
    del tgt
    if chosen is None:
        write(out_dir / "general.txt", general, "general")
    else:
        for k in (0, 1):
            def fold_lines(k=k):
                i = 0
                for batch in iter_english(texts):
                    yield from (x for x, c in zip(batch, chosen[k][i:i + len(batch)]) if c)
                    i += len(batch)
            write(out_dir / f"general.{k}.txt", fold_lines(), f"general.{k}")
    stats["protocol"] = {
        "matched": matched, "n_tokens_target": int(n_match), "seed": seed,
        "vocab_min_count": dom.get("vocab_min_count", 2) if matched else None,
        "shared_vocab_size": len(vocab) + 1 if matched else None,  # with the OOV token
        "oov_token": mono.OOV_TOKEN if matched else None,
        "vocab_from": "in-domain sample" if matched else None,
    }
    np.save(out_dir / "folds.npy", folds)
    (out_dir / "stats.json").write_text(json.dumps(stats, indent=1))
    return stats


def stage_params(recipe) -> dict:
    dom = recipe["domain"]
    return {"in_domain": dom["in_domain"], "general": dom.get("general"), "seed": dom["seed"],
            "matched": dom.get("matched", True), "vocab_min_count": dom.get("vocab_min_count", 2)}


def stage_data(params, data_root) -> list[Path]:
    from pivot.pipeline import mono

    files = [path for spec in (params["in_domain"], params["general"] or {}) for kind, patterns in spec.items()
             for pattern in patterns for path in mono.expand(data_root, pattern, kind)]
    return sorted(set(files))


def run_stage(context) -> None:
    """The in-domain text and the general text(s), normalised, one sentence a line: one task,
    which reads the corpus stages' English side and so runs beside the aligner on a cluster."""
    import logging

    from pivot.pipeline.corpus import english_texts

    texts = english_texts(context.dir("corpus").values())
    stats, = context.engine.map(write_lm_texts, [(context.tmp, context.data_root, context.params, texts)],
                                name="lmtext")
    logging.getLogger("pivot").info("LM text: %s", stats)


def lm_names(text_dir) -> list[str]:
    """The LMs of the stage's texts: in_domain, and general (a named general corpus) or
    general.0 and general.1 (the bitext's English side, cross-fitted)."""
    return ["in_domain"] + sorted(p.name[:-len(".txt")] for p in Path(text_dir).glob("general*.txt"))


def stage_check(recipe, data_root, plan) -> list:
    """Preflight of the LM texts: every in-domain (and general) text file holds a sentence."""
    from pivot.pipeline import mono

    dom = recipe.get("domain")
    checks = []
    for key, role in (("in_domain", "in-domain text"), ("general", "general text")):
        for kind, patterns in ((dom or {}).get(key) or {}).items():
            for pattern in [patterns] if isinstance(patterns, str) else patterns:
                for path in mono.expand(data_root, pattern, kind):
                    plan.add_input(Path(path), role)
                    checks.append(lambda path=path, kind=kind, role=role: _check_text(plan, path, kind, role))
    return checks


def _check_text(plan, path, kind: str, role: str) -> None:
    from pivot.errors import InputError
    from pivot.pipeline import mono

    n = 0
    for sentence in mono._READERS[kind](path):
        if sentence.strip():
            n += 1
    if n == 0:
        raise InputError(f"holds no text: every {role} file must give the language model at least one "
                         f"sentence (read as {kind!r})", path)
    plan.count(f"{role} sentences", n)


STAGE = Stage("lmtext", 4, ("corpus",), ("domain.in_domain", "domain.general", "domain.seed", "domain.matched",
                                         "domain.vocab_min_count"), stage_params,
              ("in_domain.txt", "general*.txt", "vocab.txt", "folds.npy", "stats.json"), run_stage,
              "one (Dask)", "in-domain and general LM texts of equal size over one vocabulary (cross-fitted folds)",
              data=stage_data, when=lambda recipe: recipe.get("domain"), check=stage_check)
