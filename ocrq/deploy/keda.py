"""The KEDA objects and Redis ACL ConfigMaps, built from the same settings the code reads.

The stream names, the consumer group and the scaling targets come from
``shared.settings``, ``shared.keys`` and what a worker holds (ocrq/deploy/sizing.py), so
a changed prefix or lane list changes the scaler too; the producer's and the workers'
Redis ACL rules follow the key layout (ocrq/deploy/redis_acl.py). ``ocrq k8s keda``
(ocrq/deploy/command.py) writes them; the committed files under ``k8s/base/keda`` equal
its output (a test fails on drift).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from ocrq.deploy.redis_acl import ROLES, role_rules
from ocrq.deploy.sizing import jobs_per_worker
from ocrq.shared.connect import parse_sentinels, redis_mode
from ocrq.shared.keys import Keys
from ocrq.shared.settings import Settings

KEDA_API = "keda.sh/v1alpha1"
CONSUMER = "ocrq-consumer"
VLLM = "vllm"
REDIS_SECRET = "ocrq-redis"
KEDA_USERNAME_KEY = "keda-username"
KEDA_PASSWORD_KEY = "keda-password"
TRIGGER_AUTH = "ocrq-redis-keda"
KEDA_ACL_CONFIGMAP = "ocrq-keda-acl"
ROLE_ACL_CONFIGMAP = "ocrq-redis-acl"  # the producer's and the workers' rules
REDIS_SERVICE = "redis"
DEFAULT_NAMESPACE = "ocrq"
DEFAULT_PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", ""})


def redis_target(settings: Settings, namespace: str) -> dict[str, str]:
    """KEDA connection metadata from OCRQ_REDIS_URL; a loopback host means the in-cluster Service.

    KEDA's operator runs in its own namespace, so the address is namespace-qualified; the
    password never goes here (the TriggerAuthentication reads it from the Secret).
    """
    url = urlsplit(settings.store.redis_url)
    host = url.hostname or ""
    if host in LOOPBACK_HOSTS:
        host = f"{REDIS_SERVICE}.{namespace}.svc"
    database = (url.path or "/0").strip("/") or "0"
    tls = "true" if url.scheme == "rediss" else "false"
    address = f"{host}:{url.port or 6379}"
    mode = redis_mode(settings)
    if mode == "cluster":  # any node: the scaler discovers the rest and reads each slot's master
        return {"addresses": address, "enableTLS": tls}
    if mode == "sentinel":
        sentinels = ",".join(
            f"{h}:{port}" for h, port in parse_sentinels(settings.store.redis_sentinels)
        )
        master = settings.store.redis_sentinel_master
        return {"addresses": sentinels, "sentinelMaster": master, "enableTLS": tls}
    return {"address": address, "databaseIndex": database, "enableTLS": tls}


TRIGGER_TYPES = {
    "single": "redis-streams",
    "cluster": "redis-cluster-streams",
    "sentinel": "redis-sentinel-streams",
}


def keda_acl_rules(settings: Settings) -> str:
    """Redis ACL rules for KEDA's user: read-only INFO/XINFO GROUPS/XPENDING/XLEN on the lanes."""
    # Every partition's keys: <prefix>{<tag>}:stream:<lane> and <prefix>{<tag>}:webhooks.
    tags = _glob_escape(settings.store.prefix) + "{p*}:"  # every tag starts with p
    pattern, hooks = f"{tags}stream:*", f"{tags}webhooks"
    # INFO: KEDA checks the server is 7+ before reading lag; XLEN: its fallback when the
    # group is missing; PING: client health checks; CLUSTER SLOTS|NODES: a cluster client
    # finds each slot's master. Everything else is denied.
    cluster = " +cluster|slots +cluster|nodes" if redis_mode(settings) == "cluster" else ""
    rules = "resetchannels -@all +info +xinfo|groups +xpending +xlen +ping"
    return f"~{pattern} ~{hooks} {rules}{cluster}"


def _glob_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def _metadata(name: str, component: str) -> dict[str, Any]:
    return {
        "name": name,
        "labels": {"app.kubernetes.io/part-of": "ocrq", "app.kubernetes.io/component": component},
    }


def _stream_trigger(
    settings: Settings,
    name: str,
    stream: str,
    target: dict[str, str],
    group: str,
    goal: dict[str, str],
) -> dict[str, Any]:
    metadata = {"stream": stream, "consumerGroup": group, **target, **goal}
    # KEDA activates when the count is strictly above this: 0 means one queued job wakes it.
    metadata["activationLagCount"] = "0"
    return {
        "type": TRIGGER_TYPES[redis_mode(settings)],
        "name": name,
        "metadata": metadata,
        "authenticationRef": {"name": TRIGGER_AUTH},
    }


def _partition_name(name: str, partition: int, partitions: int) -> str:
    """A trigger's name: the stream's, and its partition's number when there are several."""
    return name if partitions == 1 else f"{name}-p{partition}"


def _lag_and_pending(
    settings: Settings,
    namespace: str,
    group: str,
    streams: list[tuple[str, str]],
    lag_target: int,
    pending_target: int,
) -> list[dict[str, Any]]:
    """A lag trigger (scale out) and a pending trigger (keep while in flight) per
    (name, stream)."""
    target = redis_target(settings, namespace)
    # lagCount must be explicit: without it KEDA silently scales on pending entries.
    lag = {"lagCount": str(lag_target)}
    pending = {"pendingEntriesCount": str(pending_target)}
    triggers: list[dict[str, Any]] = []
    for name, stream in streams:
        triggers.append(_stream_trigger(settings, f"{name}-lag", stream, target, group, lag))
        triggers.append(
            _stream_trigger(settings, f"{name}-pending", stream, target, group, pending)
        )
    return triggers


def lane_triggers(
    settings: Settings, namespace: str, lag_target: int, pending_target: int
) -> list[dict[str, Any]]:
    """Lag and pending triggers per lane and partition: KEDA takes the largest wish among
    triggers, so each partition's backlog counts."""
    keys = Keys(settings.store.prefix, settings.store.partitions)
    streams = [
        (_partition_name(lane, p, keys.partitions), stream)
        for lane in keys.lanes
        for p, stream in enumerate(keys.streams(lane))
    ]
    return _lag_and_pending(settings, namespace, keys.group, streams, lag_target, pending_target)


def webhook_triggers(settings: Settings, namespace: str) -> list[dict[str, Any]]:
    """Keep a worker while webhook deliveries wait or retry (scale-to-zero waits for them)."""
    keys = Keys(settings.store.prefix, settings.store.partitions)
    streams = [
        (_partition_name("webhooks", p, keys.partitions), keys.webhooks(tag))
        for p, tag in enumerate(keys.tags)
    ]
    # A worker or two deliver every webhook: the targets are high, these only keep one up.
    return _lag_and_pending(settings, namespace, keys.webhook_group, streams, 1000, 1000)


def trigger_authentication() -> dict[str, Any]:
    """KEDA's Redis credentials, read from the Redis Secret (a dedicated read-only ACL user)."""
    refs = [
        {"parameter": "username", "name": REDIS_SECRET, "key": KEDA_USERNAME_KEY},
        {"parameter": "password", "name": REDIS_SECRET, "key": KEDA_PASSWORD_KEY},
    ]
    return {
        "apiVersion": KEDA_API,
        "kind": "TriggerAuthentication",
        "metadata": _metadata(TRIGGER_AUTH, "autoscaling"),
        "spec": {"secretTargetRef": refs},
    }


def acl_configmap(settings: Settings) -> dict[str, Any]:
    """The KEDA user's ACL rules, mounted by the Redis StatefulSet when it writes its ACL file."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(KEDA_ACL_CONFIGMAP, "redis"),
        "data": {"rules": keda_acl_rules(settings)},
    }


def role_acl_configmap(settings: Settings) -> dict[str, Any]:
    """The producer's and the workers' ACL rules, for the Redis StatefulSet's ACL file."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(ROLE_ACL_CONFIGMAP, "redis"),
        "data": {role: role_rules(settings, role) for role in ROLES},
    }


def consumer_scaled_object(settings: Settings, namespace: str, max_replicas: int) -> dict[str, Any]:
    """Scale the consumer on lane lag, keep it while entries are pending, down to zero."""
    # A busy worker holds jobs_per_worker and takes no more: undelivered jobs beyond that
    # wait for another worker, so it is one worker's share of lag and of pending entries.
    # (OCRQ_MAX_JOBS alone is a cap, 256 by default: a local engine never holds that many.)
    per_worker = jobs_per_worker(settings)
    behavior = {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15},
            ],
        },
        # Slow scale-in: one worker a minute after five calm minutes; the removed worker
        # drains on SIGTERM and anything it leaves is reclaimed from its pending list.
        "scaleDown": {
            "stabilizationWindowSeconds": 300,
            "selectPolicy": "Min",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
        },
    }
    return {
        "apiVersion": KEDA_API,
        "kind": "ScaledObject",
        "metadata": _metadata(CONSUMER, "consumer"),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": CONSUMER},
            "pollingInterval": 5,
            "cooldownPeriod": 300,
            "initialCooldownPeriod": 60,
            "minReplicaCount": 0,
            "maxReplicaCount": max_replicas,
            "advanced": {
                "restoreToOriginalReplicaCount": False,
                "horizontalPodAutoscalerConfig": {"behavior": behavior},
            },
            "triggers": [
                *lane_triggers(settings, namespace, per_worker, per_worker),
                *webhook_triggers(settings, namespace),
            ],
        },
    }


def vllm_scaled_object(
    settings: Settings, namespace: str, max_replicas: int, prometheus_url: str
) -> dict[str, Any]:
    """Optional: scale vLLM on its waiting queue; wake it from zero when a lane has work."""
    query = (
        f'sum(vllm:num_requests_waiting{{namespace="{namespace}",'
        f'model_name="{settings.ocr.vllm_model}"}})'
    )
    waiting = {
        "type": "prometheus",
        "name": "vllm-waiting",
        "metadata": {
            "serverAddress": prometheus_url,
            "query": query,
            "threshold": "8",
            "activationThreshold": "0",
            "ignoreNullValues": "true",
        },
    }
    # A target as large as the backlog cap makes the lane triggers worth one replica at most:
    # they only wake vLLM (and hold it while jobs are in flight); the queue scales it out.
    cap = settings.api.max_backlog
    return {
        "apiVersion": KEDA_API,
        "kind": "ScaledObject",
        "metadata": _metadata(VLLM, "engine"),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": VLLM},
            "pollingInterval": 15,
            # A GPU cold start takes minutes: stay warm for 15 idle minutes before zero.
            "cooldownPeriod": 900,
            "minReplicaCount": 0,
            "maxReplicaCount": max_replicas,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {
                        "scaleDown": {
                            "stabilizationWindowSeconds": 600,
                            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 300}],
                        }
                    }
                }
            },
            "triggers": [waiting, *lane_triggers(settings, namespace, cap, cap)],
        },
    }


def vllm_component() -> dict[str, Any]:
    """A kustomize Component that adds the vLLM ScaledObject to an overlay."""
    return {
        "apiVersion": "kustomize.config.k8s.io/v1alpha1",
        "kind": "Component",
        "resources": ["scaledobject.yaml"],
    }


def keda_files(
    settings: Settings,
    namespace: str = DEFAULT_NAMESPACE,
    max_replicas: int = 8,
    vllm_max_replicas: int = 2,
    prometheus_url: str = DEFAULT_PROMETHEUS,
) -> dict[str, list[dict[str, Any]]]:
    """Every generated file (path relative to the output folder) and the objects it holds."""
    return {
        "consumer.yaml": [
            acl_configmap(settings),
            trigger_authentication(),
            consumer_scaled_object(settings, namespace, max_replicas),
        ],
        "redis-acl.yaml": [role_acl_configmap(settings)],
        "vllm/kustomization.yaml": [vllm_component()],
        "vllm/scaledobject.yaml": [
            vllm_scaled_object(settings, namespace, vllm_max_replicas, prometheus_url)
        ],
    }
