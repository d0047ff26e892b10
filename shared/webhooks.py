"""Webhooks: where a callback may go (no SSRF), and how its body is signed.

Signatures follow Standard Webhooks (standardwebhooks.com): the headers ``webhook-id``,
``webhook-timestamp`` (Unix seconds) and ``webhook-signature`` = ``v1,`` + base64 of
HMAC-SHA256 over ``{webhook-id}.{webhook-timestamp}.{body}``, keyed with the tenant's secret
as the spec has it: the secret is ``whsec_`` + base64, the key is the decoded bytes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from ocrq.shared.egress import BlockedTarget, resolve_checked, split_url
from ocrq.shared.errors import ErrorCode, OcrqError


def signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header of a body, signed with a tenant's decoded key."""
    if not key:
        raise ValueError("a webhook is never signed with an empty key")
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


async def check_target(url: str, allow_private: bool, timeout_s: float = 5.0) -> None:
    """Refuse a callback URL that is not http(s), or whose host resolves to a private address.

    Checked at submission; every delivery resolves and checks it again and connects to the
    address it checked (consumer/webhooks.py).
    """
    try:
        if allow_private:
            split_url(url)
            return
        await resolve_checked(url, allow_private=False, timeout_s=timeout_s)
    except BlockedTarget as e:
        raise OcrqError(
            ErrorCode.INVALID_REQUEST,
            f"callback_url: {e} (OCRQ_WEBHOOK_ALLOW_PRIVATE allows it)",
        ) from e
    except OcrqError as e:
        raise OcrqError(e.code, f"callback_url: {e}") from e
