"""API handlers, one module per API family: decode → call a service → build a response.

`registry.API_TABLE` lists every API the broker implements with its version range; ApiVersions
advertises exactly that table.
"""
