"""Collecting an upload's body: the shipped way against a bytearray grown piece by piece.

    .venv/bin/python -m bench.bench_body_collect

Feeds bodies of 100 KiB, 1 MiB and 10 MiB in 64 KiB pieces (what uvicorn hands the app) to
the producer's ``read_bounded`` (raw and JSON bodies) and to ``FormParts`` behind the
multipart parser, and to the same two with the way they collected bytes before: a bytearray
grown by ``+=``, then copied into ``bytes``. Prints µs of CPU per body, median of 7 rounds,
both ways interleaved in one run.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import AsyncIterator, Callable, Coroutine

from multipart import MultipartSegment, PushMultipartParser

from ocrq.producer.jobs.ingest import FormParts, read_bounded

PIECE = 64 * 1024
SIZES = {"100 KiB": 100 * 1024, "1 MiB": 1024 * 1024, "10 MiB": 10 * 1024 * 1024}
LIMIT = 11 * 1024 * 1024
BOUNDARY = b"benchboundary0123456789"


async def grown_body(chunks: AsyncIterator[bytes]) -> bytes:
    """The earlier read_bounded: a bytearray grown chunk by chunk, then bytes of it."""
    body = bytearray()
    async for chunk in chunks:
        body += chunk
    return bytes(body)


class GrownFile:
    """The earlier FormParts, for its file part: pieces added to one bytearray, then bytes."""

    def __init__(self) -> None:
        self.data = bytearray()

    def feed(self, event: MultipartSegment | bytes | None) -> None:
        """One parser event."""
        if isinstance(event, bytes):  # the parser hands its pieces over as bytes
            self.data += event
            if len(self.data) > LIMIT:
                raise ValueError("too large")

    def body(self) -> bytes:
        """The file part's bytes."""
        return bytes(self.data)


class ShippedFile(FormParts):
    """FormParts as shipped, with the join read_multipart does."""

    def __init__(self) -> None:
        super().__init__(LIMIT)

    def body(self) -> bytes:
        """The file part's bytes."""
        return b"".join(self.pieces)


def multipart_collect(body: bytes) -> Callable[[type[GrownFile | ShippedFile]], bytes]:
    """A function that parses the multipart body afresh, in pieces, feeding each event to a
    collector as it comes (as read_multipart does), and returns the file part's bytes."""
    head = b'--%s\r\ncontent-disposition: form-data; name="file"\r\n\r\n' % BOUNDARY
    whole = head + body + b"\r\n--%s--\r\n" % BOUNDARY
    pieces = [whole[i : i + PIECE] for i in range(0, len(whole), PIECE)]

    def collect(kind: type[GrownFile | ShippedFile]) -> bytes:
        parts = kind()
        with PushMultipartParser(BOUNDARY, max_segment_count=32) as parser:
            for piece in pieces:
                for event in parser.parse(piece):
                    parts.feed(event)
            parser.close()
        return parts.body()

    return collect


def finish(coroutine: Coroutine[None, None, bytes]) -> bytes:
    """Run a coroutine that never suspends (its chunks are all in memory) without a loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return bytes(done.value)
    raise RuntimeError("the coroutine suspended")


def cpu_us(run: Callable[[], object], count: int) -> float:
    """µs of CPU per call of run."""
    started = time.process_time()
    for _ in range(count):
        run()
    return (time.process_time() - started) / count * 1e6


def measure(size: int) -> dict[str, float]:
    """Median µs per body of each way, interleaved over 7 rounds."""
    body = os.urandom(size)
    pieces = [body[i : i + PIECE] for i in range(0, len(body), PIECE)]

    async def chunks() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    collect = multipart_collect(body)
    ways: dict[str, Callable[[], object]] = {
        "raw/JSON, grown bytearray": lambda: finish(grown_body(chunks())),
        "raw/JSON, shipped (joined once)": lambda: finish(read_bounded(chunks(), LIMIT, LIMIT)),
        "multipart, grown bytearray": lambda: collect(GrownFile),
        "multipart, shipped (joined once)": lambda: collect(ShippedFile),
    }
    assert finish(read_bounded(chunks(), LIMIT, LIMIT)) == finish(grown_body(chunks())) == body
    assert collect(ShippedFile) == collect(GrownFile) == body
    count = max(20, 400 * 1024 * 1024 // size)
    rounds: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(7):
        for name, run in ways.items():
            rounds[name].append(cpu_us(run, count))
    return {name: statistics.median(values) for name, values in rounds.items()}


def main() -> None:
    """Measure every size, print one table."""
    figures = {label: measure(size) for label, size in SIZES.items()}
    print("| way |", " | ".join(figures), "|")
    print("|---|", " | ".join("--:" for _ in figures), "|")
    for name in next(iter(figures.values())):
        print(f"| {name} |", " | ".join(f"{f[name]:,.0f}" for f in figures.values()), "|")
    print("(µs of CPU per body; the multipart rows include the parser's own work)")


if __name__ == "__main__":
    main()
