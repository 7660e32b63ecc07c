-- Per team, the preemption hazard of its runs by age band (preemption_hazard), oldest band last: what the checkpoint-interval advice reads.
select team, band, age_from_s, age_to_s, preemptions, exposure_h, exposure_gpu_h
from preemption_hazard
where cluster = $c and level = 'team'
order by team, band
