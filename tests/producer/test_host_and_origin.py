"""Open mode and browsers: a Host allow-list against DNS rebinding, and no cross-site writes.

A page on another site reaches a producer on 127.0.0.1 by rebinding its own name there (the
browser then sends that name as Host) or by blind CORS-simple POSTs (sent with the page's
Origin). The first gets 400 before any route runs, the second 403 before anything is queued.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import httpx
import pytest
from litestar.testing import TestClient
from support.payloads import b64, small_pdf
from support.processes import stop, wait_http
from support.services import redis_env

from ocrq.producer.guard import host_policy, split_host
from ocrq.shared.embedded import free_port
from ocrq.shared.settings import Settings, load_settings

REBOUND = "attacker.example:8000"  # the rebinding page's own name, now answering 127.0.0.1


def submit(api: TestClient[Any], **headers: str) -> Any:
    return api.post("/v1/jobs", json={"document": b64(small_pdf())}, headers=headers)


def queued(api: TestClient[Any]) -> int:
    """Jobs the (open) API lists, asked under an allowed name."""
    return len(api.get("/v1/jobs", headers={"Host": "localhost:8000"}).json()["jobs"])


def test_a_rebound_host_name_is_refused_before_any_route_runs(api: TestClient[Any]) -> None:
    read = api.get("/v1/jobs", headers={"Host": REBOUND})
    assert read.status_code == 400 and read.json()["code"] == "invalid_request"
    assert "OCRQ_ALLOWED_HOSTS" in read.json()["message"]
    write = submit(api, Host=REBOUND)
    assert write.status_code == 400
    assert queued(api) == 0
    page = api.get("/ui", headers={"Host": REBOUND})
    assert page.status_code == 400  # the page (and its key prompt) is not served to it either


@pytest.mark.parametrize(
    "host", ["localhost:8000", "LOCALHOST", "127.0.0.1:9999", "[::1]:8000", "localhost.:8000"]
)
def test_localhost_names_are_served_on_any_port(api: TestClient[Any], host: str) -> None:
    assert api.get("/v1/jobs", headers={"Host": host}).status_code == 200


def test_the_bind_address_is_served_and_other_addresses_are_not(make_client: Any) -> None:
    api = make_client(host="10.1.2.3")  # only a name here: nothing is sent to it
    assert api.get("/v1/jobs", headers={"Host": "10.1.2.3:8000"}).status_code == 200
    assert api.get("/v1/jobs", headers={"Host": "10.1.2.4:8000"}).status_code == 400


def test_allowed_hosts_names_hosts_with_or_without_their_port(make_client: Any) -> None:
    api = make_client(allowed_hosts="ocrq.example.com, api.internal:8443")
    answers = {
        host: api.get("/v1/jobs", headers={"Host": host}).status_code
        for host in ("ocrq.example.com", "ocrq.example.com:8000", "api.internal:8443",
                     "api.internal:8000", "localhost:8000", "evil.ocrq.example.com")
    }  # fmt: skip
    assert answers == {
        "ocrq.example.com": 200, "ocrq.example.com:8000": 200, "api.internal:8443": 200,
        "api.internal:8000": 400, "localhost:8000": 400, "evil.ocrq.example.com": 400,
    }  # fmt: skip


def test_a_star_admits_any_host(make_client: Any) -> None:
    api = make_client(allowed_hosts="*")
    assert api.get("/v1/jobs", headers={"Host": REBOUND}).status_code == 200


def test_bound_to_every_interface_an_open_api_still_serves_only_localhost_names(
    make_client: Any,
) -> None:
    api = make_client(host="0.0.0.0")
    assert api.get("/v1/jobs", headers={"Host": "localhost:8000"}).status_code == 200
    assert api.get("/v1/jobs", headers={"Host": "ocrq-producer:8000"}).status_code == 400


def test_bound_to_every_interface_an_api_with_keys_serves_any_host(make_client: Any) -> None:
    # A rebinding page cannot present a key: Service names and Ingress hosts need no list.
    api = make_client(host="0.0.0.0", api_keys="acme:key-acme")
    ok = api.get("/v1/jobs", headers={"Host": "ocrq-producer:8000", "X-API-Key": "key-acme"})
    assert ok.status_code == 200


def test_probes_and_scrapes_answer_whatever_the_host(make_client: Any) -> None:
    # The kubelet and Prometheus send Host = the pod's IP, which no list names.
    api = make_client(allowed_hosts="ocrq.example.com")
    for path in ("/healthz", "/readyz", "/metrics"):
        assert api.get(path, headers={"Host": "10.244.1.7:8000"}).status_code == 200, path


def test_a_malformed_host_header_is_a_400(api: TestClient[Any]) -> None:
    r = api.get("/v1/jobs", headers={"Host": "localhost:80a"})
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"


@pytest.mark.parametrize(
    "origin", ["http://attacker.example", "http://localhost:3000", "null", "https://localhost"]
)
def test_a_cross_origin_write_is_refused_and_queues_nothing(
    api: TestClient[Any], origin: str
) -> None:
    r = submit(api, Host="localhost:8000", Origin=origin)
    assert r.status_code == 403 and r.json()["code"] == "forbidden"
    assert queued(api) == 0


def test_cross_origin_cancel_and_delete_are_refused(api: TestClient[Any]) -> None:
    job_id = submit(api, Host="localhost:8000").json()["id"]
    evil = {"Host": "localhost:8000", "Origin": "http://attacker.example"}
    assert api.post(f"/v1/jobs/{job_id}/cancel", headers=evil).status_code == 403
    assert api.delete(f"/v1/jobs/{job_id}", headers=evil).status_code == 403
    view = api.get(f"/v1/jobs/{job_id}", headers={"Host": "localhost:8000"}).json()
    assert view["status"] == "queued"


def test_the_page_own_origin_and_clients_without_origin_may_write(api: TestClient[Any]) -> None:
    page = submit(api, Host="localhost:8000", Origin="http://localhost:8000")
    assert page.status_code == 202, page.text
    # Behind TLS the Host has no port and the Origin says https.
    proxied = submit(api, Host="localhost", Origin="https://localhost")
    assert proxied.status_code == 202, proxied.text
    assert submit(api, Host="localhost:8000").status_code == 202  # curl, the client, a worker
    assert queued(api) == 3


def test_a_cross_origin_read_is_left_to_the_browser(api: TestClient[Any]) -> None:
    # Without CORS headers the browser hides the answer from the other page.
    r = api.get("/v1/jobs", headers={"Host": "localhost:8000", "Origin": "http://attacker.example"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_a_malformed_allowed_hosts_names_the_setting() -> None:
    with pytest.raises(ValueError, match="OCRQ_ALLOWED_HOSTS"):
        host_policy(load_settings({}, allowed_hosts="ok.example,bad:port"))


def test_host_parsing_keeps_ipv6_literals_whole() -> None:
    assert split_host("[::1]:8000") == ("[::1]", 8000)
    assert split_host("[::1]") == ("[::1]", None)
    assert split_host("Example.COM.") == ("example.com", None)
    policy = host_policy(load_settings({}, host="::1"))
    assert policy.admits("[::1]", 8000) and not policy.admits("[::2]", 8000)


def test_ocrq_producer_admits_the_address_its_host_flag_binds(
    settings: Settings,
) -> None:
    """A real `ocrq producer --host 127.0.0.2`: the app learns its bind address from the flag."""
    port = free_port()
    redis = {f"OCRQ_{name}": value for name, value in redis_env(settings).items()}
    env = {**os.environ, **redis, "OCRQ_PRODUCER_WORKERS": "1", "OCRQ_LOG_LEVEL": "warning"}
    env.pop("OCRQ_HOST", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ocrq.cli", "producer", "--host", "127.0.0.2", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.2:{port}"
    try:
        wait_http(f"{url}/healthz", proc)
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.get("/v1/jobs").status_code == 200  # Host: 127.0.0.2:<port>
            rebound = client.get("/v1/jobs", headers={"Host": REBOUND})
            assert rebound.status_code == 400 and rebound.json()["code"] == "invalid_request"
            cross = client.post(
                "/v1/jobs", content=small_pdf(), headers={"Origin": "http://attacker.example"}
            )
            assert cross.status_code == 403
    finally:
        stop(proc)
