"""Operations endpoints: liveness, readiness, Prometheus metrics; OPTIONS for shared paths."""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from litestar import Request, Response, get, route
from litestar.datastructures import State
from litestar.enums import HttpMethod
from litestar.handlers import HTTPRouteHandler
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ocrq.producer.runtime import runtime_of

log = structlog.get_logger("ocrq.producer")


def allow_options(path: str) -> HTTPRouteHandler:
    """OPTIONS for a path served by several handlers: Allow lists every method they serve.

    Litestar's own OPTIONS handler lists only the first handler's methods; registered
    first, this one takes its place.
    """

    async def options(request: Request[Any, Any, Any]) -> Response[None]:
        methods = request.app.route_handler_method_map.get(path, {})
        return Response(None, status_code=204, headers={"Allow": ", ".join(sorted(methods))})

    return route(path, http_method=[HttpMethod.OPTIONS], include_in_schema=False)(options)


@get("/healthz", summary="Liveness", include_in_schema=True)
async def healthz() -> dict[str, str]:
    """Liveness: never touches Redis, never blocks."""
    return {"status": "ok"}


@get("/readyz", summary="Readiness: Redis reachable, groups exist")
async def readyz(state: State) -> Response[dict[str, str]]:
    """Ready when Redis answers and every lane has its consumer group."""
    rt = runtime_of(state)
    try:
        async with asyncio.timeout(2.0):
            await rt.store.check_reachable()
            if not await rt.store.groups_exist():
                await rt.store.ensure_groups()  # Redis lost its data: recreate at id 0
    except Exception as e:  # the details go to the log, not to whoever asks
        log.warning("not_ready", error=str(e)[:200])
        return Response(
            {"status": "unavailable", "error": "the job store is unreachable"}, status_code=503
        )
    return Response({"status": "ready"})


@get("/metrics", summary="Prometheus metrics", include_in_schema=False)
async def metrics(state: State) -> Response[bytes]:
    """Prometheus text format; lane lag and pending are read at scrape time."""
    rt = runtime_of(state)
    try:
        async with asyncio.timeout(2.0):
            for lane in rt.store.keys.lanes:
                lag, pending = await rt.store.lane_stats(lane)
                rt.metrics.lane_lag.labels(lane).set(lag)
                rt.metrics.lane_pending.labels(lane).set(pending)
            used, limit = await rt.store.memory()
            rt.metrics.redis_memory_used.set(used)
            rt.metrics.redis_memory_max.set(limit)
    except Exception as e:
        log.warning("metrics_backlog_unavailable", error=str(e))
    return Response(generate_latest(rt.metrics.registry), media_type=CONTENT_TYPE_LATEST)


HEALTH_HANDLERS = [
    allow_options("/v1/jobs"),
    allow_options("/v1/jobs/{job_id:str}"),
    allow_options("/v1/batches/{batch_id:str}"),
    healthz,
    readyz,
    metrics,
]
