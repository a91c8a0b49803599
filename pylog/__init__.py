"""The `pylog` command: the top layer. It dispatches to the broker, the operator tools and the jobs;
nothing in the product imports it."""
