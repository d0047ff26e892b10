"""Field accuracy of the key-value mode on real receipts, side by side with a naive regex.

Each SROIE receipt (bench/documents/fields, SOURCES.md there) is read once by the local
engine, in this process; then the same reading goes to both extractors:

* ocrq: the worker's key-value reading (consumer/fields), on the page's word lines;
* regex: what a user writes first on the page's Markdown: the first line is the company, the
  first dd/mm/yyyy-like date, the first "TOTAL ... 12.34", the lines between the company and
  the first phone/date line as the address.

A field is right when it equals the truth after SROIE's comparison (case, spacing and edge
punctuation folded; the total as an amount, since some truths keep its "$"); the similarity
column is 1 - CER of the value against the truth, 0 for none. Receipts 000-009 were looked
at while writing the key-value mode; 019-047 were not.

    .venv/bin/python -m bench.fields [--only sroie-03]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from bench.edit_distance import levenshtein
from ocrq.consumer.engines.base import PageImage
from ocrq.consumer.engines.tesseract import TesseractEngine
from ocrq.consumer.fields.keyvalue import read_fields
from ocrq.consumer.fields.lines import engine_lines
from ocrq.shared.settings import load_settings

HERE = Path(__file__).resolve().parent / "documents"
KEYS = HERE / "fields"
IMAGES = (HERE / "fields", HERE / "quality")
LOOKED_AT = {f"sroie-{n:03d}" for n in range(10)}
FIELDS = ("company", "date", "address", "total")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "company": {"type": "string", "description": "the seller"},
        "date": {"type": "string"},
        "address": {"type": "string"},
        "total": {"type": "string"},
    },
}
_DATE = re.compile(r"\b\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}\b")
_TOTAL = re.compile(r"total[^0-9\n]*?(\d+[.,]\d{2})", re.I)
_STOP = re.compile(r"tel|fax|phone|gst|date|invoice|receipt|\d{1,2}[/.-]\d{1,2}[/.-]\d{2}", re.I)


def fold(text: str | None) -> str:
    """SROIE's comparison: case, spacing and edge punctuation folded."""
    return re.sub(r"\s+", " ", text or "").strip(" .,:;").casefold()


def amount(text: str | None) -> float | None:
    """An amount as a number: "$8.20", "8.2" and "RM 8.20" are one total."""
    match = re.search(r"\d+(?:[.,]\d+)?", (text or "").replace(" ", ""))
    return float(match.group().replace(",", ".")) if match else None


def same(name: str, found: str | None, truth: str) -> bool:
    """Right or wrong; the total is compared as an amount (SROIE keeps "$" in some)."""
    if name == "total":
        return amount(found) is not None and amount(found) == amount(truth)
    return fold(found) == fold(truth)


def similarity(found: str | None, truth: str) -> float:
    """1 - CER of the value against the truth (0 when nothing was found)."""
    if not found:
        return 0.0
    a, b = fold(found), fold(truth)
    return max(0.0, 1 - levenshtein(a, b) / max(1, len(b)))


def regex_fields(markdown: str) -> dict[str, str | None]:
    """The naive extractor: first line, first date, first total, the lines in between."""
    lines = [ln.strip(" #*|") for ln in markdown.splitlines() if ln.strip(" #*|-")]
    company = lines[0] if lines else None
    address_lines = []
    for line in lines[1:6]:
        if _STOP.search(line):
            break
        address_lines.append(line)
    date = _DATE.search(markdown)
    total = _TOTAL.search(markdown)
    return {
        "company": company,
        "date": date.group() if date else None,
        "address": " ".join(address_lines) or None,
        "total": total.group(1).replace(",", ".") if total else None,
    }


@dataclass
class Tally:
    """Right answers and similarity per field, for one extractor over a set of receipts."""

    right: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FIELDS, 0))
    similar: dict[str, float] = field(default_factory=lambda: dict.fromkeys(FIELDS, 0.0))
    count: int = 0

    def add(self, found: dict[str, str | None], truth: dict[str, str]) -> None:
        """Score one receipt."""
        self.count += 1
        for name in FIELDS:
            self.right[name] += same(name, found.get(name), truth[name])
            self.similar[name] += similarity(found.get(name), truth[name])

    def row(self, name: str) -> str:
        """Accuracy per field and over all, then the mean similarity over all."""
        n = max(1, self.count)
        cells = [f"{100 * self.right[f] / n:5.1f}" for f in FIELDS]
        total = 100 * sum(self.right.values()) / (n * len(FIELDS))
        mean_sim = 100 * sum(self.similar.values()) / (n * len(FIELDS))
        return f"| {name} | {' | '.join(cells)} | **{total:.1f}** | {mean_sim:.1f} |"


def image_of(stem: str) -> Path:
    """The receipt's image: in fields/ or, for the reading-quality ten, in quality/."""
    return next(p for folder in IMAGES if (p := folder / f"{stem}.jpg").is_file())


def read_receipt(engine: TesseractEngine, path: Path) -> tuple[str, list[Any]]:
    """The page's Markdown and its word lines, as the worker has them."""
    with Image.open(path) as image:
        width, height = image.size
    page = PageImage(number=1, path=str(path), media_type="image/jpeg", width=width, height=height)
    out = asyncio.run(engine.recognise([page]))
    [read] = out.pages
    return read.markdown or "", engine_lines(read, out.words.get(1, []))


def run(only: str | None) -> None:
    """Read every receipt and print the tables."""
    tallies = {key: (Tally(), Tally()) for key in ("looked at", "not looked at", "all")}
    engine = TesseractEngine(load_settings({}, local_workers=1))
    asyncio.run(engine.warm_up())
    kv_seconds, grounded, values = 0.0, 0, 0
    try:
        for key_file in sorted(KEYS.glob("sroie-*.json")):
            stem = key_file.stem
            if only and only not in stem:
                continue
            truth = json.loads(key_file.read_text())
            markdown, lines = read_receipt(engine, image_of(stem))
            started = time.perf_counter()
            found = read_fields(SCHEMA, lines)
            kv_seconds += time.perf_counter() - started
            ours = {name: (hit.value if hit else None) for name, hit in found.items()}
            grounded += sum(1 for hit in found.values() if hit and hit.boxes)
            values += sum(1 for hit in found.values() if hit)
            group = "looked at" if stem in LOOKED_AT else "not looked at"
            for key in (group, "all"):
                tallies[key][0].add(ours, truth)
                tallies[key][1].add(regex_fields(markdown), truth)
    finally:
        asyncio.run(engine.aclose())
    print_tables(tallies, kv_seconds, grounded, values)


def print_tables(
    tallies: dict[str, tuple[Tally, Tally]], kv_seconds: float, grounded: int, values: int
) -> None:
    """One table per set of receipts: field accuracy (%) of both extractors."""
    for key, (ours, regex) in tallies.items():
        print(f"\n{key}: {ours.count} receipts\n")
        print("| extractor | " + " | ".join(FIELDS) + " | all fields | similarity |")
        print("|---|" + "--:|" * (len(FIELDS) + 2))
        print(ours.row("ocrq key-value"))
        print(regex.row("naive regex"))
    count = max(1, tallies["all"][0].count)
    print(f"\nkey-value time: {1000 * kv_seconds / count:.1f} ms per receipt (after OCR)")
    print(f"values found: {values}, of them with boxes: {grounded}")


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="only receipts whose name contains this")
    run(parser.parse_args().only)


if __name__ == "__main__":
    main()
