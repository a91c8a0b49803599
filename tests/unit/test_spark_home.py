"""jobs/spark_home.py: the Spark home without pyspark's zip, and when a job's Spark uses it.

That Spark's Python processes then import pyspark from site-packages is checked in a real session:
tests/e2e/test_spark_batch.py::test_spark_python_workers_import_the_installed_pyspark.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jobs import spark_home


@pytest.fixture
def fake_pyspark(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    pyspark = tmp_path / "site-packages" / "pyspark"
    for folder in ("bin", "jars", "sbin", "python/lib", "sql"):
        (pyspark / folder).mkdir(parents=True)
    (pyspark / "python" / "lib" / "pyspark.zip").write_bytes(b"PK")
    (pyspark / "__init__.py").write_text("")
    monkeypatch.setattr(spark_home, "_pyspark_dir", lambda: pyspark)
    monkeypatch.setattr(spark_home, "FOLDER", tmp_path / "homes")
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    return pyspark


def test_the_home_links_everything_of_pyspark_but_its_zipped_python(fake_pyspark: Path) -> None:
    home = spark_home.path()
    assert home.parent == spark_home.FOLDER
    assert sorted(p.name for p in home.iterdir()) == ["__init__.py", "bin", "jars", "sbin", "sql"]
    assert (home / "jars").resolve() == fake_pyspark / "jars"
    assert not (home / "python" / "lib" / "pyspark.zip").exists()
    assert spark_home.path() == home                          # made once
    assert [p.name for p in spark_home.FOLDER.iterdir()] == [home.name]      # no half-made folder left


def test_use_points_spark_home_there_unless_the_user_chose_a_home_or_another_python(
        fake_pyspark: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = spark_home.use()
    assert home is not None and spark_home.current() == home
    assert spark_home.use() == home                           # inherited by a child process: still ours
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "their-spark"))
    assert spark_home.use() is None and spark_home.current() == tmp_path / "their-spark"
    monkeypatch.delenv("SPARK_HOME")
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3-elsewhere")   # may not have pyspark: needs the zip
    assert spark_home.use() is None and spark_home.current() == fake_pyspark
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert spark_home.use() == home


def test_a_folder_it_cannot_write_leaves_spark_in_pysparks_own_home(
        fake_pyspark: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setattr(spark_home, "FOLDER", blocked / "homes")       # cannot be made
    assert spark_home.use() is None
    assert spark_home.current() == fake_pyspark
