"""PP-OCRv6's line model in 8-bit integers, made on this machine from the shipped one.

The rapidocr wheel ships the model in 32-bit floats; onnxruntime's static quantisation turns
its convolutions and its classifier into 8-bit integer kernels. Measured on real receipts
(BENCHMARKS.md, "Reading quality, ninth pass"): 75 → 43 µs a column of line image on one
core, and about as many character errors as the float model (1974 against 1987 and 2203
against 2196 on two sets of 40 receipts read through the engine). Two parts stay in floats
because in integers they read worse: the first convolution, which sees the pixels, and the
depthwise ones (one filter per channel; quantising every layer cost 3.8 % more errors).

Quantisation needs the range of every quantised tensor. Those were measured once on real
line crops (``bench/line_model_ranges.py``) and ship as ``line_model_ranges.json``, so
nothing here reads a document or downloads anything. The integer model is written once to
the temporary folder, under a name that changes with the source model, the ranges and
onnxruntime; a machine where it cannot be made reads with the float model and says why.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog

RANGES = Path(__file__).with_name("line_model_ranges.json")
RECIPE = "qoperator-u8s8-perchannel-1"  # changes the file name when the recipe changes
QUANTISED_OPS = ["Conv", "MatMul"]  # the ranges are measured for these (bench/line_model_ranges.py)
LOCK_WAIT_S = 60.0

log = structlog.get_logger("ocrq.engine")


def file_sha256(path: Path) -> str:
    """The file's SHA-256, hex (as consumer/documents.py checks a stored document's)."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def line_model(source: Path, ranges: Path = RANGES, folder: Path | None = None) -> Path:
    """The model to read lines with: the integer one (made on first use), else the source."""
    try:
        return int8_model(source, ranges, folder)
    except Exception as e:  # onnx missing, another onnxruntime, other ranges: floats still read
        log.warning("line_model_float", reason=f"{type(e).__name__}: {e}", model=str(source))
        return source


def int8_model(source: Path, ranges: Path = RANGES, folder: Path | None = None) -> Path:
    """The integer model for ``source``, made with ``ranges`` unless already in ``folder``."""
    import onnxruntime

    measured = json.loads(ranges.read_text())
    source_sha = file_sha256(source)
    if measured.get("model_sha256") != source_sha:
        raise ValueError(f"the ranges were measured on another model than {source.name}")
    key = "\n".join([source_sha, file_sha256(ranges), onnxruntime.__version__, RECIPE])
    name = f"ocrq-{source.stem}-int8-{os.getuid()}-{hashlib.sha1(key.encode()).hexdigest()[:12]}"
    target = Path(folder or tempfile.gettempdir()) / f"{name}.onnx"
    if not target.is_file():
        with _first_of_the_pool(target.with_suffix(".lock")):
            if not target.is_file():  # another process made it while this one waited
                _quantised(source, ranges, target)
    return target


@contextmanager
def _first_of_the_pool(lock: Path) -> Iterator[None]:
    """Hold ``lock`` while the model is made, so a pool's processes make it once (2 s and
    170 MB each); after LOCK_WAIT_S a process makes its own copy rather than wait on."""
    with lock.open("a") as held:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        yield  # closing the file releases the lock


def _quantised(source: Path, ranges: Path, target: Path) -> None:
    """Write the integer model to ``target`` atomically (worker processes may race here)."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    fd, staging = tempfile.mkstemp(prefix=".ocrq-line-model-", suffix=".onnx", dir=target.parent)
    os.close(fd)
    try:
        quantize_static(
            str(source),
            staging,
            calibration_data_reader=None,
            calibration_cache_path=str(ranges),
            quant_format=QuantFormat.QOperator,
            op_types_to_quantize=QUANTISED_OPS,
            nodes_to_quantize=quantised_nodes(source),
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
        )
        os.replace(staging, target)
    finally:
        Path(staging).unlink(missing_ok=True)


def quantised_nodes(source: Path) -> list[str]:
    """The nodes made integer: every full convolution but the first, and the classifier
    (the MatMul with the largest weight; the others are small or multiply activations)."""
    import onnx

    graph = onnx.load(str(source)).graph
    weights = {tensor.name: math.prod(tensor.dims) for tensor in graph.initializer}
    convs = [node for node in graph.node if node.op_type == "Conv"]
    full = [node.name for node in convs[1:] if _group(node) == 1]
    matmuls = [node for node in graph.node if node.op_type == "MatMul"]
    classifier = max(matmuls, key=lambda node: weights.get(node.input[1], 0))
    return [*full, classifier.name]


def _group(node: Any) -> int:
    return next((int(a.i) for a in node.attribute if a.name == "group"), 1)
