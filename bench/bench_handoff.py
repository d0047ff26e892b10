"""Page handoff: base64 in the request body (data) vs a file:// URL vLLM reads (file).

    .venv/bin/python -m bench.bench_handoff --dpis 150,200 --docs 6 --pages 4 --rounds 3

A private Redis, `ocrq producer` and the fake vLLM started as vLLM would be with
``--allowed-local-media-path``; the fake decodes every image fully (PyMuPDF), from the base64
of a data URI or from the file, as vLLM's image loader does. For each DPI and round, one
`ocrq worker` per mode (OCRQ_PAGE_HANDOFF=data, then file; the order flips every round) runs
the same workload: M text PDFs of P A4 pages submitted at once, text layer off and batch_size
1, so every page is rendered and sent alone. Per page: the worker process's CPU time (where
the read, base64 and JSON of a data URI happen; its render processes are counted apart, in
*tree*), the fake's CPU time (the engine's side: JSON and base64 decode, or a file read), and
the request bytes the fake received. pages/s runs from the first job created to the last
finished (the jobs' own timestamps); the fake answers at once, so it measures ocrq, not a
model. Figures are medians over the rounds; the machine is shared, so compare the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import msgspec

from bench.sample_documents import text_pdf
from ocrq.consumer.engines.base import PageImage
from ocrq.consumer.engines.vllm import encode_body
from ocrq.consumer.raster import render_pdf_page
from ocrq.fakevllm.app import read_chat_request
from ocrq.fakevllm.config import FakeConfig
from ocrq.fakevllm.protocol import parse_chat_request
from ocrq.fakevllm.runner import FakeVllm
from ocrq.shared.profiles import get_profile
from tests.support import measuring, services

MODES = ("data", "file")
TIMEOUT_S = 300.0  # one workload's deadline
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid: int, *, with_reaped_children: bool = False) -> int:
    """utime + stime of a process (plus its reaped children's), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat
    return own + (int(fields[13]) + int(fields[14]) if with_reaped_children else 0)


def descendants(pid: int) -> list[int]:
    """Every live process below pid (the render forkserver and its pool)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            for child in map(int, (task / "children").read_text().split()):
                found += [child, *descendants(child)]
    return found


def tree_ticks(pid: int) -> int:
    """CPU of the render processes below pid; a recycled one's lands in its reaper's count."""
    total = 0
    for child in descendants(pid):
        with contextlib.suppress(OSError):  # a process may exit between listing and reading
            total += cpu_ticks(child, with_reaped_children=True)
    return total


@dataclass(frozen=True)
class Sample:
    dpi: int
    mode: str
    pages: int
    wall_s: float
    worker_s: float  # the worker process itself
    render_s: float  # its render processes
    engine_s: float  # the fake vLLM process
    request_bytes: int


async def submit_and_finish(client: httpx.AsyncClient, url: str, pdf: bytes, dpi: int) -> Any:
    """One raw PDF upload, every page rendered and sent alone; its final view."""
    options = {"dpi": str(dpi), "text_layer": "off", "batch_size": "1"}
    headers = {"content-type": "application/pdf"}
    r = await client.post(f"{url}/v1/jobs", content=pdf, params=options, headers=headers)
    if r.status_code != 202:
        raise RuntimeError(f"submit answered {r.status_code}: {r.text[:200]}")
    return await measuring.finish_job(client, url, r.json()["id"])


async def run_jobs(url: str, documents: list[bytes], dpi: int, timeout_s: float) -> float:
    """Submit every document at once, wait for all; first created to last finished, in s."""
    limits = httpx.Limits(max_connections=len(documents) + 4)
    async with httpx.AsyncClient(timeout=measuring.POLL_WAIT_S + 30, limits=limits) as client:
        jobs = (submit_and_finish(client, url, pdf, dpi) for pdf in documents)
        views = await asyncio.wait_for(asyncio.gather(*jobs), timeout_s)
    failed = [v for v in views if v["status"] != "done"]
    if failed:
        raise RuntimeError(f"{len(failed)} jobs did not finish: {failed[0].get('error')}")
    start = min(measuring.epoch(v["created_at"]) for v in views)
    return max(measuring.epoch(v["finished_at"]) for v in views) - start


@dataclass(frozen=True)
class Bench:
    """The shared stack, the workload and the flags of one run."""

    redis_url: str
    api: str
    fake: FakeVllm
    tmp: Path
    documents: list[bytes]
    args: argparse.Namespace

    @property
    def pages(self) -> int:
        return int(self.args.docs * self.args.pages)

    def sample(self, dpi: int, mode: str) -> Sample:
        """The workload through a fresh worker in this mode, with the CPU and bytes it cost."""
        (self.tmp / mode).mkdir(exist_ok=True)
        with services.worker_process(
            self.redis_url,
            self.fake.url,
            self.tmp / mode,
            page_handoff=mode,
            raster_workers=str(self.args.raster_workers),
        ) as worker:
            asyncio.run(run_jobs(self.api, [text_pdf(999, 1)], dpi, TIMEOUT_S))  # warm-up
            return self.measure(worker.pid, dpi, mode)

    def measure(self, worker_pid: int, dpi: int, mode: str) -> Sample:
        """Run the workload once, reading CPU clocks and the fake's traffic around it."""
        assert self.fake.process is not None
        pids = (worker_pid, self.fake.process.pid)
        self.fake.reset_traffic()
        before = (cpu_ticks(pids[0]), tree_ticks(pids[0]), cpu_ticks(pids[1]))
        wall = asyncio.run(run_jobs(self.api, self.documents, dpi, TIMEOUT_S))
        after = (cpu_ticks(pids[0]), tree_ticks(pids[0]), cpu_ticks(pids[1]))
        traffic = self.fake.traffic()
        if traffic["images"] != self.pages:
            raise RuntimeError(f"the fake decoded {traffic['images']} images, not {self.pages}")
        worker_s, render_s, engine_s = (
            (b - a) / TICKS_PER_S for a, b in zip(before, after, strict=True)
        )
        bytes_sent = traffic["request_bytes"]
        return Sample(dpi, mode, self.pages, wall, worker_s, render_s, engine_s, bytes_sent)


def schedule(dpis: list[int], rounds: int) -> list[tuple[int, str]]:
    """(dpi, mode) in run order: both modes every round, their order flipped each round."""
    return [
        (dpi, mode)
        for dpi in dpis
        for round_no in range(rounds)
        for mode in (MODES if round_no % 2 == 0 else MODES[::-1])
    ]


def run(args: argparse.Namespace) -> list[Sample]:
    """One stack; a fresh worker for every (dpi, mode, round)."""
    documents = [text_pdf(i, args.pages) for i in range(args.docs)]
    samples = []
    with contextlib.ExitStack() as procs:
        tmp = procs.enter_context(services.scratch_dir())
        redis_url = procs.enter_context(services.private_redis(tmp))
        allowed = tmp / "file" / "shm" / "ocrq"  # where the file-mode worker puts its pages
        allowed.mkdir(parents=True)
        fake = procs.enter_context(
            FakeVllm(max_recorded=0, max_concurrency=64, allowed_local_media_path=str(allowed))
        )
        api = procs.enter_context(services.producer(redis_url, tmp))
        bench = Bench(redis_url, api, fake, tmp, documents, args)
        for dpi, mode in schedule(args.dpis, args.rounds):
            samples.append(bench.sample(dpi, mode))
            print(f"{dpi} dpi, {mode}: {line(samples[-1])}", flush=True)
    return samples


def cpu_ms(work: Callable[[], object], repeats: int) -> float:
    """This process's CPU milliseconds per call of ``work()``: a quiet, in-process figure."""
    started = time.process_time()
    for _ in range(repeats):
        work()
    return (time.process_time() - started) / repeats * 1000


def handoff_costs(dpi: int, folder: Path, repeats: int = 20) -> dict[str, dict[str, float]]:
    """Per mode, CPU ms for one page rendered by the worker's own function (see mode_costs)."""
    pdf = folder / "one.pdf"
    pdf.write_bytes(text_pdf(0, 1))
    page = render_pdf_page(str(pdf), 0, dpi, str(folder), 80_000_000)
    config = FakeConfig(allowed_local_media_path=str(folder))
    return {mode: mode_costs(page, mode, config, repeats) for mode in MODES}


def mode_costs(page: PageImage, mode: str, config: FakeConfig, repeats: int) -> dict[str, float]:
    """*request*: the worker builds the body; *parse*: the engine decodes the JSON and loads
    the image (base64 decode, or the file read); *decode*: plus the pixels, as vLLM does."""
    profile = get_profile("unlimited-ocr")
    handoff: Literal["data", "file"] = "file" if mode == "file" else "data"
    body = encode_body(profile, config.model, [page], 0, handoff)
    return {
        "request": cpu_ms(lambda: encode_body(profile, config.model, [page], 0, handoff), repeats),
        "parse": cpu_ms(lambda: parse_chat_request(msgspec.json.decode(body), config), repeats),
        "decode": cpu_ms(lambda: read_chat_request(msgspec.json.decode(body), config), repeats),
    }


def print_costs(costs: dict[int, dict[str, dict[str, float]]]) -> None:
    """The in-process CPU per page, per DPI and mode, and file over data."""
    print("\n| DPI | handoff | request build ms | engine parse ms | engine parse + decode ms |")
    print("|---|---|---:|---:|---:|")
    for dpi, modes in costs.items():
        for mode in MODES:
            cells = " | ".join(f"{modes[mode][k]:.2f}" for k in ("request", "parse", "decode"))
            print(f"| {dpi} | {mode} | {cells} |")
        ratios = " | ".join(
            f"{modes['file'][k] / modes['data'][k]:.3g}x" for k in ("request", "parse", "decode")
        )
        print(f"| {dpi} | file / data | {ratios} |")


def line(s: Sample) -> str:
    """One sample, per page."""
    return ", ".join(f"{value:.1f} {name}" for name, value in medians([s]).items())


def medians(samples: list[Sample]) -> dict[str, float]:
    """Per-page medians of one DPI and mode."""
    per_page = {
        "pages/s": [s.pages / s.wall_s for s in samples],
        "worker ms/page": [s.worker_s / s.pages * 1000 for s in samples],
        "render ms/page": [s.render_s / s.pages * 1000 for s in samples],
        "engine ms/page": [s.engine_s / s.pages * 1000 for s in samples],
        "request KiB/page": [s.request_bytes / s.pages / 1024 for s in samples],
    }
    return {name: statistics.median(values) for name, values in per_page.items()}


def print_table(samples: list[Sample], dpis: list[int]) -> None:
    """Medians per DPI and mode, and file over data."""
    columns = list(medians(samples[:1]))
    print("\n| DPI | handoff | " + " | ".join(columns) + " |")
    print("|---|---|" + "---:|" * len(columns))
    for dpi in dpis:
        rows = {m: medians([s for s in samples if (s.dpi, s.mode) == (dpi, m)]) for m in MODES}
        for mode in MODES:
            cells = " | ".join(f"{rows[mode][c]:.1f}" for c in columns)
            print(f"| {dpi} | {mode} | {cells} |")
        ratios = " | ".join(f"{rows['file'][c] / rows['data'][c]:.3g}x" for c in columns)
        print(f"| {dpi} | file / data | {ratios} |")


def main() -> int:
    """Parse flags, run both modes side by side, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dpis", default="150,200", help="render resolutions, comma-separated")
    parser.add_argument("--docs", type=int, default=6, help="documents per workload")
    parser.add_argument("--pages", type=int, default=4, help="pages per document")
    parser.add_argument("--rounds", type=int, default=3, help="workloads per DPI and mode")
    parser.add_argument("--raster-workers", type=int, default=2, help="OCRQ_RASTER_WORKERS")
    args = parser.parse_args()
    args.dpis = [int(d) for d in args.dpis.split(",")]
    samples = run(args)
    print(f"\nmedians of {args.rounds} rounds, {args.docs} x {args.pages}-page PDFs per workload")
    print_table(samples, args.dpis)
    with services.scratch_dir() as tmp:
        costs = {dpi: handoff_costs(dpi, tmp) for dpi in args.dpis}
    print("\none page, CPU ms in this process (no other work in the figure)")
    print_costs(costs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
