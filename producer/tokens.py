"""OIDC bearer tokens: JWTs verified against an issuer's JWKS, the tenant taken from a claim.

The keys are fetched over HTTP (one httpx client, a timeout on every fetch), cached for
``OCRQ_JWT_JWKS_CACHE_S`` and fetched again when a token names a key id the cache lacks (a
rotation), at most once per ``OCRQ_JWT_JWKS_REFRESH_MIN_S``, so a stream of made-up key ids
cannot turn the producer into a load generator against the issuer. Fetching is async and
happens before the route (``prefetch``); the check itself (``identity``) is CPU only.

Only asymmetric algorithms are accepted, and each key only with its own algorithm family:
``alg: none`` and an HS256 token "signed" with a public key are refused before any check.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import jwt
import msgspec
import structlog

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.settings import ApiSettings

log = structlog.get_logger("ocrq.tokens")

# Asymmetric only; the JWK's own type must also match (PyJWK checks kty against alg).
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
MAX_LEEWAY_S = 300.0


class Identity(msgspec.Struct, frozen=True):
    """Who a verified token speaks for: the tenant claim, and its subject (for the logs)."""

    tenant: str
    subject: str


def looks_like_jwt(token: str) -> bool:
    """True for a compact JWS (three base64url parts, a JSON header): not an API key."""
    return token.startswith("eyJ") and token.count(".") == 2


class TokenVerifier:
    """Checks bearer JWTs against the issuer's keys, fetched and cached from its JWKS URL."""

    def __init__(self, api: ApiSettings, client: httpx.AsyncClient | None = None) -> None:
        if not (api.jwt_issuer and api.jwt_audience):
            raise ValueError("OCRQ_JWT_JWKS_URL needs OCRQ_JWT_ISSUER and OCRQ_JWT_AUDIENCE")
        if not 0 <= api.jwt_leeway_s <= MAX_LEEWAY_S:
            raise ValueError(f"OCRQ_JWT_LEEWAY_S must lie in 0..{MAX_LEEWAY_S:g}")
        self.api = api
        self._client = client or httpx.AsyncClient(
            timeout=api.jwt_jwks_timeout_s, follow_redirects=False
        )
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at = -1e18  # monotonic time of the last successful fetch
        self._tried_at = -1e18  # of the last attempt, successful or not
        self._lock = asyncio.Lock()

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()

    async def prefetch(self, token: str) -> None:
        """Make sure the keys a token needs are in the cache, fetching the JWKS if due.

        Never raises: a token whose key cannot be had fails in ``identity`` with a 401.
        """
        kid = _kid(token)
        now = time.monotonic()
        stale = now - self._fetched_at > self.api.jwt_jwks_cache_s
        unknown = kid is not None and kid not in self._keys
        if not (stale or unknown):
            return
        async with self._lock:  # one fetch at a time; the others use its answer
            now = time.monotonic()
            if kid in self._keys and now - self._fetched_at <= self.api.jwt_jwks_cache_s:
                return
            if now - self._tried_at < self.api.jwt_jwks_refresh_min_s and not stale:
                return
            self._tried_at = now
            await self._fetch()

    async def _fetch(self) -> None:
        """GET the JWKS; a failure keeps the keys already known (an issuer's outage)."""
        try:
            reply = await self._client.get(self.api.jwt_jwks_url)
            reply.raise_for_status()
            keys = jwt.PyJWKSet.from_dict(reply.json()).keys
        except (httpx.HTTPError, ValueError, jwt.PyJWTError) as e:
            log.warning("jwks_fetch_failed", url=self.api.jwt_jwks_url, error=str(e))
            return
        self._keys = {key.key_id: key for key in keys if key.key_id}
        self._fetched_at = time.monotonic()

    def identity(self, token: str) -> Identity:
        """The verified token's tenant and subject; 401 token_expired or token_invalid."""
        header = _header(token)
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise _invalid(f"tokens signed with {alg!r} are not accepted")
        key = self._keys.get(str(header.get("kid", "")))
        if key is None:
            raise _invalid("the token's key (kid) is not in the issuer's key set")
        claims = self._decode(token, key, alg)
        tenant = claims.get(self.api.jwt_tenant_claim)
        if not isinstance(tenant, str) or not tenant:
            raise _invalid(f"the token has no {self.api.jwt_tenant_claim!r} claim")
        return Identity(tenant, str(claims.get("sub", "")))

    def _decode(self, token: str, key: jwt.PyJWK, alg: str) -> dict[str, Any]:
        if key.algorithm_name not in ALGORITHMS or (
            key.algorithm_name[:2] != alg[:2] and {key.algorithm_name[:2], alg[:2]} != {"RS", "PS"}
        ):
            raise _invalid("the token's algorithm does not match its key")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=self.api.jwt_audience,
                issuer=self.api.jwt_issuer,
                leeway=self.api.jwt_leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except (jwt.ExpiredSignatureError, jwt.ImmatureSignatureError) as e:
            raise OcrqError(ErrorCode.TOKEN_EXPIRED, f"the token is not valid now: {e}") from e
        except jwt.PyJWTError as e:
            raise _invalid(f"the token was refused: {e}") from e
        return claims


def _header(token: str) -> dict[str, Any]:
    try:
        return dict(jwt.get_unverified_header(token))
    except jwt.PyJWTError as e:
        raise _invalid("the bearer token is not a well-formed JWT") from e


def _kid(token: str) -> str | None:
    try:
        kid = jwt.get_unverified_header(token).get("kid")
    except jwt.PyJWTError:
        return None
    return str(kid) if kid else None


def _invalid(message: str) -> OcrqError:
    return OcrqError(ErrorCode.TOKEN_INVALID, message)
