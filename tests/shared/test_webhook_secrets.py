"""Webhook secrets in the Standard Webhooks form: whsec_ + base64, the key is the decoded bytes."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook

from ocrq.shared.settings import load_settings, parse_webhook_secrets
from ocrq.shared.webhooks import signature

KEY = b"0123456789abcdef0123456789abcdef"
SECRET = "whsec_" + base64.b64encode(KEY).decode()


def test_a_whsec_secret_gives_the_decoded_bytes_as_the_key() -> None:
    assert parse_webhook_secrets(f"t:{SECRET}") == {"t": KEY}


def test_a_secret_without_its_base64_padding_is_accepted_as_the_spec_libraries_do() -> None:
    key = b"twenty-four bytes long!!"[:23]  # 23 bytes: base64 with one '=' of padding
    unpadded = "whsec_" + base64.b64encode(key).decode().rstrip("=")
    assert parse_webhook_secrets(f"t:{unpadded}") == {"t": key}


@pytest.mark.parametrize(
    "secret",
    [
        "plain-old-secret-0123456789",  # what ocrq took before: refused, never used as is
        "whsec_not*base64*at*all",
        "whsec_" + base64.b64encode(b"short").decode(),  # 5 bytes: too weak a key
        "whsec_",
    ],
)
def test_a_secret_not_in_the_standard_form_is_refused_at_start_naming_the_setting(
    secret: str,
) -> None:
    with pytest.raises(ValueError, match="OCRQ_WEBHOOK_SECRETS") as e:
        load_settings({"OCRQ_WEBHOOK_SECRETS": f"ok:{SECRET},acme:{secret}"})
    assert "'acme'" in str(e.value)
    if len(secret) > len("whsec_"):
        assert secret.removeprefix("whsec_") not in str(e.value)  # the secret is not logged


def test_the_signature_is_the_one_the_standardwebhooks_library_makes() -> None:
    body = b'{"type": "job.finished"}'
    stamp = 1_700_000_000
    ours = signature(KEY, "job_abc", stamp, body)
    theirs = Webhook(SECRET).sign("job_abc", datetime.fromtimestamp(stamp, UTC), body.decode())
    assert ours == theirs


def test_nothing_is_signed_with_an_empty_key() -> None:
    with pytest.raises(ValueError, match="empty key"):
        signature(b"", "job_abc", 1_700_000_000, b"{}")
