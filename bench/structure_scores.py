"""Scores of a found document structure against its truth: headings, cells, order, furniture, CER.

Pure Python. Texts compare after `document_structure.normalise` (NFKC, ASCII quotes and
dashes, whitespace runs as one space); headings and cells also case-folded, and matched
when their similarity (1 - edit distance / longer length) reaches a threshold, so that an
OCR slip in one letter does not unmatch a heading.
"""

from __future__ import annotations

import bisect
import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from bench.document_structure import FurnitureLine, GridCell, Heading, Structure, normalise
from bench.edit_distance import levenshtein

MATCH_THRESHOLD = 0.8
SHINGLE_WORDS = 3  # words per anchor when locating a truth unit in the found text


# Scores keep their counts, so that totals over documents are sums (weighted by size).
@dataclass(frozen=True)
class HeadingScore:
    matched: int
    truth: int
    found: int
    same_level: int  # matched headings at the truth's level (levels relative to the top one)

    @property
    def precision(self) -> float:
        return ratio(self.matched, self.found)

    @property
    def recall(self) -> float:
        return ratio(self.matched, self.truth)

    @property
    def level_accuracy(self) -> float:
        return ratio(self.same_level, self.matched)


@dataclass(frozen=True)
class CellScore:
    hits: int
    truth_cells: int  # non-empty cells
    found_cells: int
    tables_found: int

    @property
    def f1(self) -> float:
        precision, recall = ratio(self.hits, self.found_cells), ratio(self.hits, self.truth_cells)
        return ratio(2 * precision * recall, precision + recall)


@dataclass(frozen=True)
class OrderScore:
    in_order: int  # located truth units in the truth's order (longest increasing run)
    located: int  # truth units found in the text
    locatable: int  # truth units with a word run unique in the truth

    @property
    def share_in_order(self) -> float:
        return ratio(self.in_order, self.located)

    @property
    def share_located(self) -> float:
        return ratio(self.located, self.locatable)


@dataclass(frozen=True)
class FurnitureScore:
    truth: int  # the truth's furniture lines: a running header counts once per page
    labelled: int  # truth lines matched one-to-one by a found furniture line on the same page
    found: int  # found furniture lines
    in_body: int  # truth lines the found body says (beyond what the truth's body says)

    @property
    def share_labelled(self) -> float:
        return ratio(self.labelled, self.truth)

    @property
    def share_kept_out(self) -> float:
        return 1.0 - ratio(self.in_body, self.truth) if self.truth else 0.0


@dataclass(frozen=True)
class StructureScore:
    headings: HeadingScore
    cells: CellScore
    order: OrderScore
    furniture: FurnitureScore
    edits: int  # character edit distance of the body text
    chars: int  # the truth's body length

    @property
    def cer(self) -> float:
        return ratio(self.edits, self.chars)


def total(scores: Sequence[StructureScore]) -> StructureScore:
    """The sum of every count: a total over documents, each weighted by its size."""

    def summed(kind: type[Any], parts: Sequence[Any]) -> Any:
        names = [f.name for f in fields(kind)]
        return kind(**{n: sum(getattr(p, n) for p in parts) for n in names})

    return StructureScore(
        headings=summed(HeadingScore, [s.headings for s in scores]),
        cells=summed(CellScore, [s.cells for s in scores]),
        order=summed(OrderScore, [s.order for s in scores]),
        furniture=summed(FurnitureScore, [s.furniture for s in scores]),
        edits=sum(s.edits for s in scores),
        chars=sum(s.chars for s in scores),
    )


def ratio(part: float, whole: float) -> float:
    """part / whole, 0.0 when whole is 0."""
    return part / whole if whole else 0.0


def similarity(a: str, b: str) -> float:
    """1 - edit distance / the longer length (1.0 for two empty strings)."""
    longest = max(len(a), len(b))
    return 1.0 - levenshtein(a, b) / longest if longest else 1.0


def key(text: str) -> str:
    """A heading's or cell's text as compared: normalised, case-folded, end punctuation off."""
    return normalise(text).casefold().strip(" .:;")


def greedy_pairs(scores: dict[tuple[int, int], float]) -> list[tuple[int, int]]:
    """One-to-one pairs, best score first (ties: earlier truth, then earlier found)."""
    pairs: list[tuple[int, int]] = []
    used_t: set[int] = set()
    used_f: set[int] = set()
    for (t, f), _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])):
        if t not in used_t and f not in used_f:
            pairs.append((t, f))
            used_t.add(t)
            used_f.add(f)
    return pairs


def relative_levels(headings: Sequence[Heading]) -> list[int]:
    """Levels shifted so that the document's top level is 1 (an authored section starts at ##)."""
    top = min((h.level for h in headings), default=1)
    return [h.level - top + 1 for h in headings]


def heading_score(
    truth: Sequence[Heading], found: Sequence[Heading], threshold: float = MATCH_THRESHOLD
) -> HeadingScore:
    """Found headings matched one-to-one to the truth's (text similarity >= threshold)."""
    scores = {
        (t, f): s
        for t, th in enumerate(truth)
        for f, fh in enumerate(found)
        if (s := similarity(key(th.text), key(fh.text))) >= threshold
    }
    pairs = greedy_pairs(scores)
    truth_levels, found_levels = relative_levels(truth), relative_levels(found)
    same_level = sum(truth_levels[t] == found_levels[f] for t, f in pairs)
    return HeadingScore(len(pairs), len(truth), len(found), same_level)


def matching_cells(truth: Sequence[GridCell], found: Sequence[GridCell], threshold: float) -> int:
    """Truth cells with a found cell at the same (row, col) whose text is similar enough."""
    at = {(c.row, c.col): key(c.text) for c in found}
    return sum(
        1
        for c in truth
        if key(c.text) and similarity(key(c.text), at.get((c.row, c.col), "")) >= threshold
    )


def cell_score(
    truth: Sequence[Sequence[GridCell]],
    found: Sequence[Sequence[GridCell]],
    threshold: float = MATCH_THRESHOLD,
) -> CellScore:
    """Cells matched by (row, col, text); each truth table paired with the found table that
    shares most cells with it. Empty cells count on neither side."""
    scores = {
        (t, f): float(n)
        for t, tt in enumerate(truth)
        for f, ft in enumerate(found)
        if (n := matching_cells(tt, ft, threshold))
    }
    hits = sum(int(scores[pair]) for pair in greedy_pairs(scores))
    truth_cells = sum(1 for table in truth for c in table if key(c.text))
    found_cells = sum(1 for table in found for c in table if key(c.text))
    return CellScore(hits, truth_cells, found_cells, len(found))


def words(text: str) -> list[str]:
    """Case-folded word tokens of a text, punctuation dropped."""
    return re.findall(r"\w+", normalise(text).casefold())


def shingles(tokens: Sequence[str], size: int) -> list[tuple[str, ...]]:
    """Every run of `size` consecutive tokens."""
    return [tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1)]


def longest_increasing(values: Sequence[float]) -> int:
    """Length of the longest strictly increasing subsequence (patience sorting)."""
    tails: list[float] = []
    for value in values:
        at = bisect.bisect_left(tails, value)
        tails[at : at + 1] = [value]
    return len(tails)


def anchored_positions(
    unit_words: Sequence[list[str]], found_words: list[str]
) -> dict[int, float | None]:
    """Each locatable unit's position in the found words (the median of its anchors).

    None: the unit has anchors in the truth, none of them found; a unit with no run unique
    in the truth (a one-word heading said again later) is left out.
    """
    positions: dict[int, float | None] = {}
    for size in sorted({min(SHINGLE_WORDS, len(w)) for w in unit_words if w}):
        truth_count = Counter(g for w in unit_words for g in shingles(w, size))
        found_at: dict[tuple[str, ...], list[int]] = {}
        for i, gram in enumerate(shingles(found_words, size)):
            found_at.setdefault(gram, []).append(i)
        for index, w in enumerate(unit_words):
            if not w or min(SHINGLE_WORDS, len(w)) != size:
                continue
            unique = [g for g in shingles(w, size) if truth_count[g] == 1]
            anchors = [found_at[g][0] for g in unique if len(found_at.get(g, ())) == 1]
            if unique:
                positions[index] = statistics.median(anchors) if anchors else None
    return positions


def order_score(truth_units: Sequence[str], found_text: str) -> OrderScore:
    """Truth units located in the found text by word runs unique to both; how many in order.

    A unit's anchors are its runs of SHINGLE_WORDS words (the whole unit when shorter) that
    occur once in the truth and once in the found text; its position is their median. The
    score so does not depend on how the found text is split into blocks or lines.
    """
    positions = anchored_positions([words(u) for u in truth_units], words(found_text))
    located = [p for _, p in sorted(positions.items()) if p is not None]
    return OrderScore(longest_increasing(located), len(located), len(positions))


def squashed(text: str) -> str:
    """Letters and digits only, case-folded: "Page1of 3" and "Page 1 of 3" read the same."""
    return "".join(re.findall(r"\w", normalise(text).casefold()))


def furniture_score(
    truth: Sequence[FurnitureLine],
    found: Sequence[FurnitureLine],
    truth_body: str,
    found_body: str,
    threshold: float = MATCH_THRESHOLD,
) -> FurnitureScore:
    """Truth furniture labelled as such (same page, similar text), and how much the body says."""
    scores = {
        (t, f): s
        for t, tl in enumerate(truth)
        for f, fl in enumerate(found)
        if tl.page == fl.page and (s := similarity(key(tl.text), key(fl.text))) >= threshold
    }
    # A leak: a furniture text in the found body beyond its count in the truth's body (a header
    # that quotes the title is no leak where the title is); squashed, as OCR drops spaces.
    truth_chars, found_chars = squashed(truth_body), squashed(found_body)
    per_text = Counter(squashed(line.text) for line in truth)
    in_body = sum(
        min(n, max(0, found_chars.count(text) - truth_chars.count(text)))
        for text, n in per_text.items()
        if text
    )
    return FurnitureScore(len(truth), len(greedy_pairs(scores)), len(found), in_body)


def text_edits(found_text: str, truth_text: str) -> tuple[int, int]:
    """(edit distance, truth length) of the body texts, both normalised: CER is their ratio."""
    truth = normalise(truth_text)
    return levenshtein(normalise(found_text), truth), len(truth)


def structure_score(truth: Structure, found: Structure) -> StructureScore:
    """Every score of one found structure against its truth."""
    edits, chars = text_edits(found.text, truth.text)
    return StructureScore(
        headings=heading_score(truth.headings, found.headings),
        cells=cell_score(truth.tables, found.tables),
        order=order_score(truth.units, found.text),
        furniture=furniture_score(truth.furniture, found.furniture, truth.text, found.text),
        edits=edits,
        chars=chars,
    )
