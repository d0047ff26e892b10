"""The documents bench_ingest uploads, and the decode it times in process: one synchronous
JSON submission's decode and the longest single GIL-holding steps inside it. bench/ only."""

from __future__ import annotations

import base64
import binascii
import statistics
import time
from collections.abc import Callable

import msgspec

from ocrq.producer.jobs.decoding import clean_slice, decode_plain
from ocrq.producer.jobs.ingest import Query, SubmitPlain, decode_json_slowly, decode_json_submission
from ocrq.shared.schemas import SubmitBody

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MIB = 1024 * 1024


def fake_png(doc_bytes: int) -> bytes:
    """PNG magic bytes then zeros: accepted at ingest, whose type sniffing reads the magic."""
    return PNG_MAGIC + bytes(doc_bytes - len(PNG_MAGIC))


def submission_body(document: bytes) -> bytes:
    """A JSON submission of the document, base64-encoded."""
    payload = {"document": base64.b64encode(document).decode(), "filename": "bench.png"}
    return msgspec.json.encode(payload)


class NativeBase64(msgspec.Struct):
    """The fast path before pybase64: msgspec's own base64 decoder, into bytes."""

    document: bytes
    filename: str | None = None


def time_gil_steps(body: bytes, repeats: int) -> dict[str, float]:
    """Median ms of the single C calls inside the decode that hold the GIL from start to end."""
    submit = msgspec.json.decode(body, type=SubmitBody)
    clean = clean_slice(submit.document, 0)
    text = msgspec.json.decode(body, type=SubmitPlain).document
    steps: dict[str, Callable[[], object]] = {
        "msgspec decode, document left as JSON text (one call)": lambda: msgspec.json.decode(
            body, type=SubmitPlain
        ),
        "decode_plain: pybase64 of the document (one call)": lambda: decode_plain(text),
        "msgspec decode, its native base64 (the path before)": lambda: msgspec.json.decode(
            body, type=NativeBase64
        ),
        "msgspec decode, document as str": lambda: msgspec.json.decode(body, type=SubmitBody),
        "clean_slice (encode + translate, 1 MiB)": lambda: clean_slice(submit.document, 0),
        "a2b_base64 of one 1 MiB slice": lambda: binascii.a2b_base64(clean, strict_mode=True),
    }
    medians = {}
    for name, step in steps.items():
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            step()
            times.append(time.perf_counter() - started)
        medians[name] = statistics.median(times) * 1000
    return medians


def time_sync_decode(body: bytes, max_document: int, repeats: int) -> dict[str, list[float]]:
    """Seconds per decode of body, once per repeat each, in this process: the shipped path
    (the document as JSON text, then pybase64) and the slice-by-slice fallback (data URIs, …)."""
    decoders = {
        "decode_json_submission (pybase64)": decode_json_submission,
        "decode_json_slowly (slice by slice)": decode_json_slowly,
    }
    times: dict[str, list[float]] = {name: [] for name in decoders}
    for _ in range(repeats):
        for name, decode in decoders.items():
            started = time.perf_counter()
            decode(body, max_document, Query(None, {}))
            times[name].append(time.perf_counter() - started)
    return times


def print_decode(decode_s: dict[str, list[float]], steps: dict[str, float], doc_bytes: int) -> None:
    """The synchronous decode times and the longest uninterruptible steps."""
    print(f"\none synchronous decode of a {doc_bytes / MIB:g} MiB document (ms, median / max):")
    for name, seconds in decode_s.items():
        median, worst = statistics.median(seconds) * 1000, max(seconds) * 1000
        print(f"  {name:<40} {median:>6.1f} / {worst:.1f}")
    print("longest single GIL-holding steps (median ms):")
    for name, ms in steps.items():
        print(f"  {name:<40} {ms:>6.1f}")
