-- Each pool's latest GPU count and GPUs per node before the window ends.
select pool, arg_max(gpus, valid_from) as gpus, arg_max(gpus_per_node, valid_from) as gpn
from pools
where cluster = $c and valid_from < $t1
group by pool
order by pool
