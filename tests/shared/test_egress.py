"""Outbound requests to tenant-named URLs: the address policy, the pinned connection, bounds.

Every connection here goes to a loopback listener; the address checks need none at all.
"""

from __future__ import annotations

import asyncio
import datetime
import ssl
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from support.loopback_receivers import answer, drip, huge, receiving

from ocrq.shared.egress import Resolver, blocked_address, resolve_checked, send, system_resolve
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.webhooks import check_target


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "::127.0.0.1",  # IPv4-compatible
        "::ffff:127.0.0.1",  # IPv4-mapped
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254, the cloud metadata address
        "2002:a00:1::",  # 6to4 of 10.0.0.1
        "::ffff:192.168.0.1",
        "64:ff9b:1::a00:1",  # local-use NAT64 (RFC 8215): never global
        "127.0.0.1",
        "10.1.2.3",
        "169.254.169.254",
        "::1",
        "fe80::1%eth0",
        "224.0.0.1",
    ],
)
def test_an_address_that_reaches_a_private_one_is_blocked(address: str) -> None:
    assert blocked_address(address)


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "64:ff9b::808:808", "2002:808:808::", "::ffff:8.8.8.8", "2606:4700::1"]
)
def test_an_address_that_reaches_a_public_one_passes(address: str) -> None:
    assert not blocked_address(address)


def answering(*addresses: str) -> Resolver:
    """A resolver that gives these addresses for any host."""

    async def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


async def test_a_host_with_any_blocked_address_is_refused() -> None:
    # A public first answer does not hide a private second one (no connection is made).
    with pytest.raises(OcrqError, match=r"hooks\.example is a private") as e:
        await resolve_checked(
            "https://hooks.example/x", allow_private=False, timeout_s=1,
            resolve=answering("8.8.8.8", "64:ff9b::7f00:1"),
        )  # fmt: skip
    assert e.value.code is ErrorCode.INVALID_REQUEST


async def test_a_checked_target_names_its_host_port_and_the_address_checked() -> None:
    target = await resolve_checked(
        "https://Hooks.Example:8443/x?y=1", allow_private=False, timeout_s=1,
        resolve=answering("8.8.4.4"),
    )  # fmt: skip
    assert (target.scheme, target.host, target.port, target.address) == (
        "https", "hooks.example", 8443, "8.8.4.4",
    )  # fmt: skip


@pytest.mark.parametrize(
    "url", ["ftp://hooks.example/x", "http:///x", "file:///etc/passwd", "http://h:0/", "nonsense"]
)
async def test_a_url_that_is_not_http_with_a_host_is_refused(url: str) -> None:
    with pytest.raises(OcrqError) as e:
        await resolve_checked(url, allow_private=True, timeout_s=1, resolve=answering("8.8.8.8"))
    assert e.value.code is ErrorCode.INVALID_REQUEST


async def test_a_resolver_that_hangs_is_cut_at_the_resolve_timeout() -> None:
    async def hanging(host: str, port: int) -> list[str]:
        await asyncio.sleep(60)
        return ["8.8.8.8"]

    started = time.monotonic()
    with pytest.raises(OcrqError, match="does not resolve") as e:
        await resolve_checked("http://slow.example/", allow_private=False, timeout_s=0.2,
                              resolve=hanging)  # fmt: skip
    assert e.value.code is ErrorCode.INVALID_REQUEST
    assert time.monotonic() - started < 5  # generous: the timeout is 0.2 s


async def test_a_lookup_never_needs_the_default_executor() -> None:
    # The producer decodes base64 on asyncio's default executor: a lookup must not queue
    # behind it. Here its only thread is held; a lookup (of a literal: no DNS) still answers.
    loop = asyncio.get_running_loop()
    held = threading.Event()
    default = ThreadPoolExecutor(1)
    loop.set_default_executor(default)
    busy = loop.run_in_executor(None, held.wait, 30)
    try:
        addresses = await asyncio.wait_for(system_resolve("127.0.0.1", 80), 10)
    finally:
        held.set()
        await busy
    assert addresses and set(addresses) == {"127.0.0.1"}


async def test_the_request_goes_to_the_checked_address_with_its_host_header() -> None:
    with receiving(answer(204)) as receiver:
        target = await resolve_checked(
            receiver.url(host="hooks.example"), allow_private=True, timeout_s=1,
            resolve=answering("127.0.0.1"),
        )  # fmt: skip
        async with httpx.AsyncClient() as client:
            reply = await send(client, "POST", target, content=b"{}", deadline_s=5,
                               max_bytes=1024)  # fmt: skip
    assert reply.status == 204 and not reply.truncated
    assert receiver.requests[0].head["host"] == f"hooks.example:{receiver.port}"


async def test_a_host_whose_first_address_refuses_is_reached_at_its_next_checked_one() -> None:
    with receiving(answer(204)) as receiver:  # on 127.0.0.1; nothing listens on 127.0.0.3
        target = await resolve_checked(
            receiver.url(host="hooks.example"), allow_private=True, timeout_s=1,
            resolve=answering("127.0.0.3", "127.0.0.3", "127.0.0.1"),
        )  # fmt: skip
        assert (target.address, target.others) == ("127.0.0.3", ("127.0.0.1",))
        async with httpx.AsyncClient() as client:
            reply = await send(client, "POST", target, content=b"{}", deadline_s=5,
                               max_bytes=1024)  # fmt: skip
    assert reply.status == 204 and [r.address for r in receiver.requests] == ["127.0.0.1"]


async def test_a_redirect_is_the_reply_and_never_followed() -> None:
    with receiving(answer(204)) as elsewhere:
        moved = answer(302, f"location: {elsewhere.url()}\r\n")
        with receiving(moved) as receiver:
            target = await resolve_checked(receiver.url(), allow_private=True, timeout_s=1)
            async with httpx.AsyncClient(follow_redirects=True) as client:  # even so
                reply = await send(client, "POST", target, deadline_s=5, max_bytes=1024)
    assert reply.status == 302 and reply.headers["location"] == elsewhere.url()
    assert elsewhere.requests == []


async def test_a_dripping_reply_ends_at_the_deadline() -> None:
    with receiving(drip(every_s=0.05)) as receiver:
        target = await resolve_checked(receiver.url(), allow_private=True, timeout_s=1)
        started = time.monotonic()
        async with httpx.AsyncClient(timeout=30) as client:
            with pytest.raises(OcrqError) as e:
                await send(client, "GET", target, deadline_s=1.0, max_bytes=1 << 20)
        took = time.monotonic() - started
    assert e.value.code is ErrorCode.TIMEOUT
    assert took < 1.0 + 1.0, took


async def test_a_reply_is_read_up_to_max_bytes_and_the_rest_dropped() -> None:
    with receiving(huge(400 * 1024 * 1024)) as receiver:
        target = await resolve_checked(receiver.url(), allow_private=True, timeout_s=1)
        async with httpx.AsyncClient() as client:
            reply = await send(client, "GET", target, deadline_s=30, max_bytes=64 * 1024)
    assert reply.status == 200 and reply.truncated and len(reply.body) == 64 * 1024


def certificate_for(name: str, folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate (its own CA) for one DNS name: (cert.pem, key.pem)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
def tls_listener(tmp_path: Path) -> Iterator[tuple[int, Path, list[str | None]]]:
    """A TLS server on 127.0.0.1 with a certificate for hooks.example: (port, CA, SNI seen)."""
    cert, key = certificate_for("hooks.example", tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    seen: list[str | None] = []
    server_ctx.sni_callback = lambda sock, name, ctx: seen.append(name)  # type: ignore[assignment,misc]

    with receiving(answer(204), tls=server_ctx) as receiver:
        yield receiver.port, cert, seen


async def test_tls_sends_the_host_as_sni_and_checks_the_certificate_against_it(
    tls_listener: tuple[int, Path, list[str | None]],
) -> None:
    port, ca, seen = tls_listener
    target = await resolve_checked(
        f"https://hooks.example:{port}/hook", allow_private=True, timeout_s=1,
        resolve=answering("127.0.0.1"),
    )  # fmt: skip
    async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=ca)) as client:
        reply = await send(client, "POST", target, content=b"{}", deadline_s=5, max_bytes=64)
    assert reply.status == 204 and seen == ["hooks.example"]


async def test_a_certificate_for_another_name_is_refused(
    tls_listener: tuple[int, Path, list[str | None]],
) -> None:
    port, ca, seen = tls_listener
    target = await resolve_checked(
        f"https://other.example:{port}/hook", allow_private=True, timeout_s=1,
        resolve=answering("127.0.0.1"),
    )  # fmt: skip
    async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=ca)) as client:
        with pytest.raises(OcrqError, match=r"(?i)certificate") as e:
            await send(client, "POST", target, content=b"{}", deadline_s=5, max_bytes=64)
    assert e.value.code is ErrorCode.UNAVAILABLE and seen == ["other.example"]


@pytest.mark.parametrize(
    "url", ["http://[64:ff9b::7f00:1]/hook", "http://[2002:7f00:1::]/hook", "http://[::7f00:1]/"]
)
async def test_a_callback_to_a_wrapped_loopback_address_is_refused_at_submission(url: str) -> None:
    # IP literals: the check needs no lookup, and nothing is sent.
    with pytest.raises(OcrqError, match=r"^callback_url: .* private.*OCRQ_WEBHOOK_ALLOW_PRIVATE"):
        await check_target(url, allow_private=False)


async def test_a_callback_that_is_not_http_keeps_its_submission_message() -> None:
    with pytest.raises(OcrqError, match=r"^callback_url: an http\(s\) URL with a host$") as e:
        await check_target("ftp://hooks.example/x", allow_private=False)
    assert e.value.code is ErrorCode.INVALID_REQUEST
