"""The reading-quality targets, checked on bench/quality.py's rows: per kind, per document,
and each skewed page against the same page upright."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

POINT = 0.01  # one CER point
KINDS = (
    ("receipt", re.compile(r"^sroie-\d+$")),
    ("skewed", re.compile(r"-skew-?[\d.]+$")),
    ("turned 90/180/270", re.compile(r"-rot\d+$|-rotated-")),
    ("scan", re.compile(r"^(phototest|eurotext)$")),
    ("born-digital render", re.compile(r".")),
)


class ScoreLike(Protocol):
    cer_distance: int
    error: str | None


class RowLike(Protocol):
    name: str
    chars: int
    trusted: bool
    scores: dict[str, ScoreLike]  # type: ignore[misc]


def kind_of(name: str) -> str:
    """The kind of page a case is, from its name."""
    return next(kind for kind, pattern in KINDS if pattern.search(name))


def cer(row: RowLike, engine: str) -> float:
    """One engine's CER on one row."""
    return row.scores[engine].cer_distance / row.chars


def print_checks(rows: Sequence[RowLike], engines: tuple[str, str] = ("ocrq", "tesseract")) -> None:
    """Weighted CER per kind with the ratio, documents more than a point worse, skew gaps."""
    ours, theirs = engines
    scored = [
        r
        for r in rows
        if r.trusted and all(e in r.scores and not r.scores[e].error for e in engines)
    ]
    print("\nper kind (character-weighted CER):")
    for kind, _ in KINDS:
        group = [r for r in scored if kind_of(r.name) == kind]
        if not group:
            continue
        chars = sum(r.chars for r in group)
        a = sum(r.scores[ours].cer_distance for r in group) / chars
        b = sum(r.scores[theirs].cer_distance for r in group) / chars
        ratio = f"x{a / b:.2f}" if b else "n/a"
        figures = f"{ours} {100 * a:5.1f}%  {theirs} {100 * b:5.1f}%  {ratio}"
        print(f"  {kind:22} {len(group):3} docs  {figures}")
    worse = [r for r in scored if cer(r, ours) > cer(r, theirs) + POINT]
    print(f"documents more than 1 CER point worse than {theirs}: {len(worse)}")
    for r in worse:
        print(f"  {r.name}: {100 * cer(r, ours):.1f}% against {100 * cer(r, theirs):.1f}%")
    by_name = {r.name: r for r in scored}
    print("skewed against the same page upright (ocrq):")
    for r in scored:
        upright = by_name.get(re.sub(r"-skew-?[\d.]+$", "", r.name))
        if upright is not None and upright is not r:
            gap = cer(r, ours) - cer(upright, ours)
            flag = "" if gap <= POINT else "  (more than 1 point)"
            against = f"{100 * cer(r, ours):.1f}% against {100 * cer(upright, ours):.1f}%"
            print(f"  {r.name}: {against}{flag}")
