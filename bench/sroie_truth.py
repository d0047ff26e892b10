"""SROIE box annotations to plain truth text, in reading order (run once per imported receipt).

    .venv/bin/python -m bench.sroie_truth 000.csv > bench/documents/quality/sroie-000.txt

or a range of receipts from a clone of https://github.com/zzzDavid/ICDAR-2019-SROIE (its
data/img/NNN.jpg and data/box/NNN.csv), images and truths into a folder that
`bench/quality.py --documents FOLDER` reads:

    .venv/bin/python -m bench.sroie_truth --from ICDAR-2019-SROIE --range 300-339 --to /tmp/r

SROIE lists each receipt's text lines with their boxes, not always in reading order (a row's
prices can come after every item name). Boxes whose vertical centre falls inside a row's span
join that row; rows run top to bottom, boxes in a row left to right, one row per line.
"""

from __future__ import annotations

import argparse
import shutil
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


def export(checkout: Path, first: int, last: int, folder: Path) -> int:
    """Receipts first..last of a SROIE clone as sroie-NNN.jpg and sroie-NNN.txt in folder."""
    folder.mkdir(parents=True, exist_ok=True)
    count = 0
    for number in range(first, last + 1):
        image = checkout / "data" / "img" / f"{number:03d}.jpg"
        boxes = checkout / "data" / "box" / f"{number:03d}.csv"
        if image.is_file() and boxes.is_file():
            shutil.copyfile(image, folder / f"sroie-{number:03d}.jpg")
            (folder / f"sroie-{number:03d}.txt").write_text(truth_text(boxes.read_text()))
            count += 1
    return count


def main(argv: list[str]) -> None:
    """One annotation file to stdout, or --from CLONE --range A-B --to FOLDER."""
    if argv[:1] != ["--from"]:
        sys.stdout.write(truth_text(Path(argv[0]).read_text()))
        return
    parser = argparse.ArgumentParser(description="SROIE receipts with their truth text")
    parser.add_argument("--from", dest="checkout", type=Path, required=True)
    parser.add_argument("--range", required=True, help="first-last receipt numbers, e.g. 300-339")
    parser.add_argument("--to", type=Path, required=True)
    args = parser.parse_args(argv)
    first, _, last = args.range.partition("-")
    count = export(args.checkout, int(first), int(last or first), args.to)
    print(f"{count} receipts in {args.to}")


if __name__ == "__main__":
    main(sys.argv[1:])
