-- Each victim's run age at the preemption signal: less its save time when it saved a final checkpoint, else less the grace time.
select run_age_s - case when epoch(time) - epoch(last_checkpoint_time) < $g then epoch(time) - epoch(last_checkpoint_time) else $g end as signal_age
from preemption_ledger
where cluster = $c and time >= $t0 and time < $t1
