"""Cluster mode's replication: partition roles, leader-side ISR and high watermark, replica fetchers."""
