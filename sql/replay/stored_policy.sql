-- The scheduler_policy snapshot in force over most of the window, with the count of other snapshots read in it.
-- The scheduler_policy snapshot in force over most of the window: each snapshot holds from its reading to the
-- next one's (the first one also before it), and the one whose span covers most of the window is taken; with the
-- number of other snapshots read inside the window (a policy that changed there).
with snapshots as (
    select distinct valid_from from scheduler_policy where cluster = $c
),
spans as (
    select
        valid_from,
        case when valid_from = min(valid_from) over () then cast($t0 as timestamptz)
            else greatest(valid_from, cast($t0 as timestamptz)) end as span_start,
        least(coalesce(lead(valid_from) over (order by valid_from), cast($t1 as timestamptz)),
            cast($t1 as timestamptz)) as span_end
    from snapshots
),
chosen as (
    select valid_from from spans
    order by greatest(epoch(span_end) - epoch(span_start), 0) desc, valid_from desc
    limit 1
)
select
    p.valid_from, p.scheduler, p.scope, p.subject, p.setting, p.value, p.raw,
    (select count(*) from snapshots as s where s.valid_from > $t0 and s.valid_from < $t1
        and s.valid_from <> c.valid_from) as changes_inside
from scheduler_policy as p
inner join chosen as c on p.valid_from = c.valid_from
where p.cluster = $c
order by p.scope, p.subject, p.setting
