-- The window's preemptions as the policy inference reads them: tiers, the victim's run age, the preemptor.
select victim_tier, preemptor_tier, run_age_s, preemptor_job_id, preemptor_run
from preemption_ledger
where cluster = $c and time >= $t0 and time < $t1
