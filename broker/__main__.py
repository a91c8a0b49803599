"""`python -m broker` is `pylog`."""
import sys

from broker.tools.cli import main

sys.exit(main())
