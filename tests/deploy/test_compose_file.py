"""docker-compose.yml: the services, health checks and profiles a laptop and a GPU box need."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from typing import Any

import pytest
import yaml
from support.deploy_tree import REPO_ROOT, base_objects, find

from ocrq.deploy import sizing
from ocrq.producer.guard import host_policy
from ocrq.shared.settings import LANES, Settings, load_settings, setting_names

COMPOSE = REPO_ROOT / "docker-compose.yml"
SIZES = {"kb": 2**10, "mb": 2**20, "gb": 2**30, "k": 2**10, "m": 2**20, "g": 2**30}
INTERPOLATION = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def services() -> dict[str, dict[str, Any]]:
    return dict(yaml.safe_load(COMPOSE.read_text())["services"])


def volumes() -> dict[str, dict[str, Any]]:
    return {k: v or {} for k, v in yaml.safe_load(COMPOSE.read_text())["volumes"].items()}


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> named volume (or host path), from the short volume syntax."""
    pairs = (v.split(":")[:2] for v in service.get("volumes", []))
    return {target: source for source, target in pairs}


def page_folder(settings: Settings) -> str:
    """Where a worker's pages live: <shm_dir>/ocrq (consumer/workspace.py)."""
    return f"{settings.worker.shm_dir}/ocrq"


def tmpfs_options(volume: dict[str, Any]) -> dict[str, str]:
    """A tmpfs named volume's mount options (size=1g,uid=...) as a dict."""
    opts = volume["driver_opts"]
    assert opts["type"] == "tmpfs" and opts["device"] == "tmpfs"
    return dict(item.split("=", 1) for item in opts["o"].split(","))


def page_space(service: dict[str, Any], settings: Settings) -> int:
    """The RAM a worker's pages can fill: a tmpfs mounted at its page folder, else its shm."""
    volume = mounts(service).get(page_folder(settings))
    if volume is not None:
        return size(tmpfs_options(volumes()[volume])["size"])
    return size(service["shm_size"])


def interpolate(value: Any) -> str:
    """${VAR:-default} as compose resolves it with VAR unset."""
    return INTERPOLATION.sub(lambda m: m[2] or "", str(value))


def environment(service: dict[str, Any]) -> dict[str, str]:
    return {k: interpolate(v) for k, v in service.get("environment", {}).items()}


def size(text: str) -> int:
    match = re.fullmatch(r"(\d+)([a-z]*)", str(text).lower())
    assert match, text
    return int(match[1]) * SIZES.get(match[2], 1)


def seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+)(s|m)", str(text))
    assert match, text
    return int(match[1]) * (60 if match[2] == "m" else 1)


def test_services_and_gpu_profile() -> None:
    found = services()
    assert set(found) == {"redis", "producer", "consumer", "vllm", "consumer-gpu", "s3"}
    for name in ("redis", "producer", "consumer"):
        assert "profiles" not in found[name], f"{name} must start without a profile"
    for name in ("vllm", "consumer-gpu"):
        assert found[name]["profiles"] == ["gpu"]
    assert found["s3"]["profiles"] == ["s3"]


def test_every_service_has_a_healthcheck() -> None:
    for name, service in services().items():
        test = service["healthcheck"]["test"]
        assert test[0] == "CMD" and len(test) > 1, name


def test_redis_keeps_an_aof_and_never_evicts() -> None:
    command = services()["redis"]["command"]
    flags = dict(zip(command[1::2], command[2::2], strict=False))
    assert flags["--appendonly"] == "yes"
    assert flags["--appendfsync"] == "everysec"
    assert flags["--maxmemory-policy"] == "noeviction"
    # The producer's backlog cap refuses uploads before queued payloads fill Redis.
    producer = load_settings(environment(services()["producer"]))
    queued = len(LANES) * producer.api.max_backlog * producer.api.max_document_bytes
    assert size(flags["--maxmemory"]) >= queued
    assert any(v.endswith(":/data") for v in services()["redis"]["volumes"])


def test_environment_names_are_settings_and_load() -> None:
    fields = {f"OCRQ_{name.upper()}" for name in setting_names()}
    for name, service in services().items():
        env = environment(service)
        ocrq_env = {k: v for k, v in env.items() if k.startswith("OCRQ_")}
        assert set(ocrq_env) <= fields, (name, set(ocrq_env) - fields)
        load_settings(ocrq_env)


def test_cpu_worker_runs_local_engine_and_gpu_worker_calls_vllm() -> None:
    found = services()
    assert load_settings(environment(found["consumer"])).ocr.engine_name == "local"
    gpu = load_settings(environment(found["consumer-gpu"]))
    assert gpu.ocr.engine_name == "vllm"
    port = found["vllm"]["command"][found["vllm"]["command"].index("--port") + 1]
    assert gpu.ocr.vllm_url == f"http://vllm:{port}"
    assert found["vllm"]["command"][0] == gpu.ocr.vllm_model
    # Only one kind of worker consumes at a time when OCRQ_CPU_WORKERS=0.
    assert found["consumer"]["deploy"]["replicas"] == "${OCRQ_CPU_WORKERS:-1}"


def test_vllm_recipe_matches_the_kubernetes_deployment() -> None:
    vllm = find(base_objects(), "Deployment", "vllm")["spec"]["template"]["spec"]
    container = vllm["containers"][0]
    service = services()["vllm"]
    assert service["entrypoint"] == container["command"]
    # Plus what lets it read the co-located worker's pages (k8s: overlays/vllm-sidecar).
    allowed = ["--allowed-local-media-path", page_folder(load_settings({}))]
    assert service["command"] == [*container["args"], *allowed]
    devices = service["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]


def test_workers_get_shm_for_pages_and_outlive_their_drain() -> None:
    for name in ("consumer", "consumer-gpu"):
        service = services()[name]
        settings = load_settings(environment(service))
        assert page_space(service, settings) >= sizing.shm_size_bytes(settings)
        assert seconds(service["stop_grace_period"]) > settings.worker.drain_grace_s
        assert service["build"]["target"] == "consumer"
        health = " ".join(service["healthcheck"]["test"])
        assert f":{settings.worker.metrics_port}/healthz" in health


def test_gpu_worker_hands_pages_to_vllm_through_a_shared_tmpfs() -> None:
    found = services()
    worker, vllm = found["consumer-gpu"], found["vllm"]
    settings = load_settings(environment(worker))
    assert settings.ocr.page_handoff == "file"
    folder = page_folder(settings)
    command = vllm["command"]
    assert command[command.index("--allowed-local-media-path") + 1] == folder
    volume = mounts(worker)[folder]
    assert mounts(vllm)[folder] == volume  # one tmpfs, at one path in both containers
    options = tmpfs_options(volumes()[volume])
    # The worker (the image's USER) owns it: its page folders are private (0700).
    user = re.search(r"^USER (\d+):(\d+)$", (REPO_ROOT / "Dockerfile").read_text(), re.M)
    assert user is not None
    assert (options["uid"], options["gid"]) == user.groups()
    assert "user" not in vllm  # vLLM runs as root, which reads them
    # The worker is healthy once vLLM has read its probe page: after vLLM's cold start.
    start = worker["healthcheck"]["start_period"]
    assert seconds(start) >= seconds(vllm["healthcheck"]["start_period"])


ALL_INTERFACES = ("", "0.0.0.0", "::", "[::]")


def published_on_all_interfaces(service: dict[str, Any]) -> list[str]:
    """The service's published ports that listen on every interface of the host."""
    found = []
    for entry in service.get("ports", []):
        if isinstance(entry, dict):  # long syntax
            host_ip = interpolate(entry.get("host_ip", ""))
        else:  # [HOST_IP:]HOST_PORT:CONTAINER_PORT, or CONTAINER_PORT (a random host port)
            parts = interpolate(entry).rsplit(":", 2)
            host_ip = parts[0] if len(parts) == 3 else ""
        if host_ip in ALL_INTERFACES:
            found.append(str(entry))
    return found


def authenticates(name: str, service: dict[str, Any]) -> bool:
    """True when every request to the service needs a credential, as the file starts it."""
    if name == "producer":
        return bool(load_settings(environment(service)).api.api_keys)
    return False  # Redis' default user, the workers' metrics and vLLM answer anyone


def test_no_unauthenticated_service_is_published_on_every_interface() -> None:
    # The check itself: an open API on 0.0.0.0, as the file once published it, is caught.
    assert published_on_all_interfaces({"ports": ["8000:8000"]}) == ["8000:8000"]
    assert published_on_all_interfaces({"ports": [{"target": 8000, "published": 8000}]})
    assert not published_on_all_interfaces({"ports": ["127.0.0.1:8000:8000"]})
    for name, service in services().items():
        if not authenticates(name, service):
            assert published_on_all_interfaces(service) == [], name
    assert services()["producer"]["ports"] == ["127.0.0.1:8000:8000"]


def test_the_open_compose_api_answers_localhost_names_only() -> None:
    producer = services()["producer"]
    command = producer["command"]
    bind = command[command.index("--host") + 1]
    policy = host_policy(load_settings(environment(producer), host=bind))
    assert policy.admits("localhost", 8000) and policy.admits("127.0.0.1", 8000)
    # Published past 127.0.0.1 by hand, an open API still refuses every other name.
    assert not policy.admits("producer", 8000) and not policy.admits("attacker.example", 8000)


def test_every_service_drops_capabilities_and_setuid_gains() -> None:
    for name, service in services().items():
        assert service["cap_drop"] == ["ALL"], name
        assert "no-new-privileges:true" in service["security_opt"], name
        # vLLM (root) reads the worker's 0700 page folders: that one capability, no other.
        assert service.get("cap_add", []) == (["DAC_OVERRIDE"] if name == "vllm" else []), name
    redis = container(find(base_objects(), "StatefulSet", "redis"))
    pod = find(base_objects(), "StatefulSet", "redis")["spec"]["template"]["spec"]
    user = f"{pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}"
    assert services()["redis"]["user"] == user and redis["image"] == services()["redis"]["image"]


def test_vllm_runs_the_pinned_image_of_the_kubernetes_deployment() -> None:
    vllm = find(base_objects(), "Deployment", "vllm")["spec"]["template"]["spec"]
    image = services()["vllm"]["image"]
    assert image == vllm["containers"][0]["image"] and not image.endswith(":latest")
    assert "--trust-remote-code" not in services()["vllm"]["command"]


def container(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(obj["spec"]["template"]["spec"]["containers"][0])


def test_producer_health_is_liveness_only() -> None:
    producer = services()["producer"]
    assert "/healthz" in " ".join(producer["healthcheck"]["test"])
    assert producer["build"]["target"] == "producer"
    assert producer["depends_on"]["redis"]["condition"] == "service_healthy"


def ocrq_commands() -> list[list[str]]:
    """Every `ocrq ...` command line in compose and in the Kubernetes workloads."""
    lines = [s["command"] for s in services().values() if s.get("command", [""])[0] == "ocrq"]
    for obj in base_objects():
        if obj["kind"] == "Deployment":
            command = obj["spec"]["template"]["spec"]["containers"][0]["command"]
            if command[0] == "ocrq":
                lines.append(command)
    return lines


def test_commands_are_real_ocrq_subcommands() -> None:
    commands = ocrq_commands()
    assert {c[1] for c in commands} == {"producer", "worker"}
    try:
        import ocrq.cli  # noqa: F401
    except ImportError:
        pytest.skip("ocrq.cli is not written yet: subcommand flags cannot be checked")
    for command in commands:
        probe = (
            "import sys; from ocrq.cli.main import main; "
            f"sys.argv = {[*command, '--help']!r}; sys.exit(main())"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, (command, done.stderr[-2000:])
        for flag in (arg for arg in command[2:] if arg.startswith("--")):
            assert flag in done.stdout, (command, flag)


def test_docker_compose_config_accepts_the_file() -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker CLI on PATH")
    engine = subprocess.run([docker, "info"], capture_output=True, timeout=20, check=False)
    plugin = subprocess.run(
        [docker, "compose", "version"], capture_output=True, timeout=20, check=False
    )
    if engine.returncode != 0 or plugin.returncode != 0:
        pytest.skip("no Docker engine or compose plugin answers here")
    for profile in ([], ["--profile", "gpu"], ["--profile", "s3"]):
        done = subprocess.run(
            [docker, "compose", "-f", str(COMPOSE), *profile, "config", "--quiet"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr


def test_the_compose_producer_spools_zip_batches_to_a_disk_volume_its_user_owns() -> None:
    producer = services()["producer"]
    settings = load_settings(environment(producer))
    assert settings.uploads.spool_dir, (
        "OCRQ_SPOOL_DIR is unset: ZIP batches would spool in the tmpfs /tmp"
    )
    source = mounts(producer).get(settings.uploads.spool_dir)
    assert source in volumes(), f"no named volume is mounted at {settings.uploads.spool_dir}"
    assert volumes()[source].get("driver_opts", {}).get("type") != "tmpfs"
    # A new named volume copies the image folder's owner: the Dockerfile must create it.
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    producer_stage = dockerfile.split("AS producer\n", 1)[1].split("\nFROM ", 1)[0]
    assert f"chown 10001:10001 {settings.uploads.spool_dir}" in producer_stage
