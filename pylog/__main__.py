"""`python -m pylog` is the `pylog` command."""
import sys

from pylog.cli import main

sys.exit(main())
