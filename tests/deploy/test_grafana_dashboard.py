"""The Grafana dashboard charts every metric the code exposes, and only those."""

from __future__ import annotations

import json
import re
from typing import Any

from support.deploy_tree import K8S

DASHBOARD = K8S / "base" / "grafana" / "ocrq-dashboard.json"
# The metric names producer and worker expose (histograms by their base name).
PRODUCER_METRICS = {
    "ocrq_http_requests_total",
    "ocrq_accepted_bytes_total",
    "ocrq_enqueue_seconds",
    "ocrq_lane_lag",
    "ocrq_lane_pending",
}
WORKER_METRICS = {
    "ocrq_jobs_total",
    "ocrq_pages_total",
    "ocrq_stage_seconds",
    "ocrq_window_fill",
    "ocrq_engine_errors_total",
    "ocrq_jobs_in_flight",
}
OTHER_METRICS = {
    "vllm:num_requests_waiting",
    "vllm:num_requests_running",
    "kube_deployment_status_replicas_available",
    "kube_deployment_spec_replicas",
}
METRIC = re.compile(r"\b((?:ocrq_|vllm:|kube_)[a-z_:]+)")


def expressions(dashboard: dict[str, Any]) -> dict[str, list[str]]:
    return {p["title"]: [t["expr"] for t in p["targets"]] for p in dashboard["panels"]}


def referenced(exprs: list[str]) -> set[str]:
    names = {m for e in exprs for m in METRIC.findall(e)}
    return {re.sub(r"_(bucket|sum|count)$", "", n) for n in names}


def test_dashboard_charts_every_exposed_metric() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    names = referenced([e for exprs in expressions(dashboard).values() for e in exprs])
    assert PRODUCER_METRICS | WORKER_METRICS <= names
    assert names <= PRODUCER_METRICS | WORKER_METRICS | OTHER_METRICS, "unknown metric name"


def test_histograms_are_read_through_their_buckets() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [e for group in expressions(dashboard).values() for e in group]
    for histogram in ("ocrq_stage_seconds", "ocrq_enqueue_seconds", "ocrq_window_fill"):
        uses = [e for e in exprs if histogram in e]
        assert uses and all(f"{histogram}_bucket" in e and "histogram_quantile" in e for e in uses)


def test_dashboard_has_the_operational_panels() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    titles = " | ".join(expressions(dashboard)).lower()
    for topic in (
        "lag",
        "pending",
        "outcome",
        "pages per second",
        "stage latency",
        "engine errors",
    ):
        assert topic in titles
    replicas = expressions(dashboard)["Replicas"]
    assert any("ocrq-consumer" in e for e in replicas)
    assert any("vllm" in e for e in replicas)


def test_panels_use_the_datasource_variable_and_unique_ids() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert "datasource" in variables
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert all(p["datasource"]["uid"] == "${datasource}" for p in dashboard["panels"])
