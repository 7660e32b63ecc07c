-- Spark SQL stand-ins for the DuckDB built-ins that the shared SQL (sql/scans, sql/views) calls; run once per Spark session.

-- DuckDB's epoch(): seconds since 1970 as a double, microseconds kept; 1e6 is a double literal in Spark (1000000.0 would be a decimal).
CREATE OR REPLACE TEMPORARY FUNCTION epoch(ts TIMESTAMP) RETURNS DOUBLE RETURN unix_micros(ts) / 1e6
