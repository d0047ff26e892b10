"""`python -m ocrq.cli`: the `ocrq` console script without the installed entry point."""

import sys

from ocrq.cli.main import main

sys.exit(main())
