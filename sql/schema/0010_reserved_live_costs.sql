-- Placeholder on the `actions` branch only: version 10 belongs to the live cost
-- (branch `livecost`, 0010_live_costs.sql). Migrations are numbered 1..N, so
-- this file holds the number until that branch is merged; drop it then.
SELECT 1;
