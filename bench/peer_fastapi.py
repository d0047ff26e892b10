"""A minimal FastAPI peer for bench_enqueue.py: the same enqueue, nothing else.

It reads a raw body, writes the job hash and its stream entry in one MULTI/EXEC, and
answers 202: no auth, no sniffing, no metrics, no logs. It lives under bench/ only, as the
yardstick the issue asks for; it is not part of the product.

    REDIS_URL=redis://127.0.0.1:6379/0 uvicorn --app-dir bench peer_fastapi:app --port 8001
"""

from __future__ import annotations

import os
import secrets
import time

import redis.asyncio as aioredis
from fastapi import FastAPI, Request, Response

app = FastAPI()
pool = aioredis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))


@app.post("/v1/jobs", status_code=202)
async def submit(request: Request) -> Response:
    """Enqueue the raw body."""
    data = await request.body()
    job_id = secrets.token_urlsafe(16)
    async with pool.pipeline(transaction=True) as pipe:
        pipe.hset(
            f"peer:job:{job_id}",
            mapping={
                "id": job_id,
                "status": "queued",
                "tenant": "public",
                "media_type": "application/pdf",
                "size": len(data),
                "created_at": int(time.time() * 1000),
                "payload": data,
            },
        )
        pipe.xadd("peer:stream:interactive", {"id": job_id})
        await pipe.execute()
    return Response(f'{{"id":"{job_id}","status":"queued"}}', 202, media_type="application/json")
