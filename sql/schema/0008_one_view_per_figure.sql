-- Figures that were one view per grouping are one view each now: idle_hoarding (with a level column) for
-- idle_hoarding_jobs/_users/_teams, net_benefit (with a period column) for net_benefit_daily/_weekly. The
-- next `analyze` stores the new ones; the old tables would otherwise keep their last rows forever.
DROP TABLE IF EXISTS idle_hoarding_jobs;
DROP TABLE IF EXISTS idle_hoarding_users;
DROP TABLE IF EXISTS idle_hoarding_teams;
DROP TABLE IF EXISTS net_benefit_daily;
DROP TABLE IF EXISTS net_benefit_weekly;
