"""`python -m sluice_tools.demosite`: serve the demo site (see cli.py)."""

import sys

from .cli import main

sys.exit(main())
