"""The SparkSession a job runs in: local by default, quiet logs, the venv's Python for workers."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from jobs.config import JobConfig


def build_session(cfg: JobConfig, app_name: str):  # -> SparkSession (pyspark imported lazily)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log4j = Path("conf/log4j2.properties")
    from pyspark.sql import SparkSession

    b = (SparkSession.builder.appName(app_name).master(cfg.get("spark.master", "local[2]"))
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", cfg.get("spark.sql.shuffle.partitions", "4"))
         .config("spark.sql.session.timeZone", "UTC"))
    if log4j.exists():
        b = b.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j.absolute()}")
    for k, v in cfg.values.items():
        if k.startswith("spark.") and k != "spark.master":
            b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel(cfg.get("spark.log.level", "WARN"))
    return spark
