-- Named functions of the shared SQL whose one definition both engines run: as written on Spark, as a macro
-- of the same name, arguments and body on DuckDB (warehouse.define_functions). A figure's rule that SQL and
-- Python both apply lives here, once.

-- A GPU sample is idle when nothing ran on it: busy = 0 under the zero rule (jobstats), else busy below the threshold.
CREATE OR REPLACE TEMPORARY FUNCTION is_idle(busy DOUBLE, zero_rule BOOLEAN, busy_below DOUBLE) RETURNS BOOLEAN RETURN
    CASE WHEN zero_rule THEN busy = 0 ELSE busy < busy_below END;
