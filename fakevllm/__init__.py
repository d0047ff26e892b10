"""A protocol-faithful fake of vLLM serving an OCR model, for tests and benchmarks."""
