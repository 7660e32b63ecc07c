-- The replay's reproduction of victims (jobs preempted at least once) beside preemptions, lost GPU-hours and the
-- high-priority wait, and the range of each replayed figure over replays with jittered inputs (JSON: figure ->
-- [low, high]; NULL where no interval was computed). Rows written before this migration hold NULL.
ALTER TABLE replay_validation ADD COLUMN observed_victims BIGINT;
ALTER TABLE replay_validation ADD COLUMN replayed_victims BIGINT;
ALTER TABLE replay_validation ADD COLUMN victims_error DOUBLE;
ALTER TABLE replay_validation ADD COLUMN replayed_intervals VARCHAR;
