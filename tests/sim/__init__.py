"""Deterministic simulation of the replication state machine (issue #20 §2): see cluster.py."""
