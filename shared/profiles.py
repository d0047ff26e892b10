"""Model profiles: the prompt, sampling and coordinate conventions of each OCR model, as data.

A profile is chosen per job (``JobOptions.profile``) or per worker (``OCRQ_PROFILE``). The vLLM
engine has one code path; everything that differs between models lives in these records.

Prompts carry ONE leading ``<image>`` marker even when a request holds several images: vLLM's
chat front end counts the markers already in the text, rejects more markers than images, and
adds the missing ones itself, so one marker is right for 1 page and for 16.
"""

from __future__ import annotations

import msgspec

from ocrq.shared.errors import ErrorCode, OcrqError


class Profile(msgspec.Struct, frozen=True, kw_only=True):
    """How to prompt one OCR model and how to read its coordinates."""

    name: str
    models: tuple[str, ...]  # the served model names this profile is written for
    single_prompt: str  # one image per request (crop/"gundam" mode on DeepSeek-OCR models)
    multi_prompt: str  # several images per request (base mode)
    ngram_size: int  # no-repeat n-gram length for the server's logits processor
    window_single: int  # how far back the processor looks, one image
    window_multi: int  # ... several images
    coord_scale: int  # grounding boxes are integers in 0..coord_scale of the page
    max_tokens_single: int
    max_tokens_multi: int
    temperature: float = 0.0
    # Tokens the n-gram processor may repeat freely (table cells repeat by nature); empty: none.
    whitelist_token_ids: tuple[int, ...] = ()

    def prompt(self, page_count: int) -> str:
        """The prompt text for a request of ``page_count`` images."""
        return self.single_prompt if page_count == 1 else self.multi_prompt

    def window_size(self, page_count: int) -> int:
        """The n-gram window for a request of ``page_count`` images."""
        return self.window_single if page_count == 1 else self.window_multi

    def max_tokens(self, page_count: int) -> int:
        """The completion budget for a request of ``page_count`` images."""
        return self.max_tokens_single if page_count == 1 else self.max_tokens_multi


PROFILES: dict[str, Profile] = {
    # baidu/Unlimited-OCR: DeepSeek-OCR's vision stack, prompts from the model card.
    "unlimited-ocr": Profile(
        name="unlimited-ocr",
        models=("baidu/Unlimited-OCR",),
        single_prompt="<image>document parsing.",
        multi_prompt="<image>Multi page parsing.",
        ngram_size=35,
        window_single=128,
        window_multi=1024,
        coord_scale=1000,
        max_tokens_single=8192,
        max_tokens_multi=16384,
    ),
    # deepseek-ai/DeepSeek-OCR: vLLM recipe settings; <td>/</td> may repeat in tables.
    "deepseek-ocr": Profile(
        name="deepseek-ocr",
        models=("deepseek-ai/DeepSeek-OCR",),
        single_prompt="<image>\n<|grounding|>Convert the document to markdown.",
        multi_prompt="<image>\n<|grounding|>Convert the document to markdown.",
        ngram_size=30,
        window_single=90,
        window_multi=90,
        coord_scale=999,
        max_tokens_single=8192,
        max_tokens_multi=8192,
        whitelist_token_ids=(128821, 128822),
    ),
}


def get_profile(name: str) -> Profile:
    """The profile called ``name``; an unknown name is an invalid request."""
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise OcrqError(
            ErrorCode.INVALID_REQUEST, f"unknown profile {name!r}; known profiles: {known}"
        ) from None


def check_profile(name: str, engine: str, model: str) -> Profile:
    """The profile a job asks for, if this deployment's engine can run it; else a 400.

    The local CPU engine runs no model profile. On vLLM, a profile written for another model
    is refused when the served model is one a profile knows (a custom model name is not
    second-guessed).
    """
    profile = get_profile(name)
    if engine != "vllm":
        raise OcrqError(
            ErrorCode.INVALID_REQUEST,
            f"profile {name!r} needs the vLLM engine; this deployment runs the {engine} engine "
            "(OCRQ_ENGINE), which has no model profiles: leave profile unset",
        )
    known = {m for p in PROFILES.values() for m in p.models}
    if model in known and model not in profile.models:
        fits = [p.name for p in PROFILES.values() if model in p.models]
        raise OcrqError(
            ErrorCode.INVALID_REQUEST,
            f"profile {name!r} is for {', '.join(profile.models)}; the engine serves {model} "
            f"(profile {', '.join(fits)})",
        )
    return profile


# The Tesseract languages a job may name for the local engine's Latin-script pages
# (consumer/engines/tesseract.py); Cyrillic and Japanese pages get rus and jpn by themselves.
LOCAL_LANGUAGES: tuple[str, ...] = ("deu", "eng", "fra")


def check_languages(languages: str, engine: str) -> None:
    """A 400 unless this deployment's engine takes languages and ships every one asked for."""
    if engine != "local":
        raise OcrqError(
            ErrorCode.INVALID_REQUEST,
            f"languages: only the local (Tesseract) engine takes languages; this deployment "
            f"runs the {engine} engine (OCRQ_ENGINE): leave languages unset",
        )
    missing = [code for code in languages.split("+") if code not in LOCAL_LANGUAGES]
    if missing:
        raise OcrqError(
            ErrorCode.INVALID_REQUEST,
            f"languages: {', '.join(missing)} not available; the local engine reads "
            f"{', '.join(LOCAL_LANGUAGES)} (join several with +, e.g. eng+fra)",
        )
