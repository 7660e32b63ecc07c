-- Per preempted run with a checkpoint: how long before the signal its last checkpoint came, and since the one before.
with
preempted as (
    select victim_job_id as job_id, victim_run as run, time, last_checkpoint_time, run_start
    from preemption_ledger
    where cluster = $c and last_checkpoint_time is not null
),
previous as (
    select
        p.job_id, p.run, p.time, p.last_checkpoint_time, p.run_start,
        max(c.time) as previous_checkpoint_time
    from preempted as p
    left join checkpoints as c
        on c.cluster = $c and c.job_id = p.job_id and c.kind = 'checkpoint'
        and c.time >= p.run_start and c.time < p.last_checkpoint_time
    group by p.job_id, p.run, p.time, p.last_checkpoint_time, p.run_start
)
select
    job_id,
    run,
    epoch(time) - epoch(last_checkpoint_time) as save_s,
    epoch(last_checkpoint_time) - epoch(coalesce(previous_checkpoint_time, run_start)) as since_previous_s,
    previous_checkpoint_time is null as first_in_run
from previous
