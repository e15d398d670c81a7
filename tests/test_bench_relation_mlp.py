"""The one-hidden-layer relation classifier of bench/bench_relation_features.py (--model mlp):
its forward pass and loss on inputs worked out by hand, its gradient against finite differences,
its per-phrase terms against the full forward pass, a seeded fit's repeatability."""
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parent.parent / "bench" / "bench_relation_features.py"
_spec = importlib.util.spec_from_file_location("bench_relation_features_mlp", _PATH)
rf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rf)

LN2, LN3 = math.log(2.0), math.log(3.0)


def _hand_net():
    """z (2 x 3), H = 2, C = 2. Pre-activations a = z W1' + b1:
    row 1 (1, 2, 0): a1 = ln 2, a2 = 2 (ln 3 / 2) + ln 2 = ln 6;  row 2 (0, 1, 1): a1 = 0,
    a2 = ln 3 / 2 - ln 3 / 2 + ln 2 = ln 2.  tanh(ln r) = (r^2 - 1) / (r^2 + 1): tanh(ln 2) = 3/5,
    tanh(ln 6) = 35/37, tanh(0) = 0."""
    z = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 1.0]])
    W1 = np.array([[LN2, 0.0, 0.0], [0.0, LN3 / 2, -LN3 / 2]])
    b1 = np.array([0.0, LN2])
    W2 = np.array([[1.0, 0.0], [2.0, -1.0]])
    b2 = np.array([0.5, 0.0])
    return z, W1, b1, W2, b2


def test_forward_by_hand():
    z, W1, b1, W2, b2 = _hand_net()
    h, eta = rf.mlp_forward(z, W1, b1, W2, b2)
    assert h == pytest.approx(np.array([[3 / 5, 35 / 37], [0.0, 3 / 5]]), abs=1e-15)
    # eta = h W2' + b2: row 1 (3/5 + 1/2, 6/5 - 35/37 = 47/185), row 2 (0 + 1/2, 0 - 3/5)
    assert eta == pytest.approx(np.array([[1.1, 47 / 185], [0.5, -0.6]]), abs=1e-15)


def test_loss_by_hand():
    z, W1, b1, W2, b2 = _hand_net()
    y = np.array([1, 0])
    onehot = np.eye(2)[y]
    w = np.array([0.25, 0.75])
    flat = np.concatenate([W1.ravel(), b1, W2.ravel(), b2])
    lam = 0.1
    loss, _ = rf.mlp_objective(flat, z, onehot, w, 2, lam)
    # row 1 (class 1): log(e^1.1 + e^(47/185)) - 47/185; row 2 (class 0): log(e^0.5 + e^-0.6) - 0.5;
    # penalty lam/2 (|W1|^2 + |W2|^2) = 0.05 (ln^2 2 + 2 (ln 3 / 2)^2 + 1 + 4 + 1), biases free
    ce1 = math.log(math.exp(1.1) + math.exp(47 / 185)) - 47 / 185
    ce2 = math.log(math.exp(0.5) + math.exp(-0.6)) - 0.5
    pen = 0.05 * (LN2 ** 2 + 2 * (LN3 / 2) ** 2 + 6.0)
    assert loss == pytest.approx(0.25 * ce1 + 0.75 * ce2 + pen, abs=1e-14)


def test_zero_output_layer_loss_is_log_classes():
    # W2 = b2 = 0: every class scores 0, the cross-entropy is ln C whatever W1 does; only
    # W1's penalty is added: ln 3 + lam/2 |W1|^2
    rng = np.random.default_rng(0)
    z, W1 = rng.normal(size=(5, 4)), rng.normal(size=(2, 4))
    flat = np.concatenate([W1.ravel(), np.zeros(2), np.zeros(3 * 2), np.zeros(3)])
    onehot = np.eye(3)[[0, 1, 2, 2, 1]]
    loss, grad = rf.mlp_objective(flat, z, onehot, np.full(5, 0.2), 2, 0.5)
    assert loss == pytest.approx(math.log(3) + 0.25 * (W1 ** 2).sum(), abs=1e-14)
    # and the output bias gradient: sum_i w_i (1/3 - onehot_i) = 1/3 - (share of each class):
    # classes 0, 1, 2 have 1, 2, 2 of the 5 rows at weight 1/5 each
    assert grad[-3:] == pytest.approx([1 / 3 - 1 / 5, 1 / 3 - 2 / 5, 1 / 3 - 2 / 5], abs=1e-15)


def test_class_weights_by_hand():
    y = np.array([0, 0, 0, 0, 1])
    # balance 1: each class 1/2 in total: 1/8 per class-0 row, 1/2 for the class-1 row
    assert rf.class_weights(y, 3, 1.0) == pytest.approx([1 / 8] * 4 + [1 / 2], abs=1e-15)
    # balance 1/2: 4^-1/2 = 1/2 per class-0 row, 1 for class 1; total 3
    assert rf.class_weights(y, 3, 0.5) == pytest.approx([1 / 6] * 4 + [1 / 3], abs=1e-15)
    assert rf.class_weights(y, 3, 0.0) == pytest.approx([0.2] * 5, abs=1e-15)


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(3)
    n, p, hidden, c = 7, 3, 4, 3
    z = rng.normal(size=(n, p))
    onehot = np.eye(c)[rng.integers(0, c, n)]
    w = rf.class_weights(onehot.argmax(axis=1), c, 0.5)
    flat = rng.normal(size=hidden * p + hidden + c * hidden + c)
    _, grad = rf.mlp_objective(flat, z, onehot, w, hidden, 0.3)
    eps = 1e-6
    num = np.empty_like(flat)
    for k in range(len(flat)):
        d = np.zeros_like(flat)
        d[k] = eps
        num[k] = (rf.mlp_objective(flat + d, z, onehot, w, hidden, 0.3)[0]
                  - rf.mlp_objective(flat - d, z, onehot, w, hidden, 0.3)[0]) / (2 * eps)
    assert np.abs(grad - num).max() < 1e-8


def _toy(n=300, seed=5):
    """Pairs whose class is the quadrant of (vec_e1[0], vec_e2[0]) plus one pair column."""
    rng = np.random.default_rng(seed)
    names = ["token_jaccard", "vec_e1[0]", "vec_e1[1]", "vec_e2[0]", "vec_e2[1]"]
    x = rng.normal(size=(n, 5))
    y = (x[:, 1] > 0).astype(np.int64) * 2 + (x[:, 3] > 0)
    return names, x, y


def test_seeded_fit_is_repeatable_and_separates_quadrants():
    names, x, y = _toy()
    a = rf.MLPModel.fit(names, x, y, 8, 1e-3, 0.5)
    b = rf.MLPModel.fit(names, x, y, 8, 1e-3, 0.5)
    assert all(np.array_equal(u, v) for u, v in zip(a.weights, b.weights))
    c = rf.MLPModel.fit(names, x, y, 8, 1e-3, 0.5, seed=2)
    assert not np.array_equal(a.weights[0], c.weights[0])
    # an XOR-like labelling no linear function of one coordinate separates; the network
    # fits it (training accuracy)
    assert (a.probabilities(names, x).argmax(axis=1) == y).mean() > 0.95


def test_hidden_terms_reproduce_the_forward_pass():
    names, x, y = _toy()
    m = rf.MLPModel.fit(names, x, y, 8, 1e-3, 0.5)
    # phrase table: e1's vectors are rows 0..n-1, e2's rows n..2n-1
    vec = np.vstack([x[:, [1, 2]], x[:, [3, 4]]])
    kept, W1p, t1, t2 = m.hidden_terms(vec)
    assert kept == ["token_jaccard"]
    j = m.std.names.index("token_jaccard")
    zp = ((x[:, 0] - m.std.mean[j]) / m.std.sd[j])[:, None]
    _, b1, W2, b2 = m.weights
    n = len(x)
    eta = np.tanh(zp @ W1p.T + b1 + t1[:n] + t2[n:]) @ W2.T + b2
    from pivot.pipeline.ppdb2 import softmax
    assert np.abs(softmax(eta) - m.probabilities(names, x)).max() < 1e-13
