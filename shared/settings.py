"""The operator's settings: one Struct of groups, read once from ``OCRQ_*`` variables."""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from ocrq.shared.quotas import QuotaTable, parse_quotas

LANES: tuple[str, ...] = ("interactive", "batch")
GROUP = "workers"

# "local" is the embedded CPU engine, Tesseract ("tesseract" names it too); "rapidocr" the
# earlier local engine, kept as an option.
EngineName = Literal["local", "tesseract", "rapidocr", "vllm"]
RunnableEngine = Literal["local", "rapidocr", "vllm"]


class StoreSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The job store: where its Redis is, how to talk to it, how its keys are laid out."""

    redis_url: str = "redis://127.0.0.1:6379/0"
    # single: one server (redis_url). cluster: Redis/Valkey Cluster, redis_url names any node.
    # sentinel: follow the primary that redis_sentinels name (set redis_sentinels alone).
    redis_mode: Literal["single", "cluster", "sentinel"] = "single"
    redis_sentinels: str = ""  # "host:port,host:port"; set: sentinel mode
    redis_sentinel_master: str = "mymaster"
    # Each lane's stream is split into this many partitions ({pN} hash tags): > 1 spreads
    # the queue over a cluster's masters. Every producer and worker must agree on it.
    partitions: int = 1
    # Answer 202 only once this many replicas hold the job (WAIT); 0: as soon as the
    # primary has it. See docs/scaling.md for what it buys and costs.
    redis_wait_replicas: int = 0
    redis_wait_timeout_ms: int = 1000
    prefix: str = "ocrq:"
    # Redis socket timeouts; XREADGROUP BLOCK stays well below them.
    redis_socket_timeout_s: float = 10.0
    redis_connect_timeout_s: float = 5.0
    redis_max_connections: int = 64
    redis_block_ms: int = 2000


class ApiSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The producer's HTTP API: binding, limits, keys, retention."""

    host: str = "127.0.0.1"
    port: int = 8000
    producer_workers: int = 0  # uvicorn processes of `ocrq producer`; 0: one per core
    max_document_bytes: int = 10 * 1024 * 1024
    # A request body must arrive within this (10 MB at >= 90 kB/s); headers within 10 s
    # (producer/server.py). A trickling client cannot hold a connection for ever.
    body_timeout_s: float = 120.0
    api_keys: str = ""  # "tenant:key,tenant:key"; empty = open API
    max_backlog: int = 10_000  # per lane: XLEN, entries waiting plus entries in flight
    # Per tenant, over both lanes: jobs waiting or running. Past it that tenant alone gets
    # 429 quota_exceeded, so one tenant cannot fill a lane for every other. 0: no limit.
    max_tenant_backlog: int = 5_000
    result_ttl_s: int = 7 * 24 * 3600
    idempotency_ttl_s: int = 24 * 3600
    tenant_index_size: int = 10_000  # recent jobs per tenant that GET /v1/jobs can list
    # Host header allow-list, "name,name:port,…"; empty: the bind address and localhost
    # names. "*" admits any host (behind a proxy that checks it).
    allowed_hosts: str = ""
    max_wait_s: int = 60  # longest long-poll (?wait=) a client may ask for
    # OIDC bearer tokens beside the API keys: set the JWKS URL, the issuer and the audience.
    jwt_jwks_url: str = ""
    jwt_issuer: str = ""
    jwt_audience: str = ""
    jwt_tenant_claim: str = "tenant"  # the claim naming the caller's tenant
    jwt_leeway_s: float = 30.0  # clock skew allowed on exp/nbf/iat (at most 300)
    jwt_jwks_timeout_s: float = 5.0  # one fetch of the JWKS, connect to last byte
    jwt_jwks_cache_s: float = 300.0  # keys are fetched again after this long
    jwt_jwks_refresh_min_s: float = 10.0  # an unknown kid refetches at most this often

    @property
    def tenant_keys(self) -> dict[str, str]:
        """API key → tenant, parsed from ``api_keys``."""
        return parse_api_keys(self.api_keys)


class UploadSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Batch uploads (POST /v1/batches): their bounds and the ZIP spool."""

    # Batches (POST /v1/batches): per request, and for ZIP archives (a ZIP bomb is refused
    # whole before anything of it is read).
    max_batch_files: int = 5000
    max_batch_bytes: int = 1024 * 1024 * 1024
    max_zip_members: int = 5000
    max_zip_uncompressed_bytes: int = 2 * 1024 * 1024 * 1024
    max_zip_ratio: int = 100  # uncompressed : compressed, per member
    # Where a ZIP batch is spooled while read ("" : the system's temp folder); in k8s an
    # emptyDir whose sizeLimit must hold max_batch_bytes.
    spool_dir: str = ""
    # ZIP uploads spooled at once in spool_dir, by every producer process using it (the
    # volume holds spool_slots x max_batch_bytes); one more is 503 + Retry-After.
    # Unused while spool_dir is "".
    spool_slots: int = 4


class WebhookSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Callbacks: signing, which targets, and how hard to try."""

    # Webhooks: "tenant:whsec_…,…" signs each tenant's callbacks (Standard Webhooks secrets:
    # whsec_ + base64, anything else refused at start); private targets need allowing.
    webhook_secrets: str = ""
    webhook_allow_private: bool = False
    webhook_timeout_s: float = 10.0  # one attempt, connect to last byte of the reply
    webhook_retry_s: float = 3600.0  # retried with backoff this long, then failed
    webhook_max_attempts: int = 12  # and at most this many attempts, whichever ends first
    webhook_resolve_timeout_s: float = 5.0  # a callback host's DNS answer must come this fast


class WorkerSettings(msgspec.Struct, frozen=True, kw_only=True):
    """A worker: how it takes jobs from the lanes and renders their pages."""

    batch_share: int = 4  # a worker reads the batch lane at least once in this many reads
    # A burst's first jobs wait at most this for the rest of it; a lone job never waits.
    collect_window_ms: int = 100
    max_jobs: int = 256  # jobs in flight per worker, at most (pages follow the engine's slots)
    # Rendered pages not yet sent to the engine may take this much of /dev/shm (MiB).
    render_ahead_mb: int = 64
    visibility_timeout_ms: int = 300_000
    max_deliveries: int = 3
    consumer_prune_idle_s: int = 3600  # a group consumer owning nothing, unseen this long, goes
    drain_grace_s: float = 30.0
    shm_dir: str = "/dev/shm"
    raster_workers: int = 2
    default_dpi: int = 150
    default_max_pages: int = 200
    max_image_pixels: int = 80_000_000  # decompression-bomb guard
    max_image_side: int = 4096  # larger images are downscaled
    metrics_port: int = 9100  # 0: no HTTP port on the worker
    worker_name: str = ""  # empty: host-pid-random


class TenancySettings(msgspec.Struct, frozen=True, kw_only=True):
    """Many tenants on one fleet: fair share, quotas, usage, the audit trail (docs/tenancy.md)."""

    # Workers serve a lane's tenants in turn, by pages served (weights from OCRQ_QUOTAS);
    # false: first come, first served. Producers decide, per job; workers follow both.
    fair_share: bool = True
    quotas: str = ""  # per-tenant limits and weights: inline or a YAML/JSON file (shared/quotas)
    usage_retention_days: int = 400  # a tenant's usage per day is kept this long
    audit_retention_days: int = 90  # the audit stream keeps this many days (XADD MINID)
    admin_tenants: str = ""  # "tenant,tenant": their credentials may read GET /v1/audit

    @property
    def quota_table(self) -> QuotaTable:
        """OCRQ_QUOTAS parsed (checked once at load)."""
        return parse_quotas(self.quotas)

    @property
    def admins(self) -> frozenset[str]:
        """The tenants named in OCRQ_ADMIN_TENANTS."""
        return frozenset(t.strip() for t in self.admin_tenants.split(",") if t.strip())


class BlobSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The object store for documents, results and files (docs/scaling.md, "Object store").

    Unset ``blob_url``: every byte stays in Redis, as before the store existed.
    """

    # s3://bucket/prefix (any S3-compatible store; credentials from the AWS_* variables)
    # or file:///path (one machine). Empty: no store.
    blob_url: str = ""
    s3_endpoint: str = ""  # e.g. http://127.0.0.1:8333; empty: AWS itself
    s3_region: str = "us-east-1"
    # With a store, a document larger than this goes to the store and the job hash holds
    # its key; smaller ones stay inline in Redis (one write, no store round trip).
    inline_max_bytes: int = 256 * 1024
    # Documents by reference (POST /v1/uploads, {"source": …}): their own limits.
    max_source_bytes: int = 500 * 1024 * 1024
    max_source_pages: int = 2000
    upload_ttl_s: int = 3600  # a presigned upload URL's life; an unused upload is swept after
    # Key prefixes (inside blob_url) a tenant may name as an s3:// source or as a batch's
    # output_prefix, comma-separated; {tenant} is replaced by the caller's tenant.
    source_prefixes: str = "tenants/{tenant}/"
    # Hosts an https:// source may be fetched from is checked as webhook targets are
    # (no private addresses unless OCRQ_WEBHOOK_ALLOW_PRIVATE); the fetch's own limit:
    source_fetch_timeout_s: float = 300.0
    # "tenant:seconds,…": a tenant's results (Redis record and store objects) live this
    # long instead of OCRQ_RESULT_TTL_S.
    result_ttls: str = ""
    # One store call (a PUT, a GET's first byte, a LIST page) must answer within this.
    blob_timeout_s: float = 30.0
    # A worker that cannot reach the store waits this long (jobs wait, they do not fail),
    # then fails the job with `unavailable`, as an engine outage does.
    blob_outage_s: float = 900.0
    # Where a worker spools a document it reads from the store: documents up to
    # spool_shm_max_mb go to its /dev/shm job folder, larger ones to document_spool_dir
    # (local disk; "" : the system's temp folder).
    spool_shm_max_mb: int = 16
    document_spool_dir: str = ""
    # The sweeper (one per worker, at most one at a time per stack) removes store objects
    # whose job is gone: orphan documents of uploads that never queued, expired results.
    sweep_interval_s: float = 600.0
    sweep_grace_s: float = 3600.0  # an object younger than this is never swept

    @property
    def enabled(self) -> bool:
        """True when a store is configured."""
        return bool(self.blob_url)

    def result_ttl_of(self, tenant: str, default_s: int) -> int:
        """The tenant's result TTL (OCRQ_RESULT_TTLS), else ``default_s``."""
        return parse_result_ttls(self.result_ttls).get(tenant, default_s)


class OcrSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The OCR engine a worker calls (vLLM over HTTP, or a local CPU engine)."""

    engine: EngineName | None = None  # None: vllm when vllm_url is set, else local
    vllm_url: str = ""
    vllm_model: str = "baidu/Unlimited-OCR"
    vllm_api_key: str = ""
    profile: str = "unlimited-ocr"
    max_tokens: int = 0  # 0: the profile's own max_tokens
    # Engine requests (page groups) in flight per worker; 256 is vLLM's default max_num_seqs.
    # A local engine takes the lower of this and its processes.
    engine_concurrency: int = 256
    engine_timeout_s: float = 300.0
    # How a rendered page reaches the engine: "data" (base64 in the request, any host) or
    # "file" (a file:// URL under shm_dir, for an engine that shares the worker's /dev/shm).
    page_handoff: Literal["data", "file"] = "data"
    # An engine that is down or warming up (a cold start from zero) makes jobs wait this
    # long before they fail with engine_unavailable; see consumer/circuit.py.
    engine_outage_s: float = 900.0
    engine_retries: int = 5  # failures of one request while the engine says it is healthy
    engine_backoff_s: float = 1.0
    engine_backoff_max_s: float = 30.0
    local_workers: int = 0  # local OCR processes; 0: one per core
    local_languages: str = "eng+fra"  # Tesseract languages when a job names none
    # Lines Tesseract read weakly are read again by PP-OCRv6 and the surer reading kept
    # (consumer/engines/line_rereads.py); off: faster, more misread characters on receipts.
    local_reread: bool = True
    # Turn sideways and upside-down pages upright before any engine reads them.
    detect_orientation: bool = True
    # A page the local engine read with a mean confidence below this carries a warning.
    doubtful_confidence: float = 0.6

    @property
    def engine_name(self) -> RunnableEngine:
        """The engine to run: explicit, else vllm when a URL is configured, else local."""
        if self.engine == "tesseract":
            return "local"
        if self.engine is not None:
            return self.engine
        return "vllm" if self.vllm_url else "local"


class ExtractSettings(msgspec.Struct, frozen=True, kw_only=True):
    """After the text: fields against a schema (``extract``: an LLM server, or the page
    alone) and personal data masked (``redact``)."""

    # Any OpenAI-compatible server (vLLM answers with structured outputs, constrained to the
    # schema); empty: the worker's own key-value reading of the page (no LLM).
    extract_url: str = ""
    extract_model: str = ""  # empty: the first model the server lists (GET /v1/models)
    extract_api_key: str = ""
    extract_timeout_s: float = 120.0  # one request, connect to last byte
    extract_retries: int = 2  # replies that do not validate are asked for again this often
    max_extract_schema_bytes: int = 16_384  # the extract option's JSON, at most
    extract_max_chars: int = 60_000  # of the job's text sent to the LLM; the rest is cut
    # The redact option: countries whose national ids (and phone numbers written without a
    # country code) are looked for when a job names none (shared/redaction.py NATIONAL_IDS).
    redact_countries: str = "us,gb,de,fr,nl,es,it"


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """Every knob of ocrq, grouped by concern; each default works on a laptop.

    A field's environment variable is OCRQ_ + its name (``settings.worker.max_jobs`` is
    OCRQ_MAX_JOBS): names are unique across the groups, so each reads the same in code,
    in the environment and in the docs.
    """

    store: StoreSettings = msgspec.field(default_factory=StoreSettings)
    api: ApiSettings = msgspec.field(default_factory=ApiSettings)
    uploads: UploadSettings = msgspec.field(default_factory=UploadSettings)
    webhooks: WebhookSettings = msgspec.field(default_factory=WebhookSettings)
    worker: WorkerSettings = msgspec.field(default_factory=WorkerSettings)
    ocr: OcrSettings = msgspec.field(default_factory=OcrSettings)
    blobs: BlobSettings = msgspec.field(default_factory=BlobSettings)
    tenancy: TenancySettings = msgspec.field(default_factory=TenancySettings)
    extract: ExtractSettings = msgspec.field(default_factory=ExtractSettings)
    log_format: Literal["auto", "json", "console"] = "auto"
    log_level: str = "info"


def parse_tenant_pairs(raw: str, setting: str, what: str) -> list[tuple[str, str]]:
    """Parse ``tenant:value,tenant:value``; a malformed entry is an error naming the setting."""
    pairs: list[tuple[str, str]] = []
    for item in filter(None, (part.strip() for part in raw.split(","))):
        tenant, sep, value = item.partition(":")
        if not sep or not tenant or not value:
            raise ValueError(f"{setting} entry {item!r} is not tenant:{what}")
        pairs.append((tenant, value))
    return pairs


def parse_api_keys(raw: str) -> dict[str, str]:
    """``tenant:key,tenant:key`` (OCRQ_API_KEYS) as {key: tenant}."""
    return {key: tenant for tenant, key in parse_tenant_pairs(raw, "OCRQ_API_KEYS", "key")}


def parse_result_ttls(raw: str) -> dict[str, int]:
    """``tenant:seconds,…`` (OCRQ_RESULT_TTLS) as {tenant: seconds}; each at least 60."""
    ttls: dict[str, int] = {}
    for tenant, value in parse_tenant_pairs(raw, "OCRQ_RESULT_TTLS", "seconds"):
        if not value.isdigit() or int(value) < 60:
            raise ValueError(f"OCRQ_RESULT_TTLS: tenant {tenant!r} needs whole seconds >= 60")
        ttls[tenant] = int(value)
    return ttls


def parse_webhook_secrets(raw: str) -> dict[str, bytes]:
    """``tenant:whsec_…,…`` (OCRQ_WEBHOOK_SECRETS) as {tenant: HMAC key}.

    Standard Webhooks secrets: ``whsec_`` + base64, the key is the decoded bytes. Any other
    string is refused, never used as it is: a receiver's library would reject every
    signature made with it.
    """
    keys: dict[str, bytes] = {}
    for tenant, secret in parse_tenant_pairs(raw, "OCRQ_WEBHOOK_SECRETS", "secret"):
        try:
            keys[tenant] = webhook_key(secret)
        except ValueError as e:
            raise ValueError(f"OCRQ_WEBHOOK_SECRETS: the secret of tenant {tenant!r} {e}") from e
    return keys


WEBHOOK_SECRET_PREFIX = "whsec_"
MIN_WEBHOOK_KEY_BYTES = 16  # the spec asks for 24 to 64 random bytes; under 128 bits: refused


def webhook_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_…`` secret; ValueError saying what is wrong otherwise."""
    if not secret.startswith(WEBHOOK_SECRET_PREFIX):
        raise ValueError(
            "is not whsec_ + base64, the Standard Webhooks form "
            "(make one with: echo whsec_$(openssl rand -base64 32))"
        )
    encoded = secret.removeprefix(WEBHOOK_SECRET_PREFIX)
    try:  # padding may be left out, as the spec's libraries allow
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except binascii.Error as e:
        raise ValueError("is whsec_ followed by something that is not base64") from e
    if len(key) < MIN_WEBHOOK_KEY_BYTES:
        raise ValueError(
            f"decodes to {len(key)} bytes; at least {MIN_WEBHOOK_KEY_BYTES} are needed"
        )
    return key


GROUPS: dict[str, type[msgspec.Struct]] = {
    "store": StoreSettings,
    "api": ApiSettings,
    "uploads": UploadSettings,
    "webhooks": WebhookSettings,
    "worker": WorkerSettings,
    "ocr": OcrSettings,
    "blobs": BlobSettings,
    "tenancy": TenancySettings,
    "extract": ExtractSettings,
}
# Each setting's group ("" for the few at the top level), by field name: OCRQ_ + name.upper().
SETTING_GROUPS: dict[str, str] = {
    **{f.name: group for group, cls in GROUPS.items() for f in msgspec.structs.fields(cls)},
    **{f.name: "" for f in msgspec.structs.fields(Settings) if f.name not in GROUPS},
}


def setting_names() -> list[str]:
    """Every setting's field name; its environment variable is OCRQ_ + name.upper()."""
    return list(SETTING_GROUPS)


def nest(values: Mapping[str, Any]) -> dict[str, Any]:
    """Flat ``{field: value}`` as the groups' shape; an unknown name is a ValueError."""
    nested: dict[str, Any] = {}
    for name, value in values.items():
        if name not in SETTING_GROUPS:
            raise ValueError(f"no setting {name!r} (OCRQ_{name.upper()})")
        group = SETTING_GROUPS[name]
        (nested.setdefault(group, {}) if group else nested)[name] = value
    return nested


def load_settings(environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Read ``OCRQ_*`` variables once into Settings; explicit (flat) overrides win."""
    env = os.environ if environ is None else environ
    raw: dict[str, Any] = {}
    for name in SETTING_GROUPS:
        value = env.get(f"OCRQ_{name.upper()}")
        if value is not None and value != "":
            raw[name] = value
    raw.update({k: v for k, v in overrides.items() if v is not None})
    try:
        settings = msgspec.convert(nest(raw), Settings, strict=False)
    except msgspec.ValidationError as e:
        raise ValueError(f"invalid OCRQ_* setting: {e}") from e
    parse_api_keys(settings.api.api_keys)
    parse_webhook_secrets(settings.webhooks.webhook_secrets)
    parse_result_ttls(settings.blobs.result_ttls)
    parse_quotas(settings.tenancy.quotas)
    check_redis_shape(settings)
    check_blob_url(settings.blobs.blob_url)
    return settings


def replace_settings(settings: Settings, **changes: Any) -> Settings:
    """A copy of settings with some fields changed, named flat (``max_jobs=3``)."""
    groups: dict[str, Any] = {}
    for key, value in nest(changes).items():
        if key in GROUPS:
            groups[key] = msgspec.structs.replace(getattr(settings, key), **value)
        else:
            groups[key] = value
    return msgspec.structs.replace(settings, **groups)


def settings_of(**values: Any) -> Settings:
    """Settings from defaults and flat field values (``settings_of(engine="local")``)."""
    return replace_settings(Settings(), **values)


# The secrets k8s/base/secrets.yaml ships with: a process that finds one refuses to start.
PLACEHOLDER_SECRET = "change-me"


def refuse_placeholder_secrets(settings: Settings, *, allow_placeholders: bool = False) -> None:
    """Refuse to run with a shipped placeholder secret, naming the setting; `ocrq up` allows."""
    if allow_placeholders:
        return
    secrets = {
        "OCRQ_API_KEYS": settings.api.api_keys,
        "OCRQ_WEBHOOK_SECRETS": settings.webhooks.webhook_secrets,
        "OCRQ_REDIS_URL (its password)": settings.store.redis_url,
        "OCRQ_VLLM_API_KEY": settings.ocr.vllm_api_key,
    }
    # A whsec_ secret is base64: the placeholder may hide in its decoded key.
    hook_keys = b" ".join(parse_webhook_secrets(settings.webhooks.webhook_secrets).values())
    secrets["OCRQ_WEBHOOK_SECRETS"] += " " + hook_keys.decode("latin-1")
    for name, value in secrets.items():
        if PLACEHOLDER_SECRET in value.lower():
            raise ValueError(
                f"{name} holds the shipped placeholder {PLACEHOLDER_SECRET!r}: replace it with a "
                "real secret (openssl rand -hex 32) before starting"
            )


MAX_PARTITIONS = 256


def check_partitions(partitions: int) -> None:
    """Refuse a partition count out of range: at load, and in shared.keys for any other count."""
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise ValueError(f"OCRQ_PARTITIONS must be 1 to {MAX_PARTITIONS}, not {partitions}")


def check_redis_shape(settings: Settings) -> None:
    """Refuse Redis settings that cannot work together, naming the setting to fix."""
    check_partitions(settings.store.partitions)
    if settings.store.redis_mode == "sentinel" and not settings.store.redis_sentinels:
        raise ValueError("OCRQ_REDIS_MODE=sentinel needs OCRQ_REDIS_SENTINELS (host:port,…)")
    if settings.store.redis_mode == "cluster" and settings.store.redis_sentinels:
        raise ValueError("OCRQ_REDIS_SENTINELS is for OCRQ_REDIS_MODE=sentinel, not cluster")


def check_blob_url(url: str) -> None:
    """Refuse an OCRQ_BLOB_URL that names no usable store, saying what the forms are."""
    if not url:
        return
    if url.startswith("s3://") and len(url) > len("s3://") and not url[5:].startswith("/"):
        return
    if url.startswith("file:///"):
        return
    raise ValueError(f"OCRQ_BLOB_URL {url!r} is not s3://bucket[/prefix] or file:///absolute/path")
