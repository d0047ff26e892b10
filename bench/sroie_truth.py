"""SROIE box annotations to plain truth text, in reading order (run once per imported receipt).

    .venv/bin/python -m bench.sroie_truth 000.csv > bench/documents/quality/sroie-000.txt

SROIE lists each receipt's text lines with their boxes, not always in reading order (a row's
prices can come after every item name). Boxes whose vertical centre falls inside a row's span
join that row; rows run top to bottom, boxes in a row left to right, one row per line.
"""

from __future__ import annotations

import sys
from pathlib import Path


def truth_text(annotation: str) -> str:
    """The text of `x1,y1,...,x4,y4,text` lines as rows read top to bottom, left to right."""
    boxes = []
    for line in annotation.splitlines():
        fields = line.split(",")
        if len(fields) < 9:
            continue
        xs, ys = [int(v) for v in fields[0:8:2]], [int(v) for v in fields[1:8:2]]
        boxes.append((min(ys), max(ys), min(xs), ",".join(fields[8:]).strip()))
    rows: list[tuple[int, int, list[tuple[int, int, int, str]]]] = []
    for box in sorted(boxes):
        centre = (box[0] + box[1]) / 2
        row = next((r for r in rows if r[0] <= centre <= r[1]), None)
        if row is None:
            rows.append((box[0], box[1], [box]))
        else:
            row[2].append(box)
    return "\n".join(" ".join(b[3] for b in sorted(r[2], key=lambda b: b[2])) for r in rows) + "\n"


if __name__ == "__main__":
    sys.stdout.write(truth_text(Path(sys.argv[1]).read_text()))
