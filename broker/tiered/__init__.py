"""Tiered storage (KIP-405): closed segments in an object store, served back for old offsets."""
