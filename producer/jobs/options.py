"""Checks of job options: page ranges, and what depends on this deployment (page cap,
profile, languages, callback)."""

from __future__ import annotations

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.page_ranges import check_ranges
from ocrq.shared.profiles import check_languages, check_profile
from ocrq.shared.schemas import JobOptions
from ocrq.shared.settings import Settings, parse_webhook_secrets
from ocrq.shared.webhooks import check_target


async def check_options(options: JobOptions, tenant: str, settings: Settings) -> None:
    """Refuse now (400) what would fail later: too many pages, a profile the engine cannot
    run, a callback that cannot be signed or must not be reached, pages that name none."""
    if options.pages is not None:
        check_ranges(options.pages)
    cap = settings.worker.default_max_pages
    if options.max_pages is not None and options.max_pages > cap:
        raise OcrqError(
            ErrorCode.INVALID_REQUEST,
            f"max_pages: at most {cap} (the workers' limit, OCRQ_DEFAULT_MAX_PAGES)",
        )
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
