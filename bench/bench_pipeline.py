"""End-to-end throughput with the fake vLLM: batch_size 1 vs 4, side by side in one run.

    .venv/bin/python -m bench.bench_pipeline --docs 20 --pages 8

Starts a private Redis, the fake vLLM (a fixed latency per image, a concurrency limit like
vLLM's max_num_seqs), `ocrq producer` and one `ocrq worker` on the vLLM engine. For each
batch size it submits M text PDFs of P A4 pages at once (JSON base64, text layer off so
every page is rendered and sent to the model), long-polls every job until it is terminal,
and reports pages/s, jobs/s, job latency (submit to done, as the client sees it) and the
fake's peak of requests running at once.
"""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import argparse
import asyncio
import base64
import time
from dataclasses import dataclass
from typing import Any

import httpx

from bench.sample_documents import text_pdf
from ocrq.shared.schemas import TERMINAL
from tests.support import services

POLL_WAIT_S = 30
HTTP_TIMEOUT_S = POLL_WAIT_S + 30


@dataclass(frozen=True)
class JobOutcome:
    status: str
    pages_done: int
    submitted_at: float
    finished_at: float
    requests: int  # chat-completion requests the worker sent for this job
    raster_ms: int  # summed over its page groups (they overlap)
    infer_ms: int

    @property
    def latency_s(self) -> float:
        return self.finished_at - self.submitted_at


async def submit_and_wait(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], deadline: float
) -> JobOutcome:
    """Submit one document, then long-poll it until terminal or the deadline passes."""
    submitted_at = time.perf_counter()
    r = await client.post(f"{url}/v1/jobs", json=body)
    if r.status_code != 202:
        raise RuntimeError(f"submit answered {r.status_code}: {r.text[:200]}")
    job_id = r.json()["id"]
    view: dict[str, Any] = {}
    while time.perf_counter() < deadline:
        r = await client.get(f"{url}/v1/jobs/{job_id}", params={"wait": POLL_WAIT_S})
        view = r.json()
        if view["status"] in TERMINAL:
            result = view.get("result") or {}
            timings, usage = result.get("timings", {}), result.get("usage", {})
            return JobOutcome(
                view["status"],
                view["progress"]["pages_done"],
                submitted_at,
                time.perf_counter(),
                usage.get("requests", 0),
                timings.get("raster_ms", 0),
                timings.get("infer_ms", 0),
            )
    raise TimeoutError(f"job {job_id} not terminal by the deadline: {view.get('status')}")


async def run_round(
    url: str, documents: list[bytes], options: dict[str, Any], timeout_s: float
) -> list[JobOutcome]:
    """Submit every document at once and wait for all of them."""
    bodies = [
        {"document": base64.b64encode(d).decode(), "filename": f"doc{i}.pdf", "options": options}
        for i, d in enumerate(documents)
    ]
    limits = httpx.Limits(max_connections=len(bodies) + 4)
    deadline = time.perf_counter() + timeout_s
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S, limits=limits) as client:
        tasks = [submit_and_wait(client, url, body, deadline) for body in bodies]
        return await asyncio.gather(*tasks)


@dataclass(frozen=True)
class Row:
    batch_size: int
    jobs: int
    pages: int
    failed: int
    wall_s: float
    p50_s: float
    p95_s: float
    peak_running: int
    requests: int
    raster_ms: int
    infer_ms: int

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.wall_s

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.wall_s


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank q-quantile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def measure(
    url: str, fake: Any, documents: list[bytes], batch_size: int, args: argparse.Namespace
) -> Row:
    """One round at one batch size; the fake's peak is counted for this round only."""
    fake.reset_stats()
    options = {"batch_size": batch_size, "dpi": args.dpi, "text_layer": "off"}
    outcomes = asyncio.run(run_round(url, documents, options, args.timeout))
    peak = fake.stats()["peak_running"]
    start = min(o.submitted_at for o in outcomes)
    wall = max(o.finished_at for o in outcomes) - start
    latencies = [o.latency_s for o in outcomes]
    return Row(
        batch_size,
        len(outcomes),
        sum(o.pages_done for o in outcomes if o.status == "done"),
        sum(1 for o in outcomes if o.status != "done"),
        wall,
        quantile(latencies, 0.50),
        quantile(latencies, 0.95),
        peak,
        sum(o.requests for o in outcomes),
        sum(o.raster_ms for o in outcomes),
        sum(o.infer_ms for o in outcomes),
    )


def print_table(rows: list[Row]) -> None:
    """The table, then the ratios against the first row."""
    print(
        f"\n{'batch':>5} {'jobs':>5} {'pages':>5} {'fail':>4} {'wall s':>7} {'pages/s':>8} "
        f"{'jobs/s':>7} {'p50 s':>6} {'p95 s':>6} {'peak':>5} {'reqs':>5} "
        f"{'raster ms/page':>14} {'infer ms/req':>12}"
    )
    for r in rows:
        print(
            f"{r.batch_size:>5} {r.jobs:>5} {r.pages:>5} {r.failed:>4} {r.wall_s:>7.2f} "
            f"{r.pages_per_s:>8.1f} {r.jobs_per_s:>7.2f} {r.p50_s:>6.2f} {r.p95_s:>6.2f} "
            f"{r.peak_running:>5} {r.requests:>5} {r.raster_ms / max(r.pages, 1):>14.0f} "
            f"{r.infer_ms / max(r.requests, 1):>12.0f}"
        )
    base = rows[0]
    for r in rows[1:]:
        print(
            f"batch_size {r.batch_size} vs {base.batch_size}: pages/s "
            f"{r.pages_per_s / base.pages_per_s:.2f}x, p50 latency {r.p50_s / base.p50_s:.2f}x"
        )


def main() -> int:
    """Parse flags, start the stack once, run one round per batch size, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=20, help="documents per round")
    parser.add_argument("--pages", type=int, default=8, help="pages per document")
    parser.add_argument("--dpi", type=int, default=100, help="render resolution")
    parser.add_argument("--batch-sizes", default="1,4", help="rounds, in this order")
    parser.add_argument("--latency-s", type=float, default=0.05, help="fake latency per image")
    parser.add_argument("--max-concurrency", type=int, default=64, help="fake's max_num_seqs")
    parser.add_argument("--timeout", type=float, default=120.0, help="per-round deadline (s)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.batch_sizes.split(",")]
    documents = [text_pdf(i, args.pages) for i in range(args.docs)]
    rows = []
    with services.scratch_dir() as tmp, services.private_redis(tmp) as redis_url:
        with services.fake_vllm(args.latency_s, args.max_concurrency) as fake:
            with (
                services.producer(redis_url, tmp) as url,
                services.worker(redis_url, fake.url, tmp),
            ):
                # Warm-up: the worker's raster pool and connections start outside the timing.
                asyncio.run(run_round(url, [text_pdf(999, 2)], {"dpi": args.dpi}, args.timeout))
                for size in sizes:
                    rows.append(measure(url, fake, documents, size, args))
                    print(f"batch_size {size}: {rows[-1].wall_s:.2f} s")
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
