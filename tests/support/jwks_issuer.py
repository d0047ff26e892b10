"""An OIDC issuer for tests: RSA and EC keys made at test time, a JWKS served over real HTTP
(a thread of http.server on a free port), and tokens signed with PyJWT."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ISSUER = "https://issuer.test/"
AUDIENCE = "ocrq-api"


class SigningKey:
    """A private key with its key id; ``jwk()`` is its public half as the JWKS lists it."""

    def __init__(self, kid: str, kind: str = "rsa") -> None:
        self.kid = kid
        if kind == "rsa":
            self.private: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self.alg, self.algorithm = "RS256", jwt.algorithms.RSAAlgorithm
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())
            self.alg, self.algorithm = "ES256", jwt.algorithms.ECAlgorithm

    def jwk(self) -> dict[str, Any]:
        """The public key as a JWK with its kid, alg and use."""
        public = json.loads(self.algorithm.to_jwk(self.private.public_key()))
        return {**public, "kid": self.kid, "alg": self.alg, "use": "sig"}

    def sign(self, claims: dict[str, Any] | None = None, **header: Any) -> str:
        """A token signed by this key: a valid one by default, ``claims`` override or add."""
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "user-1", "tenant": "acme"}
        body |= {"iat": now, "nbf": now, "exp": now + 300} | (claims or {})
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, self.private, self.alg, headers={"kid": self.kid, **header})


class JwksServer:
    """Serves ``keys`` at /jwks.json; ``delay_s`` makes every answer that slow; counts GETs."""

    def __init__(self, keys: list[SigningKey]) -> None:
        self.keys, self.delay_s, self.fetches = list(keys), 0.0, 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.fetches += 1
                time.sleep(owner.delay_s)
                body = json.dumps({"keys": [k.jwk() for k in owner.keys]}).encode()
                self.send_response(200 if self.path == "/jwks.json" else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The JWKS URL."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/jwks.json"

    def __enter__(self) -> JwksServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
