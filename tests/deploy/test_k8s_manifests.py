"""Every Kubernetes object validates offline, and the manifests agree with the code's settings."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from support.deploy_tree import (
    K8S,
    K8S_VERSION,
    REPO_ROOT,
    VARIANTS,
    base_objects,
    find,
    kustomize_build,
    load_docs,
    manifest_files,
    validate_built,
)

from ocrq.deploy import keda, sizing
from ocrq.producer.guard import ANY_HOST_PATHS, host_policy
from ocrq.shared.settings import LANES, Settings, load_settings, setting_names

Obj = dict[str, Any]
CRD_GROUPS = ("keda.sh/", "monitoring.coreos.com/")
WORKLOADS = ("Deployment", "StatefulSet")
QUANTITY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 10**3, "M": 10**6, "G": 10**9}


def is_patch(path: Path, doc: Obj) -> bool:
    """Overlay patch files are partial objects; kustomize's output is validated instead."""
    return path.parent.parent.name == "overlays" and doc["kind"] != "Namespace"


def core_objects() -> list[tuple[Path, Obj]]:
    return [
        (path, doc)
        for path in manifest_files()
        for doc in load_docs(path)
        if not str(doc.get("apiVersion", "")).startswith(CRD_GROUPS) and not is_patch(path, doc)
    ]


def quantity(text: str) -> int:
    match = re.fullmatch(r"(\d+)([KMG]i?|k)?", str(text))
    assert match, f"unparsed quantity {text!r}"
    return int(match[1]) * QUANTITY.get(match[2] or "", 1)


def configmap_settings() -> tuple[dict[str, str], Settings]:
    data = find(base_objects(), "ConfigMap", "ocrq-config")["data"]
    return data, load_settings(data)


def pod_spec(obj: Obj) -> Obj:
    return dict(obj["spec"]["template"]["spec"])


def container(obj: Obj) -> Obj:
    return dict(pod_spec(obj)["containers"][0])


def pod_labels() -> dict[str, dict[str, str]]:
    return {
        o["metadata"]["name"]: o["spec"]["template"]["metadata"]["labels"]
        for o in base_objects()
        if o["kind"] in WORKLOADS
    }


def selects(selector: Obj, labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels + In/NotIn/Exists) evaluated on pod labels."""
    for key, value in selector.get("matchLabels", {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions", []):
        value, op = labels.get(expr["key"]), expr["operator"]
        values: list[str] = list(expr.get("values", []))
        held = {
            "In": value in values,
            "NotIn": value not in values,
            "Exists": value is not None,
            "DoesNotExist": value is None,
        }[op]
        if not held:
            return False
    return True


@pytest.mark.parametrize(
    ("path", "obj"),
    core_objects(),
    ids=lambda v: str(v.relative_to(K8S)) if isinstance(v, Path) else v["kind"],
)
def test_object_validates_against_kubernetes_schema(path: Path, obj: Obj) -> None:
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_misspelt_field_fails_kubernetes_validation() -> None:
    broken = copy.deepcopy(find(base_objects(), "Deployment", "ocrq-producer"))
    probe = broken["spec"]["template"]["spec"]["containers"][0].pop("livenessProbe")
    broken["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = probe
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_configmap_keys_are_settings_the_code_reads() -> None:
    data, _ = configmap_settings()
    fields = {f"OCRQ_{name.upper()}" for name in setting_names()}
    assert set(data) <= fields, set(data) - fields


def test_every_ocrq_env_name_is_a_setting() -> None:
    fields = {f"OCRQ_{name.upper()}" for name in setting_names()}
    named = {
        env["name"]
        for obj in base_objects()
        if obj["kind"] in WORKLOADS
        for c in pod_spec(obj)["containers"]
        for env in c.get("env", [])
    }
    secrets = {k for o in base_objects() if o["kind"] == "Secret" for k in o["stringData"]}
    ocrq_names = {n for n in named | secrets if n.startswith("OCRQ_")}
    assert ocrq_names, "no OCRQ_* variable found"
    assert ocrq_names <= fields, ocrq_names - fields


def value_refs(obj: Obj) -> list[tuple[str, Obj]]:
    """(kind, keyRef) for every env value a workload takes from a Secret or ConfigMap."""
    refs = []
    for c in pod_spec(obj)["containers"]:
        for env in c.get("env", []):
            source = env.get("valueFrom", {})
            for kind, key in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
                if key in source:
                    refs.append((kind, source[key]))
    return refs


def test_secret_and_configmap_references_resolve() -> None:
    objects = base_objects()
    for obj in (o for o in objects if o["kind"] in WORKLOADS):
        for kind, ref in value_refs(obj):
            target = find(objects, kind, ref["name"])
            data: dict[str, str] = target.get("stringData") or target.get("data") or {}
            assert ref["key"] in data or ref.get("optional"), (obj["metadata"]["name"], ref)
        for c in pod_spec(obj)["containers"]:
            for source in c.get("envFrom", []):
                find(objects, "ConfigMap", source["configMapRef"]["name"])


def test_workloads_run_non_root_with_read_only_root() -> None:
    for name in ("ocrq-producer", "ocrq-consumer"):
        obj = find(base_objects(), "Deployment", name)
        assert pod_spec(obj)["securityContext"]["runAsNonRoot"] is True
        sc = container(obj)["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]
        assert {"cpu", "memory"} <= set(container(obj)["resources"]["requests"])
        assert "memory" in container(obj)["resources"]["limits"]


def test_producer_probes_liveness_on_healthz_and_readiness_on_readyz() -> None:
    producer = container(find(base_objects(), "Deployment", "ocrq-producer"))
    assert producer["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert producer["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert producer["command"][:2] == ["ocrq", "producer"]
    pdb = find(base_objects(), "PodDisruptionBudget", "ocrq-producer")
    assert selects(pdb["spec"]["selector"], pod_labels()["ocrq-producer"])
    assert (
        find(base_objects(), "Deployment", "ocrq-producer")["spec"]["replicas"]
        > (pdb["spec"]["minAvailable"])
    )


def test_consumer_shm_fits_pages_in_flight_at_the_configured_dpi() -> None:
    _, settings = configmap_settings()
    consumer = find(base_objects(), "Deployment", "ocrq-consumer")
    shm = next(v for v in pod_spec(consumer)["volumes"] if v["name"] == "shm")
    assert shm["emptyDir"]["medium"] == "Memory"
    size = quantity(shm["emptyDir"]["sizeLimit"])
    assert size >= sizing.shm_size_bytes(settings)
    mounts = {m["mountPath"]: m["name"] for m in container(consumer)["volumeMounts"]}
    assert mounts[settings.worker.shm_dir] == "shm"
    # Memory-backed emptyDir is charged to the container: the limit must hold it too.
    limit = quantity(container(consumer)["resources"]["limits"]["memory"])
    assert limit >= size + 2**30


def test_shm_formula_is_pages_in_the_engine_plus_the_render_ahead_budget() -> None:
    vllm = load_settings({}, engine="vllm", vllm_url="http://vllm:8000", engine_concurrency=32)
    assert sizing.page_bytes(150) == 1241 * 1754 * 3
    assert sizing.page_bytes(300) > 3.9 * sizing.page_bytes(150)
    assert sizing.pages_in_flight(vllm, batch_size=1) == 32
    assert sizing.pages_in_flight(vllm, batch_size=4) == 128
    ahead, documents = (
        vllm.worker.render_ahead_mb * 2**20,
        vllm.worker.max_jobs * vllm.api.max_document_bytes,
    )
    assert sizing.shm_size_bytes(vllm) == documents + sizing.page_bytes(150) * 32 + ahead


def test_a_local_engine_needs_shm_for_its_processes_only() -> None:
    local = load_settings({}, engine="local", local_workers=2)
    assert sizing.pages_in_flight(local) == 2
    documents = local.worker.max_jobs * local.api.max_document_bytes
    expected = documents + sizing.page_bytes(150) * 2 + local.worker.render_ahead_mb * 2**20
    assert sizing.shm_size_bytes(local) == expected


def test_consumer_outlives_its_drain_and_exposes_metrics_port() -> None:
    _, settings = configmap_settings()
    consumer = find(base_objects(), "Deployment", "ocrq-consumer")
    assert pod_spec(consumer)["terminationGracePeriodSeconds"] > settings.worker.drain_grace_s + 10
    ports = {p["name"]: p["containerPort"] for p in container(consumer)["ports"]}
    assert ports["metrics"] == settings.worker.metrics_port
    assert container(consumer)["livenessProbe"]["httpGet"]["port"] == "metrics"
    assert container(consumer)["command"] == ["ocrq", "worker"]
    assert "replicas" not in consumer["spec"], "KEDA owns the consumer's replica count"
    spec = pod_spec(consumer)
    assert spec["tolerations"] and spec["affinity"]["nodeAffinity"]


def test_redis_is_durable_never_evicts_and_fits_the_backlog() -> None:
    conf = find(base_objects(), "ConfigMap", "ocrq-redis-conf")["data"]["redis.conf"]
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in conf.split("\n") if line}
    assert lines["appendonly"] == "yes"
    assert lines["appendfsync"] == "everysec"
    assert lines["maxmemory-policy"] == "noeviction"
    assert lines["dir"] == "/data"
    maxmemory = quantity(lines["maxmemory"].replace("gb", "Gi"))
    _, settings = configmap_settings()
    # Queued payloads live in Redis until a worker finishes them.
    assert maxmemory >= len(LANES) * settings.api.max_backlog * settings.api.max_document_bytes
    redis = find(base_objects(), "StatefulSet", "redis")
    assert quantity(container(redis)["resources"]["limits"]["memory"]) > maxmemory
    claims = redis["spec"]["volumeClaimTemplates"]
    assert [c["metadata"]["name"] for c in claims] == ["data"]
    env = {e["name"]: e for e in container(redis)["env"]}
    assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == keda.REDIS_SECRET


def test_vllm_serves_the_configured_model_with_the_recipe() -> None:
    data, settings = configmap_settings()
    vllm = container(find(base_objects(), "Deployment", "vllm"))
    args = vllm["args"]
    assert vllm["command"] == ["vllm", "serve"]
    assert args[0] == settings.ocr.vllm_model
    recipe = [
        "--logits-processors",
        "vllm.model_executor.models.unlimited_ocr:NGramPerReqLogitsProcessor",
        "--no-enable-prefix-caching",
        "--mm-processor-cache-gb",
        "--max-model-len",
        "--gpu-memory-utilization",
    ]
    assert set(recipe) <= set(args)
    assert args[args.index("--mm-processor-cache-gb") + 1] == "0"
    assert vllm["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert vllm["image"].startswith("vllm/vllm-openai")
    service = find(base_objects(), "Service", "vllm")
    assert data["OCRQ_VLLM_URL"] == f"http://vllm:{service['spec']['ports'][0]['port']}"
    assert settings.ocr.engine_name == "vllm"


# The first vllm/vllm-openai release with a native UnlimitedOCRForCausalLM (vLLM PR 46564).
NATIVE_UNLIMITED_OCR = (0, 25, 0)


def test_vllm_runs_a_pinned_release_on_pinned_weights_without_remote_code() -> None:
    vllm = container(find(base_objects(), "Deployment", "vllm"))
    tag = re.fullmatch(r"vllm/vllm-openai:v(\d+)\.(\d+)\.(\d+)", vllm["image"])
    assert tag, f"{vllm['image']}: pin a release (vX.Y.Z), never latest"
    assert tuple(map(int, tag.groups())) >= NATIVE_UNLIMITED_OCR
    args = vllm["args"]
    # The architecture is native: nothing of the model repository's own Python code runs.
    assert not [a for a in args if "trust-remote-code" in a]
    revision = args[args.index("--revision") + 1]
    assert re.fullmatch(r"[0-9a-f]{40}", revision), "the weights by commit, not a branch"
    assert args[args.index("--tokenizer-revision") + 1] == revision


def test_every_container_runs_without_capabilities_or_escalation() -> None:
    for obj in (o for o in base_objects() if o["kind"] in WORKLOADS):
        spec, name = pod_spec(obj), obj["metadata"]["name"]
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        assert spec["automountServiceAccountToken"] is False, name
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["capabilities"] == {"drop": ["ALL"]}, name
        if name == "vllm":
            continue  # the upstream image runs as root and writes its caches in place
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["runAsUser"] > 0, name
        assert all(c["securityContext"]["readOnlyRootFilesystem"] for c in spec["containers"])


def test_the_producer_answers_its_service_name_and_its_probes() -> None:
    data, _ = configmap_settings()
    producer = container(find(base_objects(), "Deployment", "ocrq-producer"))
    command = producer["command"]
    keys = find(base_objects(), "Secret", "ocrq-api")["stringData"]["OCRQ_API_KEYS"]
    settings = load_settings(
        {**data, "OCRQ_API_KEYS": keys}, host=command[command.index("--host") + 1]
    )
    service = find(base_objects(), "Service", "ocrq-producer")
    port = service["spec"]["ports"][0]["port"]
    # Bound to every interface with API keys: in-cluster clients use the Service's name.
    policy = host_policy(settings)
    assert policy.admits("ocrq-producer", port)
    assert policy.admits("ocrq-producer.ocrq.svc.cluster.local", port)
    # The kubelet probes with Host = the pod's IP: those paths answer any host.
    probed = {producer[p]["httpGet"]["path"] for p in ("livenessProbe", "readinessProbe")}
    assert probed <= ANY_HOST_PATHS


def test_vllm_cold_start_fits_startup_probe_and_worker_retries() -> None:
    _, settings = configmap_settings()
    vllm = container(find(base_objects(), "Deployment", "vllm"))
    startup = vllm["startupProbe"]
    budget = startup["periodSeconds"] * startup["failureThreshold"]
    assert startup["httpGet"]["path"] == "/health"
    assert budget >= 600, "a cold start (pull + download + load) takes minutes"
    # Jobs queued while vLLM wakes from zero wait it out instead of failing.
    assert settings.ocr.engine_outage_s > budget


def test_deploy_files_leave_the_engine_outage_defaults_to_the_code() -> None:
    names = ("OCRQ_ENGINE_OUTAGE_S", "OCRQ_ENGINE_RETRIES", "OCRQ_ENGINE_BACKOFF_S",
             "OCRQ_ENGINE_BACKOFF_MAX_S")  # fmt: skip
    for path in [*manifest_files(), REPO_ROOT / "docker-compose.yml"]:
        text = path.read_text()
        assert not [n for n in names if f"{n}:" in text], path


def test_redis_admits_only_producer_and_consumer_pods() -> None:
    policy = find(base_objects(), "NetworkPolicy", "redis-clients")
    assert selects(policy["spec"]["podSelector"], pod_labels()["redis"])
    admitted = set()
    for rule in policy["spec"]["ingress"]:
        for peer in rule["from"]:
            if "namespaceSelector" in peer:
                # KEDA's operator, in its own namespace, reads lag as a read-only user.
                assert peer["namespaceSelector"]["matchLabels"] == {
                    "kubernetes.io/metadata.name": "keda"
                }
                continue
            admitted |= {n for n, lbl in pod_labels().items() if selects(peer["podSelector"], lbl)}
    assert admitted == {"ocrq-producer", "ocrq-consumer"}


def test_vllm_admits_only_consumer_pods() -> None:
    policy = find(base_objects(), "NetworkPolicy", "vllm-clients")
    assert selects(policy["spec"]["podSelector"], pod_labels()["vllm"])
    admitted = set()
    for rule in policy["spec"]["ingress"]:
        for peer in rule["from"]:
            if "namespaceSelector" in peer:
                assert peer["namespaceSelector"]["matchLabels"] == {
                    "kubernetes.io/metadata.name": "monitoring"
                }
                continue
            admitted |= {n for n, lbl in pod_labels().items() if selects(peer["podSelector"], lbl)}
    assert admitted == {"ocrq-consumer"}


def test_services_select_pods_and_name_their_ports() -> None:
    workloads = {o["metadata"]["name"]: o for o in base_objects() if o["kind"] in WORKLOADS}
    for service in (o for o in base_objects() if o["kind"] == "Service"):
        matched = [
            w
            for w in workloads.values()
            if selects(
                {"matchLabels": service["spec"]["selector"]},
                w["spec"]["template"]["metadata"]["labels"],
            )
        ]
        assert len(matched) == 1, service["metadata"]["name"]
        names = {p["name"] for p in container(matched[0])["ports"]}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in names


def test_prometheus_operator_monitors_match_services_and_pods() -> None:
    monitors = load_docs(K8S / "components" / "prometheus-operator" / "monitors.yaml")
    objects = base_objects()
    for monitor in monitors:
        selector = monitor["spec"]["selector"]
        if monitor["kind"] == "ServiceMonitor":
            service = next(
                s
                for s in objects
                if s["kind"] == "Service" and selects(selector, s["metadata"]["labels"])
            )
            names = {p["name"] for p in service["spec"]["ports"]}
            assert {e["port"] for e in monitor["spec"]["endpoints"]} <= names
        else:
            assert monitor["kind"] == "PodMonitor"
            name = next(n for n, labels in pod_labels().items() if selects(selector, labels))
            ports = {p["name"] for p in container(find(objects, "Deployment", name))["ports"]}
            assert {e["port"] for e in monitor["spec"]["podMetricsEndpoints"]} <= ports
    scraped = {m["metadata"]["name"] for m in monitors}
    assert scraped == {"ocrq-producer", "ocrq-consumer", "vllm"}


# --- the vllm-sidecar variant: each worker in its vLLM pod, pages handed over by path -------


@pytest.fixture(scope="module")
def sidecar() -> list[Obj]:
    """The built vllm-sidecar overlay (kustomize applies its deletes and JSON patches)."""
    objects = kustomize_build(VARIANTS[0])
    if objects is None:
        pytest.skip("neither kustomize nor kubectl is on PATH (pure-Python check still ran)")
    return objects


def env_of(c: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in c.get("env", [])}


def sidecar_pod(objects: list[Obj]) -> tuple[Obj, Obj, Obj]:
    """The vLLM pod spec, its vllm container and its consumer container."""
    pod = pod_spec(find(objects, "Deployment", "vllm"))
    by_name = {c["name"]: c for c in pod["containers"]}
    assert set(by_name) == {"vllm", "consumer"}
    return pod, by_name["vllm"], by_name["consumer"]


def sidecar_settings(objects: list[Obj], consumer: Obj) -> Settings:
    """The worker's settings: the ConfigMap, then its container's own env (which wins)."""
    data = find(objects, "ConfigMap", "ocrq-config")["data"]
    env = {k: v for k, v in env_of(consumer).items() if k.startswith("OCRQ_") and "$(" not in v}
    return load_settings({**data, **env})


def test_sidecar_variant_validates_and_keeps_one_deployment_per_gpu(sidecar: list[Obj]) -> None:
    for obj in sidecar:
        validate_built(obj)
    deployments = {o["metadata"]["name"] for o in sidecar if o["kind"] == "Deployment"}
    assert deployments == {"ocrq-producer", "vllm"}  # no standalone workers left


def test_sidecar_worker_hands_pages_to_the_vllm_beside_it_by_path(sidecar: list[Obj]) -> None:
    pod, vllm, consumer = sidecar_pod(sidecar)
    settings = sidecar_settings(sidecar, consumer)
    assert settings.ocr.page_handoff == "file" and settings.ocr.engine_name == "vllm"
    port = next(p["containerPort"] for p in vllm["ports"] if p["name"] == "http")
    assert settings.ocr.vllm_url == f"http://127.0.0.1:{port}"
    folder = f"{settings.worker.shm_dir}/ocrq"  # where the worker's pages live (consumer/workspace)
    args = vllm["args"]
    assert args[args.index("--allowed-local-media-path") + 1] == folder
    mounts = [{m["mountPath"]: m["name"] for m in c["volumeMounts"]} for c in (vllm, consumer)]
    assert mounts[0][folder] == mounts[1][folder]
    volume = next(v for v in pod["volumes"] if v["name"] == mounts[0][folder])
    assert volume["emptyDir"]["medium"] == "Memory"
    assert quantity(volume["emptyDir"]["sizeLimit"]) >= sizing.shm_size_bytes(settings)
    limit = quantity(consumer["resources"]["limits"]["memory"])
    assert limit >= quantity(volume["emptyDir"]["sizeLimit"]) + 2**30  # pages charged to it


def test_sidecar_containers_keep_their_least_privilege(sidecar: list[Obj]) -> None:
    _, vllm, consumer = sidecar_pod(sidecar)
    sc = consumer["securityContext"]
    assert (sc["runAsNonRoot"], sc["readOnlyRootFilesystem"]) == (True, True)
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["allowPrivilegeEscalation"] is False
    # vLLM reads the worker's 0700 folders as root: one capability back, nothing more.
    assert vllm["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["DAC_OVERRIDE"]}


def test_sidecar_keda_scales_the_vllm_pods_on_the_queue_down_to_zero(sidecar: list[Obj]) -> None:
    scaled = [o for o in sidecar if o["kind"] == "ScaledObject"]
    targets = [o["spec"]["scaleTargetRef"] for o in scaled]
    assert targets == [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"}]
    [spec] = [o["spec"] for o in scaled]
    assert spec["minReplicaCount"] == 0
    assert {t["type"] for t in spec["triggers"]} == {"redis-streams"}
    assert "replicas" not in find(sidecar, "Deployment", "vllm")["spec"]
    # Zero means a GPU cold start next time: as slow to go there as vLLM's own autoscaler.
    vllm_scaler = load_docs(K8S / "base" / "keda" / "vllm" / "scaledobject.yaml")[0]
    assert spec["cooldownPeriod"] >= vllm_scaler["spec"]["cooldownPeriod"]


def test_sidecar_worker_waits_out_vllm_cold_start_and_drains_before_the_kill(
    sidecar: list[Obj],
) -> None:
    pod, vllm, consumer = sidecar_pod(sidecar)
    settings = sidecar_settings(sidecar, consumer)

    def budget(probe: Obj) -> int:
        return int(probe["periodSeconds"] * probe["failureThreshold"])

    # The worker reports healthy once vLLM has read its probe page: after vLLM's start.
    assert budget(consumer["startupProbe"]) > budget(vllm["startupProbe"])
    assert settings.ocr.engine_outage_s > budget(vllm["startupProbe"])
    grace = pod["terminationGracePeriodSeconds"]
    assert grace > settings.worker.drain_grace_s + 10
    assert consumer["command"] == ["ocrq", "worker"]
    # vLLM stops only once the worker has drained (its metrics port closed), within the grace.
    script = vllm["lifecycle"]["preStop"]["exec"]["command"][-1]
    compile(script, "preStop", "exec")
    assert f'("127.0.0.1", {settings.worker.metrics_port})' in script
    wait = int(re.search(r"time\.monotonic\(\) \+ (\d+)", script)[1])  # type: ignore[index]
    assert settings.worker.drain_grace_s < wait < grace
    assert consumer["image"] == "registry.example.com/ocrq/consumer:0.1.0"


def test_sidecar_worker_reaches_redis_and_its_metrics_are_scraped(sidecar: list[Obj]) -> None:
    labels = find(sidecar, "Deployment", "vllm")["spec"]["template"]["metadata"]["labels"]
    policy = find(sidecar, "NetworkPolicy", "redis-clients")
    assert any(
        "podSelector" in peer and "namespaceSelector" not in peer
        and selects(peer["podSelector"], labels)
        for rule in policy["spec"]["ingress"] for peer in rule["from"]
    )  # fmt: skip
    monitor = find(sidecar, "PodMonitor", "ocrq-consumer")
    assert selects(monitor["spec"]["selector"], labels)
    _, _, consumer = sidecar_pod(sidecar)
    ports = {p["name"] for p in consumer["ports"]}
    assert {e["port"] for e in monitor["spec"]["podMetricsEndpoints"]} <= ports
