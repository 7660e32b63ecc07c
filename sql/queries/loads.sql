-- The 50 most recent loads: which source wrote how many rows, how many were unchanged or quarantined.
SELECT started_at, source, loaded, unchanged, quarantined,
       round(epoch(finished_at) - epoch(started_at), 2) AS seconds, load_id
FROM _loads
ORDER BY started_at DESC
LIMIT 50
