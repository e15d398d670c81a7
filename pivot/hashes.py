"""Seeded hashes of text: per-item decisions that depend on the item's own content only.

A split, a sample or a fold decided by these never depends on file order, on the other items,
on the machine or on Python's per-process hash seed, and equal texts always decide alike:

    hash64(text, seed)    = the first 8 bytes of blake2b(f"{seed}\\n{text}", UTF-8), big-endian
    unit_hash(text, seed) = hash64(text, seed) / 2^64, a number in [0, 1)

Users: the gold tuning/test split (pivot.eval.gold), the ontology gold's concept split and its
choice of parents and siblings (pivot.eval.ontology), the bitext resample
(pivot.pipeline.corpus.sample_keeper, which compares hash64 with an integer limit exactly).
"""
from __future__ import annotations

import hashlib


def hash64(text: str, seed) -> int:
    """The first 8 bytes of blake2b(f"{seed}\\n{text}") read as a big-endian integer, 0 <= h < 2^64."""
    return int.from_bytes(hashlib.blake2b(f"{seed}\n{text}".encode("utf-8"), digest_size=8).digest(), "big")


def unit_hash(text: str, seed) -> float:
    """hash64(text, seed) / 2^64: a deterministic number in [0, 1) from a text and a seed."""
    return hash64(text, seed) / 2.0 ** 64
