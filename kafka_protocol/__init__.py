"""pylog's Kafka protocol: API keys, codecs, record batches, errors; the package the broker, the Spark data source
and the tools all speak through (over kio's generated schemas).

Importing it first loads kio without hypothesis. kio registers hypothesis strategies for its types whenever
hypothesis is importable (kio.static._phantom), and importing hypothesis (with pytest and trio) costs about 0.3 s
of CPU: in a development install every broker, tool, job and Spark worker process paid it, for nothing. Under
pytest (which our property tests use, with kio's strategies) kio is imported as it is.
"""
from __future__ import annotations

import sys


def _load_kio_without_hypothesis() -> None:
    if "kio.static._phantom" in sys.modules or "hypothesis" in sys.modules or "pytest" in sys.modules:
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]   # `import hypothesis...` raises ImportError
    try:
        import kio.static._phantom  # noqa: F401
    finally:
        del sys.modules["hypothesis"]


_load_kio_without_hypothesis()
