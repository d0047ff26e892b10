"""Redaction on real documents: every value found is gone from every output, pixels included.

Each document (the SROIE receipts of bench/documents, and the development corpus when
../shared/corpus is there) is read twice by a private stack (Redis, producer, one local
worker): once plainly, once with every kind redacted. The values the redaction's detector
finds in the plain reading are then looked for, in every written form (as printed, without
spaces, without dashes), in the redacted job's JSON, Markdown and chunks, in its PDF's text
layer and in what Tesseract reads from the PDF's page images.

    .venv/bin/python -m bench.redaction [--only sroie] [--countries us,gb,my]
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pymupdf

from ocrq.consumer.redact.detect import Detector
from ocrq.shared.schemas import JobOptions
from ocrq.shared.sniff import sniff_media_type
from tests.support import services
from tests.support.personal import holds_any, ocr_of_pdf

HERE = Path(__file__).resolve().parent
FOLDERS = (HERE / "documents" / "quality", HERE / "documents" / "fields")
CORPUS = HERE.parent.parent / "shared" / "corpus" / "documents"
HOSTILE = ("fuzzed", "bomb", "encrypted")
KINDS = ["email", "phone", "iban", "credit_card", "national_id", "date_of_birth"]
OUTPUTS = ("json", "markdown", "chunks")


def documents(only: str | None) -> list[Path]:
    """The receipts, then the corpus's documents (not its hostile files)."""
    found = [p for folder in FOLDERS for p in sorted(folder.glob("*.jpg"))]
    if CORPUS.is_dir():
        found += [p for p in sorted(CORPUS.iterdir()) if not any(h in p.name for h in HOSTILE)]
    return [p for p in found if not only or only in p.name]


def leaks(text: str, values: list[str]) -> int:
    """How many of the values ``text`` still holds in some form."""
    return len(holds_any(text, values))


def job(client: httpx.Client, path: Path, options: dict[str, Any]) -> tuple[str, float]:
    """Submit a document, wait for it; its id and its seconds (from its own timestamps)."""
    params = {"filename": path.name, "max_pages": "5", "pages": "1-5", **options}
    job_id = client.post("/v1/jobs", content=path.read_bytes(), params=params).json()["id"]
    while True:
        view = client.get(f"/v1/jobs/{job_id}", params={"wait": 30}).json()
        if view["status"] in ("done", "failed", "cancelled"):
            if view["status"] != "done":
                raise RuntimeError(f"{path.name}: {view['status']} {view.get('error')}")
            started, finished = view["started_at"], view["finished_at"]
            return job_id, _seconds(finished) - _seconds(started)


def _seconds(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def found_values(client: httpx.Client, job_id: str, detector: Detector) -> list[tuple[str, str]]:
    """(kind, value) of what the detector finds in a plain job's blocks and pages."""
    result = client.get(f"/v1/jobs/{job_id}/result").json()
    texts = [b["text"] for p in result["pages"] for b in p["blocks"]]
    texts += [p["markdown"] or "" for p in result["pages"] if not p["blocks"]]
    return [(s.kind, t[s.start : s.end]) for t in texts for s in detector.find(t)]


@contextlib.contextmanager
def private_stack() -> Iterator[httpx.Client]:
    """Redis, a producer and one local worker of our own."""
    with contextlib.ExitStack() as procs:
        tmp = procs.enter_context(services.scratch_dir())
        redis_url = procs.enter_context(services.private_redis(tmp))
        url = procs.enter_context(services.producer(redis_url, tmp))
        procs.enter_context(
            services.worker(redis_url, None, tmp, health_timeout_s=120, engine="local")
        )
        yield procs.enter_context(httpx.Client(base_url=url, timeout=120))


def run(only: str | None, countries: str) -> None:
    """Every document twice; a line each, then the totals."""
    detector = Detector(JobOptions(redact=list(KINDS)), countries)  # type: ignore[arg-type]
    redact = {"redact": ",".join(KINDS), "redact_countries": countries}
    kinds: Counter[str] = Counter()
    leaked: Counter[str] = Counter()
    plain_s = redacted_s = 0.0
    with private_stack() as client:
        for path in documents(only):
            if sniff_media_type(path.read_bytes()[:2048]) is None:
                continue
            try:
                plain, seconds = job(client, path, {})
            except RuntimeError as e:  # a document ocrq cannot read at all has nothing to mask
                print(f"{path.name}: skipped, the plain job failed ({e})", flush=True)
                continue
            plain_s += seconds
            values = found_values(client, plain, detector)
            kinds.update(kind for kind, _ in values)
            masked, seconds = job(client, path, redact)
            redacted_s += seconds
            strings = [v for _, v in values]
            for fmt in OUTPUTS:
                leaked[fmt] += leaks(
                    client.get(f"/v1/jobs/{masked}/result", params={"format": fmt}).text, strings
                )
            pdf = client.get(f"/v1/jobs/{masked}/result", params={"format": "pdf"}).content
            leaked["pdf text"] += leaks(
                "".join(p.get_text() for p in pymupdf.open(stream=pdf)), strings
            )
            leaked["pdf pixels (OCR)"] += leaks(ocr_of_pdf(pdf), strings)
            print(
                f"{path.name}: {len(values)} values {sorted(set(k for k, _ in values))}", flush=True
            )
    print(f"\nvalues found: {sum(kinds.values())} {dict(kinds)}")
    print(
        "values left in the redacted outputs:",
        {k: leaked[k] for k in (*OUTPUTS, "pdf text", "pdf pixels (OCR)")},
    )
    ratio = redacted_s / max(plain_s, 1e-9)
    print(f"job seconds: plain {plain_s:.1f}, redacted {redacted_s:.1f} (x{ratio:.2f})")


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="only documents whose name contains this")
    parser.add_argument("--countries", default="us,gb,de,fr,nl,es,it,my")
    args = parser.parse_args()
    started = time.perf_counter()
    run(args.only, args.countries)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
