"""What users run: `pylog job NAME`. Each job is a module here with `run(cfg: JobConfig) -> int`."""

JOBS = ("stream_to_delta", "stream_to_topic", "batch_load", "reprocess", "maintain")
