"""Exact edit distance of two sequences, for the quality and structure benchmarks' scores."""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def levenshtein(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Exact edit distance, bit-parallel (Myers/Hyyrö) on Python ints: O(len(b) * len(a)/64)."""
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return len(a)
    match_bits: dict[Hashable, int] = {}
    for i, symbol in enumerate(b):
        match_bits[symbol] = match_bits.get(symbol, 0) | (1 << i)
    mask, top = (1 << len(b)) - 1, 1 << (len(b) - 1)
    plus, minus, distance = mask, 0, len(b)  # vertical deltas of the column: all +1 at first
    for symbol in a:
        eq = match_bits.get(symbol, 0)
        xv = eq | minus
        xh = (((eq & plus) + plus) ^ plus) | eq
        h_plus = minus | ~(xh | plus)
        h_minus = plus & xh
        distance += (h_plus & top != 0) - (h_minus & top != 0)
        h_plus = ((h_plus << 1) | 1) & mask
        h_minus = (h_minus << 1) & mask
        plus = (h_minus | ~(xv | h_plus)) & mask
        minus = h_plus & xv
    return distance
