"""Measure the tensor ranges that quantise PP-OCRv6's line model (consumer/engines/line_model.py).

The receipts are read by the local engine as a job would read them; every line image that
the second recogniser is handed is kept, and a fixed random sample of them runs through the
float model while onnxruntime records each tensor's least and greatest value (MinMax). The
result is written where the engine reads it, with the source model's SHA-256:

    python -m bench.line_model_ranges --receipts /tmp/sroie-dev

(SROIE 0-49, made by ``python -m bench.sroie_truth --range 0-49``; the held-out receipts
and the corpus are not used here, so that they still judge the model.)
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    quantize_static,
)
from PIL import Image

from ocrq.consumer.engines import tesseract
from ocrq.consumer.engines.line_model import QUANTISED_OPS, RANGES, file_sha256
from ocrq.consumer.engines.line_reader import LineReader, LineText, _prepared, model_path
from ocrq.consumer.raster import normalise_image

# Line images calibrated on. All 1034 of SROIE 0-49 widened the ranges and read a little worse:
# 288 character errors on tests/consumer/test_line_model.py's 85 lines, 271-278 with samples
# of 100 (three seeds), 268 with the float model.
SAMPLE = 100
SEED = 0


class RecordingReader(LineReader):
    """The float line reader, keeping every model input it is handed."""

    def __init__(self) -> None:
        super().__init__(model_path())
        self.inputs: list[Any] = []

    def read(self, line: Image.Image) -> LineText:
        """Read the line, and keep what the model was given."""
        self.inputs.append(_prepared(line)[0])
        return super().read(line)


def line_inputs(receipts: Path) -> list[Any]:
    """Every line image the re-read hands the model, over the receipts' pages."""
    tesseract.load_worker("eng+fra")
    recorder = RecordingReader()
    tesseract._line_reader = recorder
    with tempfile.TemporaryDirectory() as tmp:
        for source in sorted(receipts.glob("*.jpg")):
            page = normalise_image(str(source), tmp, 200_000_000, 4096)
            tesseract.read_page(page.path, 1, page.width, page.height, "eng+fra")
    return recorder.inputs


class Sample(CalibrationDataReader):
    """onnxruntime's calibration reader over a list of inputs."""

    def __init__(self, inputs: list[Any]) -> None:
        self._inputs: Iterator[Any] = iter(inputs)

    def get_next(self) -> dict[str, Any] | None:  # type: ignore[override]
        """The next input, None at the end."""
        pixels = next(self._inputs, None)
        return None if pixels is None else {"x": pixels[None]}


def measure(inputs: list[Any], target: Path) -> None:
    """Calibrate on a fixed sample of the inputs and write the ranges to ``target``."""
    sample = random.Random(SEED).sample(inputs, min(SAMPLE, len(inputs)))
    with tempfile.TemporaryDirectory() as tmp:
        quantize_static(
            str(model_path()),
            f"{tmp}/model.onnx",
            Sample(sample),
            quant_format=QuantFormat.QOperator,
            op_types_to_quantize=QUANTISED_OPS,
            per_channel=True,
            calibrate_method=CalibrationMethod.MinMax,
            calibration_cache_path=f"{tmp}/ranges.json",
        )
        ranges = json.loads(Path(f"{tmp}/ranges.json").read_text())
    ranges["model_sha256"] = file_sha256(model_path())
    ranges["measured_on"] = (
        f"{len(sample)} of {len(inputs)} line images (bench/line_model_ranges.py)"
    )
    target.write_text(json.dumps(ranges, indent=0, sort_keys=True) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--receipts", type=Path, required=True, help="folder of *.jpg receipts")
    parser.add_argument("--to", type=Path, default=RANGES)
    args = parser.parse_args()
    inputs = line_inputs(args.receipts)
    measure(inputs, args.to)
    print(f"{len(inputs)} line images read; ranges written to {args.to}")


if __name__ == "__main__":
    main()
