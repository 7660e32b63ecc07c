-- Spark SQL forms of the named functions that the shared SQL (sql/scans, sql/views) calls where the dialects differ:
-- DuckDB built-ins, and those of sql/functions/duckdb.sql; run once per Spark session, after sql/functions/shared.sql.

-- DuckDB's epoch(): seconds since 1970 as a double, microseconds kept; 1e6 is a double literal in Spark (1000000.0 would be a decimal).
CREATE OR REPLACE TEMPORARY FUNCTION epoch(ts TIMESTAMP) RETURNS DOUBLE RETURN unix_micros(ts) / 1e6;

-- The hours from start's to end's (both truncated to the hour), one apart; none when end's hour is before start's
-- (where sequence() would raise, DuckDB's generate_series() gives an empty list).
CREATE OR REPLACE TEMPORARY FUNCTION hour_series(start_ts TIMESTAMP, end_ts TIMESTAMP) RETURNS ARRAY<TIMESTAMP> RETURN
    CASE WHEN date_trunc('HOUR', start_ts) <= date_trunc('HOUR', end_ts)
        THEN sequence(date_trunc('HOUR', start_ts), date_trunc('HOUR', end_ts), INTERVAL 1 HOUR)
        ELSE CAST(array() AS ARRAY<TIMESTAMP>)
    END
