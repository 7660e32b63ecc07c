-- Q2's trend of the critical+high share (readiness_evidence): unknown (value null, with what is missing) while the data holds fewer weeks than analytics.trend_min_weeks.
select value, missing
from readiness_evidence
where cluster = $c and measure = 'high_share_weekly_slope_abs'
