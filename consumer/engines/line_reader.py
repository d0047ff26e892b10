"""A second recogniser for single text lines: PP-OCRv6's, run by onnxruntime.

The model (PP-OCRv6 small, Apache-2.0, Baidu's PaddleOCR) is the file the ``rapidocr`` wheel
ships; only the file is used, so nothing of that package is imported and nothing is
downloaded. It runs quantised to 8-bit integers, made from that file on first use
(consumer/engines/line_model.py). It reads a line image as characters with a probability
each (a CTC model), and where each character stands along the line, which gives the words
their boxes.

Measured on real receipts and pages (BENCHMARKS.md, "Reading quality"): it misreads far
fewer characters than Tesseract's fast models on weak lines (dot-matrix and thermal print,
faint scans), but it drops many of the spaces between words, which Tesseract gets right;
consumer/engines/line_rereads.py takes the characters of one and the spaces of both.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from ocrq.consumer.engines.line_model import line_model

MODEL_FILE = "PP-OCRv6_rec_small.onnx"
LINE_HEIGHT = 48  # the model's input height in pixels
MIN_WIDTH = 64  # narrower lines are padded to this (PaddleOCR pads to 320: no better here)


def model_path() -> Path:
    """Where the rapidocr wheel put the model, found without importing that package."""
    spec = importlib.util.find_spec("rapidocr")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the rapidocr package (PP-OCRv6 models) is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "models" / MODEL_FILE
    if not path.is_file():
        raise RuntimeError(f"{path} is missing from the rapidocr package")
    return path


@dataclass(frozen=True)
class LineText:
    """What the model read on one line image: each character, its probability and place."""

    chars: list[str]
    probabilities: list[float]
    centres: list[float]  # each character's centre, in pixels of the line image given

    @property
    def text(self) -> str:
        """The line as read."""
        return "".join(self.chars)

    @property
    def confidence(self) -> float:
        """The mean probability of its characters (0 when it read nothing)."""
        return sum(self.probabilities) / len(self.probabilities) if self.chars else 0.0


class LineReader:
    """One onnxruntime session on one thread (the pool's processes are the parallelism), on
    the integer model (consumer/engines/line_model.py) unless given another."""

    def __init__(self, path: Path | None = None) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.path = path or line_model(model_path())
        self._session = onnxruntime.InferenceSession(
            str(self.path), options, providers=["CPUExecutionProvider"]
        )
        meta = self._session.get_modelmeta().custom_metadata_map
        # CTC: class 0 is the blank; the model's characters, then the space.
        self._classes = ["", *meta["character"].splitlines(), " "]
        self._input = self._session.get_inputs()[0].name

    def read(self, line: Image.Image) -> LineText:
        """Read one line image (any size; scaled to the model's height)."""
        pixels, scale = _prepared(line)
        scores: Any = self._session.run(None, {self._input: pixels[np.newaxis]})[0][0]
        return self._decoded(scores, pixels.shape[2] / scores.shape[0] / scale)

    def _decoded(self, scores: Any, pixels_per_step: float) -> LineText:
        """Greedy CTC: the best class per step, repeats and blanks dropped."""
        best = scores.argmax(axis=1)
        probability = scores.max(axis=1)
        chars, probabilities, centres = [], [], []
        for step, label in enumerate(best):
            if label == 0 or (step and best[step - 1] == label):
                continue
            chars.append(self._classes[label] if label < len(self._classes) else "")
            probabilities.append(float(probability[step]))
            centres.append((step + 0.5) * pixels_per_step)
        return LineText(chars, probabilities, centres)


def _prepared(line: Image.Image) -> tuple[Any, float]:
    """The model's input (3 by 48 by width, BGR scaled to -1..1, padded) and the scale used."""
    scale = LINE_HEIGHT / max(line.height, 1)
    width = max(1, math.ceil(line.width * scale))
    resized = line.convert("RGB").resize((width, LINE_HEIGHT), Image.Resampling.BILINEAR)
    # PaddleOCR's models were trained on OpenCV's BGR images.
    values = np.asarray(resized, dtype=np.float32)[:, :, ::-1].transpose(2, 0, 1)
    pixels = np.zeros((3, LINE_HEIGHT, max(width, MIN_WIDTH)), dtype=np.float32)
    pixels[:, :, :width] = values / 127.5 - 1.0
    return pixels, scale
