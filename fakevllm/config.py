"""The fake server's configuration and the model-protocol profiles it can enforce."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

ProtocolName = Literal["unlimited-ocr", "deepseek-ocr"]

Rate = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
Count = Annotated[int, msgspec.Meta(ge=0)]
Seconds = Annotated[float, msgspec.Meta(ge=0.0)]


class Profile(msgspec.Struct, frozen=True, kw_only=True):
    """What one model protocol expects from a request and how its answers look."""

    ngram_size: int
    window_size_single: int  # vllm_xargs.window_size for a one-image request
    window_size_multi: int  # ... and for a request with several images
    coord_max: int  # grounding coordinates run from 0 to this value
    crop_single_only: bool  # True: only a one-image request keeps crop ("gundam") mode


PROFILES: dict[str, Profile] = {
    "unlimited-ocr": Profile(
        ngram_size=35,
        window_size_single=128,
        window_size_multi=1024,
        coord_max=1000,
        crop_single_only=True,
    ),
    "deepseek-ocr": Profile(
        ngram_size=30,
        window_size_single=90,
        window_size_multi=90,
        coord_max=999,
        crop_single_only=False,
    ),
}


class FakeConfig(msgspec.Struct, kw_only=True):
    """Everything the fake vLLM does, including the failures it injects.

    The ``*_next`` counters are consumed one per chat-completion request, so a test can
    script an outage exactly; the ``*_rate`` fields draw from a generator seeded by ``seed``.
    """

    model: str = "baidu/Unlimited-OCR"
    protocol: ProtocolName = "unlimited-ocr"
    latency_s: Seconds = 0.0  # per image, spent while holding a concurrency slot
    max_concurrency: Annotated[int, msgspec.Meta(ge=1)] = 256  # vLLM's default max_num_seqs
    queue_timeout_s: Seconds = 600.0  # a request queued longer than this gets a 503
    max_model_len: Annotated[int, msgspec.Meta(ge=1)] = 32768
    fail_rate: Rate = 0.0
    fail_next: Count = 0
    fail_status: Literal[500, 503] = 503
    hang_rate: Rate = 0.0
    hang_next: Count = 0
    hang_s: Seconds = 3600.0  # a hung request answers 503 after this, unless the client left
    drop_rate: Rate = 0.0
    drop_next: Count = 0
    slow_start_s: Seconds = 0.0  # counted from start, or from the /_config call that sets it
    truncate_next: Count = 0
    invalid_json_next: Count = 0  # structured-output replies that do not follow the schema
    seed: int = 0
    max_recorded: Count = 1000  # request bodies kept for GET /_requests (oldest dropped)
    # vLLM's --allowed-local-media-path: file:// images are read only from under this
    # folder; "" refuses them all, as vLLM does by default.
    allowed_local_media_path: str = ""

    @property
    def profile(self) -> Profile:
        """The protocol profile this configuration enforces."""
        return PROFILES[self.protocol]


def config_fields() -> tuple[msgspec.structs.FieldInfo, ...]:
    """The fields of FakeConfig, in declaration order (for CLI flags and the runner)."""
    return msgspec.structs.fields(FakeConfig)


def flag_name(field: str) -> str:
    """The CLI flag for a config field: latency_s -> --latency-s."""
    return "--" + field.replace("_", "-")


def updated_config(current: FakeConfig, changes: dict[str, Any]) -> FakeConfig:
    """A new config with ``changes`` applied; raises msgspec.ValidationError on a bad field."""
    known = {f.name for f in config_fields()}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise msgspec.ValidationError(f"unknown config field(s): {', '.join(unknown)}")
    merged = msgspec.to_builtins(current)
    merged.update(changes)
    return msgspec.convert(merged, FakeConfig)
