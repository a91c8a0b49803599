"""The SparkSession a job runs in: local by default, quiet logs, the venv's Python for workers.

Registers the `pylog` source and the `pylog-delta` sink explicitly, so jobs work from any directory
and any install mode (Spark's own discovery of `pyspark_*` modules depends on how the package was
installed). Spark and py4j log at WARN unless `spark.log.level` says otherwise.
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from jobs.config import JobConfig
from jobs.signals import STOPPER, shield_spark_jvm

LOG4J = Path(__file__).resolve().parents[1] / "conf" / "log4j2.properties"


def build_session(cfg: JobConfig, app_name: str) -> Any:  # -> SparkSession (pyspark imported lazily)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    shield_spark_jvm()
    from pyspark.sql import SparkSession

    b = (SparkSession.builder.appName(app_name).master(cfg.get("spark.master", "local[2]"))
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", cfg.get("spark.sql.shuffle.partitions", "4"))
         .config("spark.sql.session.timeZone", "UTC"))
    if LOG4J.exists():
        b = b.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG4J}")
    for k, v in cfg.values.items():
        if k.startswith("spark.") and k not in ("spark.master", "spark.log.level"):
            b = b.config(k, v)
    from connectors.delta_sink import DeltaSinkDataSource
    from sparklog import register

    with STOPPER.starting_spark():
        spark = b.getOrCreate()
        spark.sparkContext.setLogLevel(cfg.get("spark.log.level", "WARN"))
        register(spark)
        spark.dataSource.register(DeltaSinkDataSource)
    STOPPER.attach(spark)
    return spark
