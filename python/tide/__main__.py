"""`python -m tide` runs the `tide` command."""

import sys

from tide.cli import main

sys.exit(main())
