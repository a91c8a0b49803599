"""jobs/class_archive.py: when a job's driver gets the Spark class archive, and where the archive is."""
from __future__ import annotations

from pathlib import Path

import pytest

from jobs import class_archive, spark_home


def test_the_driver_gets_the_archive_only_when_it_exists_and_no_conf_folder_is_on_its_class_path(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    archive = tmp_path / "spark.jsa"
    monkeypatch.setattr(class_archive, "archive_path", lambda: archive)
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    assert class_archive.jvm_options() == ""                 # not built: nothing to use
    archive.write_bytes(b"x")
    assert class_archive.jvm_options() == f"-XX:SharedArchiveFile={archive} -Xlog:cds*=off"
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))      # a non-empty folder first on the class path
    assert class_archive.jvm_options() == ""


def test_the_archive_is_named_for_the_pyspark_installation_and_the_jdk(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    import pyspark
    monkeypatch.delenv("SPARK_HOME", raising=False)      # a Spark session of this process may have set ours
    first = class_archive.archive_path()
    assert first is not None and first.parent == class_archive.FOLDER
    assert first.name.startswith(f"spark-{pyspark.__version__}-") and first.suffix == ".jsa"
    other = tmp_path / "pyspark"
    (other / "jars").mkdir(parents=True)
    monkeypatch.setattr(spark_home, "FOLDER", tmp_path / "homes")
    monkeypatch.setattr(pyspark, "__file__", str(other / "__init__.py"))     # another venv's pyspark
    assert class_archive.archive_path() != first
