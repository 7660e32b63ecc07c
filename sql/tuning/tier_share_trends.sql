-- Each pool's trend of its high-tier share of GPU-hours over at least two weeks, beside the allowed share and slope, and the weeks a trend needs before Q2 reads it (analytics.trend_min_weeks).
select t.pool, t.high_gpu_hour_share_first as first, t.high_gpu_hour_share_last as last, t.high_gpu_hour_share_slope as slope, p.high_tier_share_max as share_max, p.high_tier_slope_max as slope_max, t.weeks, p.trend_min_weeks as min_weeks
from scope_creep_trend as t cross join analytics_params as p
where t.cluster = $c and t.weeks >= 2
