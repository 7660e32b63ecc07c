"""Adapters from each source's own format to the raw contract (sql/schema)."""
