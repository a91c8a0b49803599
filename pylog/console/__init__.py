"""`pylog console`: a small read-mostly web console over the Kafka protocol (topics, messages, groups and their
lag, the Delta tables of jobs, brokers).

The modules: `app` (the Flask app, its routes and error pages), `access` (binding and token rules, pure),
`cluster_view` (what the pages read from the cluster, through confluent-kafka and pylog.tools' helpers),
`messages` (browsing positions and how keys and values are shown, pure), `offset_reset` (the guarded reset of a
group's offsets), `lag_history` (the bounded lag samples behind the chart), `jobs_view` (the jobs' Delta tables),
`errors` (the failures a page shows). `pylog/console_cmd.py` is the command.
"""
