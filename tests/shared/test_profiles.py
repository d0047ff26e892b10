"""Model profiles: the conventions each model expects, as data."""

from __future__ import annotations

import pytest

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.profiles import PROFILES, Profile, get_profile


def test_unlimited_ocr_follows_the_model_card() -> None:
    profile = get_profile("unlimited-ocr")

    assert (profile.prompt(1), profile.prompt(4)) == (
        "<image>document parsing.",
        "<image>Multi page parsing.",
    )
    assert profile.ngram_size == 35
    assert (profile.window_size(1), profile.window_size(2)) == (128, 1024)
    assert (profile.max_tokens(1), profile.max_tokens(16)) == (8192, 16384)
    assert profile.coord_scale == 1000
    assert profile.temperature == 0


def test_deepseek_ocr_uses_one_grounding_prompt_and_a_999_scale() -> None:
    profile = get_profile("deepseek-ocr")

    prompt = "<image>\n<|grounding|>Convert the document to markdown."
    assert (profile.prompt(1), profile.prompt(3)) == (prompt, prompt)
    assert profile.ngram_size == 30
    assert (profile.window_size(1), profile.window_size(3)) == (90, 90)
    assert (profile.max_tokens(1), profile.max_tokens(3)) == (8192, 8192)
    assert profile.coord_scale == 999


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_prompt_starts_with_exactly_one_image_marker(name: str) -> None:
    profile = PROFILES[name]

    for prompt in (profile.single_prompt, profile.multi_prompt):
        assert prompt.startswith("<image>")
        assert prompt.count("<image>") == 1


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_profiles_are_registered_under_their_own_name(name: str) -> None:
    assert PROFILES[name].name == name
    assert get_profile(name) is PROFILES[name]


def test_unknown_profile_is_an_invalid_request_naming_the_known_ones() -> None:
    with pytest.raises(OcrqError) as caught:
        get_profile("gpt-ocr")

    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert "gpt-ocr" in caught.value.message
    assert "unlimited-ocr" in caught.value.message


def test_a_new_profile_is_data_not_code() -> None:
    profile = Profile(
        name="generic",
        models=("acme/generic-ocr",),
        single_prompt="<image>OCR this page.",
        multi_prompt="<image>OCR these pages.",
        ngram_size=20,
        window_single=64,
        window_multi=256,
        coord_scale=1000,
        max_tokens_single=1024,
        max_tokens_multi=4096,
    )

    assert (profile.prompt(2), profile.window_size(2), profile.max_tokens(2)) == (
        "<image>OCR these pages.",
        256,
        4096,
    )
