"""Fuzzing harnesses of pylog (issue 15): coverage-guided atheris targets, a live-broker mutator and
their shared request model. Test tooling, not product: see fuzz/README.md."""
