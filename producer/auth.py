"""Callers → tenants: API keys (only hashes kept, constant-time comparisons) and, beside
them, OIDC bearer JWTs (producer/tokens.py) when OCRQ_JWT_JWKS_URL is set."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from ocrq.producer.tokens import Identity, TokenVerifier, looks_like_jwt
from ocrq.shared.errors import ErrorCode, OcrqError

OPEN_TENANT = "public"
OPEN_SUBJECT = "open"  # the one caller of an open API
KEY_ID_HEX = 12  # hex digits of a key's SHA-256 that name it in the audit trail


def key_digest(key: str) -> bytes:
    """SHA-256 of an API key (what the authenticator stores)."""
    return hashlib.sha256(key.encode()).digest()


class Authenticator:
    """Maps a presented key or token to its tenant; open (one public tenant) when neither
    keys nor a JWKS are set."""

    def __init__(self, keys: Mapping[str, str], tokens: TokenVerifier | None = None) -> None:
        self._digests = [(key_digest(key), tenant) for key, tenant in keys.items()]
        self.tokens = tokens

    @property
    def open(self) -> bool:
        """True when no keys and no JWKS are configured: every caller is the public tenant."""
        return not self._digests and self.tokens is None

    def tenant(self, headers: Mapping[str, str]) -> str:
        """The caller's tenant from ``Authorization: Bearer`` or ``X-API-Key``; 401 otherwise."""
        return self.identity(headers).tenant

    def identity(self, headers: Mapping[str, str]) -> Identity:
        """The caller's tenant and who within it: ``key:<12 hex of the key's SHA-256>``
        (never the key), ``jwt:<sub>``, or ``open``; 401 as ``tenant``."""
        if self.open:
            return Identity(OPEN_TENANT, OPEN_SUBJECT)
        presented = presented_key(headers)
        if presented is None:
            raise OcrqError(ErrorCode.UNAUTHORIZED, "an API key or a bearer token is required")
        if self.tokens is not None and looks_like_jwt(presented):
            verified = self.tokens.identity(presented)
            return Identity(verified.tenant, f"jwt:{verified.subject}")
        digest = key_digest(presented)
        match = None
        for known, tenant in self._digests:
            # Compare against every key so timing does not reveal which one matched.
            if hmac.compare_digest(known, digest):
                match = tenant
        if match is None:
            raise OcrqError(ErrorCode.UNAUTHORIZED, "the API key is not valid")
        return Identity(match, f"key:{digest.hex()[:KEY_ID_HEX]}")


def credential_kind(headers: Mapping[str, str]) -> str:
    """What a request presented, named without its value: ``jwt``, ``api_key`` or ``none``."""
    presented = presented_key(headers)
    if presented is None:
        return "none"
    return "jwt" if looks_like_jwt(presented) else "api_key"


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request carries, if any."""
    auth = headers.get("authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    key = headers.get("x-api-key", "").strip()
    return key or None
