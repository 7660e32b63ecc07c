"""Figures computed from the warehouse, the cluster simulator, tuning and alert rules."""
