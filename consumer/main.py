"""`ocrq worker`: wire one consumer process together and run it until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import secrets
import shutil
import signal
import socket
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import httpx
import structlog

from ocrq.consumer.circuit import EngineCircuit
from ocrq.consumer.documents import DocumentSpool
from ocrq.consumer.engines.base import Engine
from ocrq.consumer.engines.cpu import CpuEngine
from ocrq.consumer.fields.reader import FieldReader
from ocrq.consumer.flow import PageFlow
from ocrq.consumer.job import JobRunner
from ocrq.consumer.metrics import HealthServer, WorkerMetrics
from ocrq.consumer.pages import PageReader
from ocrq.consumer.pool import RecyclingPool
from ocrq.consumer.raster import Rasteriser
from ocrq.consumer.source_fetch import SourceFetcher
from ocrq.consumer.stored_results import ResultWriter
from ocrq.consumer.webhooks import WebhookSender, webhook_client
from ocrq.consumer.worker import Worker
from ocrq.consumer.workspace import claim_worker_folder, spool_root, stack_root, sweep_stale
from ocrq.shared.blobs.base import BlobStore
from ocrq.shared.blobs.opening import open_blob_store
from ocrq.shared.blobs.sweep import run_sweeper
from ocrq.shared.egress import pinned_client
from ocrq.shared.lifeline import anchor_helpers, die_with_parent
from ocrq.shared.logging import configure_logging
from ocrq.shared.settings import Settings, load_settings, refuse_placeholder_secrets
from ocrq.shared.store import JobStore, make_redis
from ocrq.shared.tracing import configure_tracing, shutdown_tracing

HELPER_START_S = 60.0  # starting a render process: a fork from the forkserver, normally ms

log = structlog.get_logger("ocrq.worker")


def worker_name(settings: Settings) -> str:
    """Unique per process: host-pid-random (the pid lets a restart sweep a dead one's files)."""
    return (
        settings.worker.worker_name
        or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"
    )


def make_engine(settings: Settings, http: httpx.AsyncClient) -> Engine:
    """The configured engine: vLLM over HTTP, or a local CPU engine (Tesseract, RapidOCR)."""
    if settings.ocr.engine_name == "vllm":
        if not settings.ocr.vllm_url:
            raise ValueError("OCRQ_ENGINE=vllm needs OCRQ_VLLM_URL")
        from ocrq.consumer.engines.vllm import VllmEngine

        return VllmEngine(settings, http)
    if settings.ocr.engine_name == "rapidocr":
        from ocrq.consumer.engines.rapidocr import RapidOcrEngine

        return RapidOcrEngine(settings)
    from ocrq.consumer.engines.tesseract import TesseractEngine

    return TesseractEngine(settings)


def engine_slots(settings: Settings, engine: Engine) -> int:
    """Requests the worker keeps in the engine: a local engine's processes, else the setting."""
    if isinstance(engine, CpuEngine):
        return max(1, min(settings.ocr.engine_concurrency, engine.slots))
    return max(1, settings.ocr.engine_concurrency)


def page_flow(settings: Settings, engine: Engine) -> PageFlow:
    """Engine slots, rendering processes and the render-ahead budget of /dev/shm."""
    budget = settings.worker.render_ahead_mb * 1024 * 1024
    return PageFlow(engine_slots(settings, engine), settings.worker.raster_workers, budget)


def http_client(settings: Settings) -> httpx.AsyncClient:
    """One pooled client for every engine request of this process."""
    limits = httpx.Limits(
        max_connections=settings.ocr.engine_concurrency,
        max_keepalive_connections=settings.ocr.engine_concurrency,
    )
    timeout = httpx.Timeout(settings.ocr.engine_timeout_s, connect=10.0)
    return httpx.AsyncClient(limits=limits, timeout=timeout)


def raster_pool(settings: Settings) -> RecyclingPool:
    """The rendering processes (PyMuPDF is CPU-bound and not thread-safe); they die with us."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["ocrq.consumer.forkserver_preload"])
    return RecyclingPool(
        lambda: ProcessPoolExecutor(
            max_workers=settings.worker.raster_workers, mp_context=ctx, initializer=die_with_parent
        ),
        settings.worker.raster_workers,
    )


async def start_helpers(pool: RecyclingPool, engine: Engine, renderers: int) -> None:
    """Start the render processes (with their forkserver) and the engine's before any job.

    Ctrl-C in a terminal signals the whole process group; a helper process caught while
    still starting up dies of it instead of ignoring it, and fails the job it was for.
    """
    await asyncio.gather(*(pool.run(HELPER_START_S, os.getpid) for _ in range(renderers)))
    await engine.warm_up()


def source_fetcher(settings: Settings, http: httpx.AsyncClient) -> SourceFetcher:
    """Fetches documents given by URL, with the webhooks' address checks."""
    return SourceFetcher(
        http,
        allow_private=settings.webhooks.webhook_allow_private,
        resolve_timeout_s=settings.webhooks.webhook_resolve_timeout_s,
        fetch_timeout_s=settings.blobs.source_fetch_timeout_s,
    )


def disk_spool(settings: Settings, me: str) -> Path | None:
    """This worker's folder for large documents (a store is configured), dead ones' swept."""
    if not settings.blobs.enabled:
        return None
    s = settings.store
    root = spool_root(settings.blobs.document_spool_dir, s.redis_url, s.prefix)
    sweep_stale(root)
    return claim_worker_folder(root, me)


def start_sweeper(
    settings: Settings, blobs: BlobStore | None, store: JobStore, me: str, stop: asyncio.Event
) -> asyncio.Task[None] | None:
    """The store's sweeper (orphan documents, expired results) beside the jobs."""
    if blobs is None:
        return None
    return asyncio.create_task(run_sweeper(blobs, store, settings, me, stop), name="sweeper")


async def serve(settings: Settings, stop: asyncio.Event, *, burst: bool = False) -> None:
    """Build the worker's clients and pools, run the loop, close everything."""
    me = worker_name(settings)
    structlog.contextvars.bind_contextvars(worker=me)
    anchor_helpers()  # render and OCR processes, and their forkserver, die with this one
    root = stack_root(settings.worker.shm_dir, settings.store.redis_url, settings.store.prefix)
    swept = sweep_stale(root)
    if swept:
        log.info("swept_stale_folders", count=len(swept))
    workspace = claim_worker_folder(root, me)
    redis, http, pool = make_redis(settings), http_client(settings), raster_pool(settings)
    hooks_http = webhook_client(settings)
    fields_http = httpx.AsyncClient(timeout=settings.extract.extract_timeout_s)  # LLM fields
    engine = make_engine(settings, http)
    circuit = EngineCircuit(engine.probe, settings)
    flow = page_flow(settings, engine)
    metrics = WorkerMetrics(settings.tenancy.quota_table.named())
    metrics.watch_flow(flow)
    blobs = open_blob_store(settings, observe=metrics.observe_blob)
    spool = disk_spool(settings, me)
    sources_http = pinned_client(settings.worker.max_jobs, settings.blobs.source_fetch_timeout_s)
    health = HealthServer(metrics, "0.0.0.0", settings.worker.metrics_port, stale_after_s=30.0)
    sweeping: asyncio.Task[None] | None = None
    try:
        await start_helpers(pool, engine, settings.worker.raster_workers)
        if settings.worker.metrics_port:
            await health.start()
        store = JobStore(redis, settings)
        reader = PageReader(
            settings=settings,
            engine=engine,
            circuit=circuit,
            metrics=metrics,
            rasteriser=Rasteriser(
                pool, settings.worker.max_image_pixels, settings.worker.max_image_side
            ),
            flow=flow,
        )
        documents = DocumentSpool(settings, blobs, source_fetcher(settings, sources_http), spool)
        results = ResultWriter(blobs, settings.blobs.blob_outage_s) if blobs else None
        fields = FieldReader(settings.extract, fields_http)
        runner = JobRunner(
            settings, store, reader, metrics, me, workspace, blobs, documents, results, fields
        )
        log.info(
            "worker_started",
            engine=engine.name,
            model=engine.model,
            shm=str(workspace),
            engine_slots=flow.engine.size,
            blob_store=blobs.url if blobs else None,
        )
        sweeping = start_sweeper(settings, blobs, store, me, stop)
        hooks = WebhookSender(settings, store, hooks_http, me)  # never the engine's pool
        sending = asyncio.create_task(hooks.run(stop), name="webhooks")
        await Worker(settings, store, runner, metrics).run(stop, burst=burst)
        stop.set()  # burst mode ends the loop without a signal: stop the sender too
        await sending
    finally:
        stop.set()
        if sweeping is not None:
            await stop_sweeper(sweeping)
        await health.stop()
        await circuit.aclose()
        await engine.aclose()
        await http.aclose()
        await hooks_http.aclose()
        await fields_http.aclose()
        await sources_http.aclose()
        if blobs is not None:
            await blobs.aclose()
        await pool.aclose()
        await redis.aclose()
        shutil.rmtree(workspace, ignore_errors=True)
        if spool is not None:
            shutil.rmtree(spool, ignore_errors=True)
        log.info("worker_stopped")


async def stop_sweeper(task: asyncio.Task[None]) -> None:
    """Let the sweeper see the stop and end its pass; cancel it when it takes too long."""
    done, _ = await asyncio.wait({task}, timeout=10.0)
    if not done:
        task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    except Exception as e:  # the sweeper's own failure must not fail the worker's shutdown
        log.warning("sweeper_failed", error=repr(e))


async def run_until_signalled(settings: Settings, *, burst: bool = False) -> None:
    """Run serve(); the first SIGTERM/SIGINT stops reading and drains."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await serve(settings, stop, burst=burst)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `ocrq worker`."""
    parser = argparse.ArgumentParser(
        prog="ocrq worker",
        description="Run one consumer process; every other setting comes from OCRQ_* variables.",
    )
    parser.add_argument(
        "--engine",
        choices=["local", "tesseract", "rapidocr", "vllm"],
        default=None,
        help="OCR engine (default: OCRQ_ENGINE, else vllm when a vLLM URL is set, else local:"
        " Tesseract)",
    )
    parser.add_argument("--vllm-url", default=None, help="vLLM's base URL (OCRQ_VLLM_URL)")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="port of /healthz and /metrics, 0 for none (OCRQ_METRICS_PORT, 9100)",
    )
    parser.add_argument(
        "--burst", action="store_true", help="exit once the lanes are empty and all jobs are done"
    )
    parser.add_argument(  # what `ocrq up` passes: a laptop may keep the shipped change-me secrets
        "--allow-placeholder-secrets", action="store_true", help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    settings = load_settings(
        engine=args.engine, vllm_url=args.vllm_url, metrics_port=args.metrics_port
    )
    refuse_placeholder_secrets(settings, allow_placeholders=args.allow_placeholder_secrets)
    configure_logging(settings)
    tracing = configure_tracing("ocrq-worker")
    try:
        asyncio.run(run_until_signalled(settings, burst=args.burst))
    finally:
        shutdown_tracing()  # the spans still buffered go out before the process ends
    if tracing:
        log.info("tracing_stopped")
    return 0
