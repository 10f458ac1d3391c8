"""`python -m sluice.demosite`: serve the demo site (see cli.py)."""

import sys

from .cli import main

sys.exit(main())
