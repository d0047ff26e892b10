"""`ocrq k8s keda` renders the KEDA objects from the settings, and the committed files match."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.deploy_tree import K8S, base_objects, find

from ocrq.deploy import command, keda, sizing
from ocrq.shared.keys import Keys
from ocrq.shared.settings import GROUP, LANES, load_settings

CONFIG = K8S / "base" / "config.yaml"
KEDA_DIR = K8S / "base" / "keda"


@pytest.fixture(autouse=True)
def _no_ocrq_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Generation reads OCRQ_* from the environment: start each test from none."""
    for name in list(os.environ):
        if name.startswith("OCRQ_"):
            monkeypatch.delenv(name)


def generate(tmp_path: Path, *extra: str) -> dict[str, str]:
    out = tmp_path / "keda"
    assert command.main(["keda", "--env-from", str(CONFIG), "--out", str(out), *extra]) == 0
    return {str(p.relative_to(out)): p.read_text() for p in sorted(out.rglob("*.yaml"))}


def scaled_object(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "ScaledObject" and o["metadata"]["name"] == name)


def test_committed_keda_files_equal_generated_output(tmp_path: Path) -> None:
    generated = generate(tmp_path)
    committed = {str(p.relative_to(KEDA_DIR)): p.read_text() for p in KEDA_DIR.rglob("*.yaml")}
    assert sorted(committed) == sorted(generated), "file set drifted: regenerate"
    for name, text in generated.items():
        assert committed[name] == text, (
            f"k8s/base/keda/{name} drifted from `ocrq k8s keda --env-from k8s/base/config.yaml"
            " --out k8s/base/keda`: regenerate it"
        )


def test_stdout_holds_the_same_objects_as_the_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = generate(tmp_path)
    capsys.readouterr()
    assert command.main(["keda", "--env-from", str(CONFIG)]) == 0
    printed = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    written = [d for text in files.values() for d in yaml.safe_load_all(text) if d]
    assert printed == written


def test_one_lag_and_one_pending_trigger_per_lane_with_explicit_lag_count() -> None:
    settings = load_settings({})
    obj = keda.consumer_scaled_object(settings, "ocrq", 8)
    triggers = obj["spec"]["triggers"]
    assert len(triggers) == 2 * len(LANES) + 2  # + the webhook deliveries' stream
    keys = Keys(settings.store.prefix)
    for lane in LANES:
        lag = next(t for t in triggers if t["name"] == f"{lane}-lag")["metadata"]
        pending = next(t for t in triggers if t["name"] == f"{lane}-pending")["metadata"]
        assert lag["stream"] == pending["stream"] == keys.stream(lane)
        assert lag["consumerGroup"] == pending["consumerGroup"] == GROUP
        # Without lagCount KEDA's code quietly switches to pending mode.
        assert lag["lagCount"] == str(sizing.jobs_per_worker(settings))
        assert "pendingEntriesCount" not in lag
        assert pending["pendingEntriesCount"] == str(sizing.jobs_per_worker(settings))
        assert "lagCount" not in pending
        # KEDA activates on count > activationLagCount: "0" lets one queued job wake it.
        assert lag["activationLagCount"] == pending["activationLagCount"] == "0"
    assert all(t["type"] == "redis-streams" for t in triggers)
    assert all(t["authenticationRef"]["name"] == keda.TRIGGER_AUTH for t in triggers)


@pytest.mark.parametrize(
    ("env", "per_worker"),
    [
        ({"OCRQ_ENGINE": "vllm", "OCRQ_MAX_JOBS": "16", "OCRQ_ENGINE_CONCURRENCY": "32"}, 16),
        ({"OCRQ_ENGINE": "vllm", "OCRQ_ENGINE_CONCURRENCY": "32"}, 64),  # 2 engine-fulls
        ({"OCRQ_ENGINE": "local", "OCRQ_LOCAL_WORKERS": "2"}, 4),  # not the default 256
    ],
)
def test_lag_target_is_the_jobs_one_busy_worker_takes(env: dict[str, str], per_worker: int) -> None:
    triggers = keda.consumer_scaled_object(load_settings(env), "ocrq", 8)["spec"]["triggers"]
    lag = next(t for t in triggers if t["name"] == "interactive-lag")["metadata"]
    assert lag["lagCount"] == str(per_worker)


def test_webhook_deliveries_keep_a_worker_until_they_are_done() -> None:
    settings = load_settings({})
    triggers = keda.consumer_scaled_object(settings, "ocrq", 8)["spec"]["triggers"]
    hooks = {t["name"]: t["metadata"] for t in triggers if t["name"].startswith("webhooks")}
    assert set(hooks) == {"webhooks-lag", "webhooks-pending"}
    for meta in hooks.values():
        assert meta["stream"] == Keys(settings.store.prefix).webhooks("p0") == "ocrq:{p0}:webhooks"
        assert meta["consumerGroup"] == "webhooks" and meta["activationLagCount"] == "0"
    assert "~ocrq:{p*}:webhooks" in keda.keda_acl_rules(settings)


def test_consumer_scales_from_zero_with_gentle_scale_down() -> None:
    spec = keda.consumer_scaled_object(load_settings({}), "ocrq", 8)["spec"]
    assert spec["minReplicaCount"] == 0
    assert spec["cooldownPeriod"] >= 60
    down = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    assert down["stabilizationWindowSeconds"] >= 60
    assert all(p["type"] == "Pods" and p["value"] == 1 for p in down["policies"])


def test_prefix_setting_renames_every_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OCRQ_PREFIX", "tenant7:")
    settings = command.settings_for(None)
    streams = {t["metadata"]["stream"] for t in keda.lane_triggers(settings, "ocrq", 1, 1)}
    assert streams == {f"tenant7:{{p0}}:stream:{lane}" for lane in LANES}
    assert "~tenant7:{p*}:stream:*" in keda.keda_acl_rules(settings)


def test_every_partition_of_every_lane_has_its_own_triggers() -> None:
    settings = load_settings({}, partitions=3)
    triggers = keda.consumer_scaled_object(settings, "ocrq", 8)["spec"]["triggers"]
    streams = {t["metadata"]["stream"] for t in triggers if "lagCount" in t["metadata"]}
    tags = Keys("ocrq:", 3).tags
    expected = {f"ocrq:{{{tag}}}:stream:{lane}" for lane in LANES for tag in tags}
    assert streams == expected | {f"ocrq:{{{tag}}}:webhooks" for tag in tags}
    names = [t["name"] for t in triggers]
    assert len(names) == len(set(names)) == 2 * (len(LANES) * 3 + 3)
    assert {"interactive-p2-lag", "batch-p0-pending", "webhooks-p1-lag"} <= set(names)


def test_every_partition_can_wake_the_consumer_from_zero() -> None:
    settings = load_settings({}, partitions=3)
    spec = keda.consumer_scaled_object(settings, "ocrq", 8)["spec"]
    assert spec["minReplicaCount"] == 0
    lags = [t["metadata"] for t in spec["triggers"] if "lagCount" in t["metadata"]]
    assert lags and all(meta["activationLagCount"] == "0" for meta in lags)


def test_a_cluster_uses_the_cluster_scaler_and_may_read_the_slot_map() -> None:
    url = "redis://redis-cluster-0.redis-cluster.ocrq.svc:6379"
    settings = load_settings({}, redis_url=url, redis_mode="cluster", partitions=3)
    triggers = keda.consumer_scaled_object(settings, "ocrq", 8)["spec"]["triggers"]
    assert {t["type"] for t in triggers} == {"redis-cluster-streams"}
    target = keda.redis_target(settings, "ocrq")
    assert target == {
        "addresses": "redis-cluster-0.redis-cluster.ocrq.svc:6379",
        "enableTLS": "false",
    }
    assert "+cluster|slots" in keda.keda_acl_rules(settings)


def test_sentinel_uses_the_sentinel_scaler_with_the_master_name() -> None:
    sentinels = "sentinel-0.ocrq.svc:26379,sentinel-1.ocrq.svc:26379"
    settings = load_settings({}, redis_sentinels=sentinels, redis_sentinel_master="ocrq")
    triggers = keda.consumer_scaled_object(settings, "ocrq", 8)["spec"]["triggers"]
    assert {t["type"] for t in triggers} == {"redis-sentinel-streams"}
    target = keda.redis_target(settings, "ocrq")
    assert target["addresses"] == sentinels and target["sentinelMaster"] == "ocrq"


def test_env_from_configmap_overrides_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OCRQ_MAX_JOBS", "99")
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "data": {"OCRQ_MAX_JOBS": "4"}})
    )
    assert command.settings_for(config).worker.max_jobs == 4
    assert command.settings_for(None).worker.max_jobs == 99


def test_loopback_redis_url_maps_to_the_in_cluster_service() -> None:
    target = keda.redis_target(load_settings({}), "prod")
    assert target == {"address": "redis.prod.svc:6379", "databaseIndex": "0", "enableTLS": "false"}


def test_external_rediss_url_keeps_host_and_enables_tls() -> None:
    url = "rediss://:s3cr3t-pw@cache.example.net:6380/2"
    target = keda.redis_target(load_settings({}, redis_url=url), "prod")
    assert target == {
        "address": "cache.example.net:6380",
        "databaseIndex": "2",
        "enableTLS": "true",
    }
    rendered = command.render(keda.keda_files(load_settings({}, redis_url=url))["consumer.yaml"])
    assert "s3cr3t-pw" not in rendered  # the password only ever comes from the Secret


def test_trigger_authentication_reads_keys_the_redis_secret_has() -> None:
    secret = find(base_objects(), "Secret", keda.REDIS_SECRET)
    auth = keda.trigger_authentication()
    for ref in auth["spec"]["secretTargetRef"]:
        assert ref["name"] == keda.REDIS_SECRET
        assert ref["key"] in secret["stringData"]
    assert {r["parameter"] for r in auth["spec"]["secretTargetRef"]} == {"username", "password"}


def test_vllm_scaled_object_scales_on_waiting_requests_and_wakes_on_lane_work() -> None:
    settings = load_settings({})
    spec = keda.vllm_scaled_object(settings, "ocrq", 2, keda.DEFAULT_PROMETHEUS)["spec"]
    waiting = spec["triggers"][0]
    assert waiting["type"] == "prometheus"
    assert "vllm:num_requests_waiting" in waiting["metadata"]["query"]
    assert settings.ocr.vllm_model in waiting["metadata"]["query"]
    lanes = {t["metadata"]["stream"] for t in spec["triggers"][1:]}
    assert lanes == {Keys(settings.store.prefix).stream(lane) for lane in LANES}
    assert spec["scaleTargetRef"]["name"] == "vllm"


def test_bad_setting_is_reported_not_raised(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OCRQ_MAX_JOBS", "many")
    assert command.main(["keda"]) == 2
    assert "OCRQ_" in capsys.readouterr().err


def test_sizing_prints_the_shm_figure(capsys: pytest.CaptureFixture[str]) -> None:
    assert command.main(["sizing", "--env-from", str(CONFIG)]) == 0
    out = capsys.readouterr().out
    assert str(sizing.shm_size_bytes(command.settings_for(CONFIG))) in out
