"""What users run: `pylog job NAME`. Each job is a module here with `run(cfg: JobConfig) -> int`."""

JOBS = ("stream_to_delta", "batch_load", "reprocess", "maintain")
