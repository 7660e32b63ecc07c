-- GPUs a team's high-tier runs held on average in a pool over the window.
select sum(gpus * effective_s) / $span as mean_gpus
from stg_runs
where cluster = $c and pool = $p and team = $t and tier in ('critical', 'high') and start_time >= $t0 and start_time < $t1
