"""Callers → tenants: API keys (only hashes kept, constant-time comparisons) and, beside
them, OIDC bearer JWTs (producer/tokens.py) when OCRQ_JWT_JWKS_URL is set."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from ocrq.producer.tokens import TokenVerifier, looks_like_jwt
from ocrq.shared.errors import ErrorCode, OcrqError

OPEN_TENANT = "public"


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
        if self.open:
            return OPEN_TENANT
        presented = presented_key(headers)
        if presented is None:
            raise OcrqError(ErrorCode.UNAUTHORIZED, "an API key or a bearer token is required")
        if self.tokens is not None and looks_like_jwt(presented):
            return self.tokens.identity(presented).tenant
        digest = key_digest(presented)
        match = None
        for known, tenant in self._digests:
            # Compare against every key so timing does not reveal which one matched.
            if hmac.compare_digest(known, digest):
                match = tenant
        if match is None:
            raise OcrqError(ErrorCode.UNAUTHORIZED, "the API key is not valid")
        return match


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request carries, if any."""
    auth = headers.get("authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    key = headers.get("x-api-key", "").strip()
    return key or None
