"""GET /v1/usage: a tenant's jobs, pages, engine time and bytes per UTC day, JSON or CSV.

The counts are made by the scripts that end a job, so a job is counted once however often
it was delivered (shared/usage_store.py reads them). A tenant reads its own usage; a tenant
named in OCRQ_ADMIN_TENANTS may read another's with ``tenant=``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from litestar import Request, Response, get
from litestar.datastructures import State
from litestar.params import QueryParameter

from ocrq.producer.runtime import caller, require_admin
from ocrq.shared.usage import UsageReport, day_range, usage_csv
from ocrq.shared.usage_store import UsageStore

CSV_TYPE = "text/csv"
Day = Annotated[
    str | None,
    QueryParameter(format="date", max_length=10, description="last day, YYYY-MM-DD (UTC; today)"),
]


@get(
    "/v1/usage",
    summary="Usage per UTC day: jobs, pages, engine seconds, bytes (JSON or CSV)",
)
async def read_usage(
    request: Request[Any, Any, Any],
    state: State,
    since: Annotated[
        str | None,
        QueryParameter(
            name="from", format="date", max_length=10, description="first day (to - 29)"
        ),
    ] = None,
    to: Day = None,
    tenant: Annotated[
        str | None, QueryParameter(max_length=200, description="another tenant (admins only)")
    ] = None,
    format: Annotated[
        Literal["json", "csv"] | None,
        QueryParameter(description="json (default) or csv; Accept: text/csv also asks for CSV"),
    ] = None,
) -> Response[Any]:
    """The caller's usage over ``from``..``to`` (both included, at most 366 days)."""
    rt, me = caller(request, state)
    if tenant is not None and tenant != me:
        require_admin(rt, me, "another tenant's usage")
    days = day_range(since, to)
    report = await UsageStore(rt.store).report(tenant or me, days)
    if wants_csv(format, request.headers.get("accept", "")):
        name = f"usage-{report.first_day}-{report.last_day}.csv"
        return Response(
            usage_csv(report),
            media_type=f"{CSV_TYPE}; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )
    return Response(report)


def wants_csv(format: str | None, accept: str) -> bool:
    """CSV when asked by ``format=csv``, or by an Accept that names text/csv and not JSON."""
    if format is not None:
        return format == "csv"
    return CSV_TYPE in accept and "application/json" not in accept


USAGE_HANDLERS = [read_usage]
__all__ = ["USAGE_HANDLERS", "UsageReport"]
