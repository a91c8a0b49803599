"""The Spark home pylog's local Spark runs from: pyspark's own, minus the zipped copy of pyspark.

Every Python process Spark starts (each worker module's daemon, the forked workers, the data source planners,
the streaming source runner) gets `$SPARK_HOME/python/lib/pyspark.zip` first on its PYTHONPATH. A pip-installed
pyspark ships that zip without bytecode, so each of those processes compiles pyspark's modules from source
before doing anything: `import pyspark.daemon` costs 0.67 s of CPU from the zip and 0.24 s from the installed
package, and a job starts five to six daemons and a dozen workers (bench/RESULTS.md, "Spark's Python processes").

`path()` is a folder beside the class archive (.cache/spark-home/) whose entries are links to the installed
pyspark's (bin, jars, sbin, ...) except `python/`: Spark's launch scripts, jars and class path are unchanged, and
its Python processes, finding no zip, import the very same pyspark from site-packages with its cached bytecode.
`use()` points SPARK_HOME there for this process's Spark, only when the user set no SPARK_HOME and Spark's
Python is this interpreter (another interpreter may lack pyspark and need the zip). Executors of a cluster use
their own workers' Spark home: nothing changes there.
"""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / ".cache" / "spark-home"
LEFT_OUT = {"python", "__pycache__"}      # the zipped pyspark (and py4j), and bytecode of the package itself


def _pyspark_dir() -> Path:
    import pyspark
    return Path(pyspark.__file__).resolve().parent


def path() -> Path:
    """The folder, made on first use (links only, made atomically); named for the pyspark installation."""
    import pyspark
    source = _pyspark_dir()
    key = hashlib.sha1(str(source).encode()).hexdigest()[:12]
    home = FOLDER / f"spark-{pyspark.__version__}-{key}"
    if home.is_dir():
        return home
    FOLDER.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=FOLDER, prefix=".making-"))
    for entry in source.iterdir():
        if entry.name not in LEFT_OUT:
            (tmp / entry.name).symlink_to(entry)
    try:
        tmp.rename(home)
    except OSError:                 # another process made it first: theirs is the same
        for link in tmp.iterdir():
            link.unlink()
        tmp.rmdir()
    return home


def applies() -> bool:
    """Whether `use()` points SPARK_HOME at path(): the user set no SPARK_HOME of their own (ours, inherited from
    a parent process, is fine) and Spark's Python is this interpreter."""
    current = os.environ.get("SPARK_HOME")
    if current and Path(current).parent != FOLDER:
        return False
    python = os.environ.get("PYSPARK_PYTHON")
    return python is None or Path(python).resolve() == Path(sys.executable).resolve()


def use() -> Path | None:
    """Point this process's SPARK_HOME at path() when it applies (before its first SparkSession); the folder."""
    if not applies():
        return None
    try:
        home = path()
    except OSError:                 # a read-only install: Spark then runs from pyspark's own folder, as before
        return None
    os.environ["SPARK_HOME"] = str(home)
    return home


def current() -> Path:
    """The Spark home this process's Spark starts from once use() was called: path() when it applies, else
    SPARK_HOME, else the installed pyspark's folder."""
    if applies():
        try:
            return path()
        except OSError:
            pass
    given = os.environ.get("SPARK_HOME")
    return Path(given) if given else _pyspark_dir()
