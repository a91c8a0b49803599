"""`python -m pylog` is the `pylog` command."""
from pylog.cli import run

run()
