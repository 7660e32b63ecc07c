-- The pools with preemptions in the window.
select distinct pool
from preemption_ledger
where cluster = $c and time >= $t0 and time < $t1 and pool is not null
order by 1
