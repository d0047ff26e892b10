"""Webhooks: where a callback may go (no SSRF), and how its body is signed.

Signatures follow Standard Webhooks (standardwebhooks.com): the headers ``webhook-id``,
``webhook-timestamp`` (Unix seconds) and ``webhook-signature`` = ``v1,`` + base64 of
HMAC-SHA256, keyed with the tenant's secret, over ``{webhook-id}.{webhook-timestamp}.{body}``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import ipaddress
import socket
from urllib.parse import urlsplit

from ocrq.shared.errors import ErrorCode, OcrqError


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header of a body."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def blocked(address: str) -> bool:
    """True for addresses a callback must not reach: loopback, private, link-local, …"""
    ip = ipaddress.ip_address(address)
    return not ip.is_global or ip.is_multicast


async def check_target(url: str, allow_private: bool) -> None:
    """Refuse a callback URL that is not http(s), or whose host resolves to a private address.

    Checked at submission and again before every delivery (DNS may have changed).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OcrqError(ErrorCode.INVALID_REQUEST, "callback_url: an http(s) URL with a host")
    if allow_private:
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        infos = await asyncio.to_thread(socket.getaddrinfo, parts.hostname, port)
    except (OSError, ValueError) as e:
        raise OcrqError(
            ErrorCode.INVALID_REQUEST, f"callback_url: {parts.hostname} does not resolve"
        ) from e
    if any(blocked(str(info[4][0])) for info in infos):
        raise OcrqError(
            ErrorCode.INVALID_REQUEST,
            f"callback_url: {parts.hostname} is a private, loopback or link-local address "
            "(OCRQ_WEBHOOK_ALLOW_PRIVATE allows it)",
        )
