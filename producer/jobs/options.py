"""Checks of job options: page ranges, and what depends on this deployment (page cap,
profile, languages, callback, output prefix)."""

from __future__ import annotations

from ocrq.producer.jobs.sources import NO_STORE, allowed_prefixes, check_key_shape
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.field_schema import check_extract_schema
from ocrq.shared.page_ranges import check_ranges
from ocrq.shared.profiles import check_languages, check_profile
from ocrq.shared.redaction import check_redact
from ocrq.shared.schemas import JobOptions
from ocrq.shared.settings import Settings, parse_webhook_secrets
from ocrq.shared.webhooks import check_target


async def check_options(
    options: JobOptions, tenant: str, settings: Settings, *, by_reference: bool = False
) -> None:
    """Refuse now (400) what would fail later: a schema to extract that is no JSON Schema
    (or too big), too many pages, a profile the engine cannot
    run, a callback that cannot be signed or must not be reached, pages that name none, an
    output prefix the tenant may not write (403).

    ``by_reference``: a document by reference (``source``), which may have up to
    OCRQ_MAX_SOURCE_PAGES pages instead of OCRQ_DEFAULT_MAX_PAGES.
    """
    if options.pages is not None:
        check_ranges(options.pages)
    if options.extract is not None:
        check_extract_schema(options.extract, settings.extract.max_extract_schema_bytes)
    check_redact(options, settings.extract.redact_countries)
    cap, name = settings.worker.default_max_pages, "OCRQ_DEFAULT_MAX_PAGES"
    if by_reference:
        cap, name = settings.blobs.max_source_pages, "OCRQ_MAX_SOURCE_PAGES"
    if options.max_pages is not None and options.max_pages > cap:
        raise OcrqError(
            ErrorCode.INVALID_REQUEST, f"max_pages: at most {cap} (the workers' limit, {name})"
        )
    if options.output_prefix is not None:
        check_output_prefix(options.output_prefix, tenant, settings)
    if options.profile is not None:
        check_profile(options.profile, settings.ocr.engine_name, settings.ocr.vllm_model)
    if options.languages is not None:
        check_languages(options.languages, settings.ocr.engine_name)
    if options.callback_url is not None:
        if tenant not in parse_webhook_secrets(settings.webhooks.webhook_secrets):
            raise OcrqError(
                ErrorCode.INVALID_REQUEST,
                "callback_url: no webhook secret is configured for your tenant "
                "(OCRQ_WEBHOOK_SECRETS), so a callback could not be signed",
            )
        await check_target(
            options.callback_url,
            settings.webhooks.webhook_allow_private,
            settings.webhooks.webhook_resolve_timeout_s,
        )


def check_output_prefix(prefix: str, tenant: str, settings: Settings) -> None:
    """The store prefix results are also written under: one of the tenant's prefixes
    (OCRQ_SOURCE_PREFIXES, relative to OCRQ_BLOB_URL); 400 without a store, 403 outside."""
    if not settings.blobs.enabled:
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"output_prefix: {NO_STORE}")
    check_key_shape(prefix.rstrip("/"), "output_prefix")
    allowed = allowed_prefixes(settings, tenant)
    if not any((prefix.rstrip("/") + "/").startswith(p) for p in allowed):
        places = ", ".join(allowed) or "nowhere (OCRQ_SOURCE_PREFIXES is empty)"
        raise OcrqError(
            ErrorCode.FORBIDDEN,
            f"output_prefix: your tenant may write under {places} only (keys relative to "
            "OCRQ_BLOB_URL)",
        )
