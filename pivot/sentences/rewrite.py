"""What the decoder and the rule model both say about a rewrite: their shared vocabulary.

* :class:`Weights` -- the log-linear weights of the decoder (pivot.sentences.paraphrase); a rule
  model (pivot.sentences.rules) stores the setting it was tuned with.
* :data:`FUNCTION_WORDS` -- the closed-class words: the decoder offers no rewrite of a span of
  them only ("'s" -> "is", "an" -> "a", "it" -> "he" are pivoting's commonest wrong
  substitutions), and the rule model has a feature for them.
* :func:`is_partial` -- a rewrite that only adds or removes words at a span's edges: the decoder
  drops it by default, the rule model has a feature for it.

A leaf: the decoder imports the rule model, and both import this.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Weights:
    """Log-linear weights of the decoder (pivot.sentences.paraphrase: its score and DEFAULT_WEIGHTS)."""

    lm: float = 0.5
    identity: float = 0.0
    word_penalty: float = 0.0
    tm: float = 1.0
    tm_rev: float = 0.0
    rule: float = 0.0


FUNCTION_WORDS = frozenset("""a an the of to in on at for from by with and or but as is are was were be been being
it its this that these those he she they we you i his her their our your my me him them us has have had do
does did will would can could should may might shall must not no 's 're 've 'll 'd 'm n't""".split())


def is_partial(a: str, b: str) -> bool:
    """True when one phrase is the other with words added or removed at its edges only
    ("in patients" / "patients", "treatment" / "treatment of"): pivoting's commonest noise,
    a deletion or insertion rather than a paraphrase."""
    x, y = a.split(), b.split()
    if len(x) == len(y):
        return False
    short, long_ = (x, y) if len(x) < len(y) else (y, x)
    n = len(short)
    return any(long_[i:i + n] == short for i in range(len(long_) - n + 1))
