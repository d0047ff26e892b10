"""Ink on a page image: the grey level that splits it from the paper, and its connected parts.

Three steps read pixels this way: the skew measure (straighten.py), the figures on a scan
(scan_figures.py) and the decimal points put back (decimal_points.py). Only numpy: no
image-processing library is a dependency.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Part = tuple[int, int, int, int]  # x0, y0, x1, y1, inclusive


def otsu_level(pixels: NDArray[np.generic]) -> float:
    """The grey level that best splits ink from paper (Otsu's between-class variance)."""
    histogram = np.bincount(pixels.astype(np.uint8).ravel(), minlength=256) / pixels.size
    weights = np.cumsum(histogram)
    means = np.cumsum(histogram * np.arange(256))
    total, total_mean = weights[-1], means[-1]
    background = total - weights
    split = (weights > 0) & (background > 0)
    between = np.zeros(256)
    between[split] = (total_mean * weights[split] - means[split] * total) ** 2 / (
        weights[split] * background[split]
    )
    return float(np.argmax(between))


def ink_parts(mask: NDArray[np.bool_]) -> list[Part]:
    """Boxes (inclusive) of the mask's 8-connected parts, from its runs per row."""
    runs: list[tuple[int, int, int]] = []  # row, first column, last column
    parent: list[int] = []

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    previous: list[int] = []
    for row in range(mask.shape[0]):
        edges = np.flatnonzero(np.diff(np.concatenate(([0], mask[row].view(np.int8), [0]))))
        current = []
        for start, stop in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
            index = len(runs)
            runs.append((row, start, stop - 1))
            parent.append(index)
            for other in previous:  # 8-connected: runs touching diagonally join too
                _, a, b = runs[other]
                if a <= stop and b >= start - 1:
                    parent[root(other)] = root(index)
            current.append(index)
        previous = current
    boxes: dict[int, list[int]] = {}
    for index, (row, start, last) in enumerate(runs):
        box = boxes.setdefault(root(index), [start, row, last, row])
        box[0], box[2] = min(box[0], start), max(box[2], last)
        box[1], box[3] = min(box[1], row), max(box[3], row)
    return [(b[0], b[1], b[2], b[3]) for b in boxes.values()]
