"""Importance scores and structural removal (pruning)."""
