"""``python -m fakevllm``: run the fake vLLM server."""

import sys

from ocrq.fakevllm.server import main

sys.exit(main())
