-- Median and p90 wait of the high tiers' jobs submitted in the window, to their first start or the window's end.
with waits as (
    select least(coalesce(epoch(r.start_time), epoch(cast($t1 as timestamptz))), epoch(cast($t1 as timestamptz))) - epoch(j.submit_time) as wait
    from jobs as j
    left join job_runs as r on r.cluster = j.cluster and r.job_id = j.job_id and r.run = 1
    where j.cluster = $c and j.submit_time >= $t0 and j.submit_time < $t1 and j.tier in ('critical', 'high')
)
select median(wait) as wait, quantile_cont(wait, 0.9) as wait_p90 from waits
