-- DuckDB forms of the named functions that the shared SQL (sql/scans, sql/views) calls where the dialects differ;
-- sql/functions/spark.sql defines the same names for Spark. Created in every connection that runs the shared SQL.

-- The hours from start's to end's (both truncated to the hour), one apart; none when end's hour is before start's.
CREATE OR REPLACE TEMP MACRO hour_series(start_ts, end_ts) AS
    generate_series(date_trunc('hour', start_ts), date_trunc('hour', end_ts), INTERVAL 1 HOUR);

-- One row per element of a list, as Spark's explode() (DuckDB calls it unnest); no row for an empty list or NULL.
CREATE OR REPLACE TEMP MACRO explode(items) AS unnest(items);
