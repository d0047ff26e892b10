"""docker-compose.yml's object store: the s3 profile's SeaweedFS, and the variables that point
the producer and the workers at it (or at no store: the default stays Redis only)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping
from typing import Any

import pytest
import yaml
from support.deploy_tree import REPO_ROOT
from support.seaweed import weed_binary

from ocrq.shared.settings import Settings, load_settings

COMPOSE = REPO_ROOT / "docker-compose.yml"

OCRQ_SERVICES = ("producer", "consumer", "consumer-gpu")
WORKERS = ("consumer", "consumer-gpu")
# ${VAR:-default} (default when unset or empty), ${VAR-default} (when unset), ${VAR}.
INTERPOLATION = re.compile(r"\$\{(\w+)(?:(:?)-([^}]*))?\}")
# What the compose file's first lines tell a user to run for the s3 profile.
S3_PROFILE_ENV = {"OCRQ_BLOB_URL": "s3://ocrq"}


def compose() -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return found


def services() -> dict[str, dict[str, Any]]:
    return dict(compose()["services"])


def volumes() -> dict[str, dict[str, Any]]:
    return {k: v or {} for k, v in compose()["volumes"].items()}


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> named volume (or host path), from the short volume syntax."""
    pairs = (v.split(":")[:2] for v in service.get("volumes", []))
    return {target: source for source, target in pairs}


def interpolate(value: Any, environ: Mapping[str, str]) -> str:
    """A value as compose resolves it in ``environ``."""

    def one(match: re.Match[str]) -> str:
        name, colon, default = match[1], match[2], match[3] or ""
        if name not in environ or (colon and not environ[name]):
            return default
        return environ[name]

    return INTERPOLATION.sub(one, str(value))


def environment(service: dict[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    return {k: interpolate(v, environ) for k, v in service.get("environment", {}).items()}


def store_settings(name: str, environ: Mapping[str, str]) -> Settings:
    env = environment(services()[name], environ)
    return load_settings({k: v for k, v in env.items() if k.startswith("OCRQ_")})


def s3_flags() -> dict[str, str]:
    """The s3 service's `weed mini -flag=value` options."""
    command = services()["s3"]["command"]
    assert command[0] == "mini"
    return dict(arg.lstrip("-").split("=", 1) for arg in command[1:])


def identities(environ: Mapping[str, str]) -> list[dict[str, Any]]:
    content = compose()["configs"]["s3-identities"]["content"]
    found: list[dict[str, Any]] = json.loads(interpolate(content, environ))["identities"]
    return found


def test_without_a_blob_url_every_service_keeps_everything_in_redis() -> None:
    for name in OCRQ_SERVICES:
        settings = store_settings(name, {})
        assert not settings.blobs.enabled, name


def test_the_s3_profile_points_every_ocrq_service_at_the_s3_service() -> None:
    flags = s3_flags()
    for name in OCRQ_SERVICES:
        settings = store_settings(name, S3_PROFILE_ENV)
        assert settings.blobs.blob_url == f"s3://{flags['bucket']}", name
        assert settings.blobs.s3_endpoint == f"http://s3:{flags['s3.port']}", name
        env = environment(services()[name], S3_PROFILE_ENV)
        assert env["AWS_ACCESS_KEY_ID"] and env["AWS_SECRET_ACCESS_KEY"], name


def test_another_s3_takes_its_own_endpoint_and_aws_itself_an_empty_one() -> None:
    elsewhere = {"OCRQ_BLOB_URL": "s3://scans/ocrq", "OCRQ_S3_ENDPOINT": "https://minio:9000"}
    assert store_settings("producer", elsewhere).blobs.s3_endpoint == "https://minio:9000"
    aws = {"OCRQ_BLOB_URL": "s3://scans/ocrq", "OCRQ_S3_ENDPOINT": ""}
    assert store_settings("consumer", aws).blobs.s3_endpoint == ""


@pytest.mark.parametrize(
    "environ", [{}, {"AWS_ACCESS_KEY_ID": "k1", "AWS_SECRET_ACCESS_KEY": "s1"}]
)
def test_the_store_knows_the_keys_the_services_sign_with(environ: dict[str, str]) -> None:
    (identity,) = identities(environ)
    assert "Admin" in identity["actions"]  # makes the bucket, lists and deletes prefixes
    (keys,) = identity["credentials"]
    for name in OCRQ_SERVICES:
        env = environment(services()[name], environ)
        assert (keys["accessKey"], keys["secretKey"]) == (
            env["AWS_ACCESS_KEY_ID"],
            env["AWS_SECRET_ACCESS_KEY"],
        ), name
    target = services()["s3"]["configs"][0]
    assert target == {"source": "s3-identities", "target": flags_config_path()}


def flags_config_path() -> str:
    return s3_flags()["s3.config"]


def test_the_s3_service_keeps_its_data_answers_health_and_publishes_on_loopback_only() -> None:
    s3 = services()["s3"]
    flags = s3_flags()
    assert mounts(s3)[flags["dir"]] in volumes()
    assert f":{flags['s3.port']}/healthz" in " ".join(s3["healthcheck"]["test"])
    assert s3["ports"] == [f"127.0.0.1:{flags['s3.port']}:{flags['s3.port']}"]
    assert s3["entrypoint"] == ["/usr/bin/weed"]
    for name in OCRQ_SERVICES:  # they start once the store answers, when the profile runs
        wait = services()[name]["depends_on"]["s3"]
        assert wait == {"condition": "service_healthy", "required": False}, name


def test_the_s3_image_is_the_release_the_tests_run() -> None:
    image = services()["s3"]["image"]
    name, _, tag = image.partition(":")
    assert name == "chrislusf/seaweedfs" and re.fullmatch(r"\d+\.\d+", tag), image
    binary = weed_binary()
    if binary is None:
        pytest.skip("no `weed` binary to compare with")
    done = subprocess.run([binary, "version"], capture_output=True, text=True, timeout=30)
    assert re.search(rf"\b{re.escape(tag)}\b", done.stdout), (tag, done.stdout[:200])


def test_workers_spool_big_documents_to_a_disk_volume_their_user_owns() -> None:
    for name in WORKERS:
        service = services()[name]
        settings = store_settings(name, S3_PROFILE_ENV)
        folder = settings.blobs.document_spool_dir
        assert folder, f"{name}: OCRQ_DOCUMENT_SPOOL_DIR unset: big documents go to tmpfs /tmp"
        source = mounts(service).get(folder)
        assert source in volumes(), f"{name}: no named volume at {folder}"
        assert volumes()[source].get("driver_opts", {}).get("type") != "tmpfs"
    # A new named volume copies the image folder's owner: the consumer image must create it.
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    consumer_stage = dockerfile.split("AS consumer\n", 1)[1].split("\nFROM ", 1)[0]
    folder = store_settings("consumer", S3_PROFILE_ENV).blobs.document_spool_dir
    assert f"chown 10001:10001 {folder}" in consumer_stage


def test_with_the_store_the_workers_shm_still_fits_their_documents_and_pages() -> None:
    from ocrq.deploy import sizing

    for name in WORKERS:
        service = services()[name]
        settings = store_settings(name, S3_PROFILE_ENV)
        folder = f"{settings.worker.shm_dir}/ocrq"
        volume = mounts(service).get(folder)
        if volume is not None:
            opts = dict(i.split("=", 1) for i in volumes()[volume]["driver_opts"]["o"].split(","))
            space = opts["size"]
        else:
            space = service["shm_size"]
        match = re.fullmatch(r"(\d+)([kmg])b?", space.lower())
        assert match, space
        room = int(match[1]) * 2 ** {"k": 10, "m": 20, "g": 30}[match[2]]
        assert room >= sizing.shm_size_bytes(settings), name
