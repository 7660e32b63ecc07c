-- The scheduler_policy snapshot in force at the window's start (the last one read at or before it, else the
-- first one read), with the number of other snapshots read inside the window (a policy that changed there).
with snapshots as (
    select distinct valid_from from scheduler_policy where cluster = $c
),
chosen as (
    select coalesce(
        (select max(valid_from) from snapshots where valid_from <= $t0),
        (select min(valid_from) from snapshots)
    ) as valid_from
)
select
    p.valid_from, p.scheduler, p.scope, p.subject, p.setting, p.value, p.raw,
    (select count(*) from snapshots as s where s.valid_from > $t0 and s.valid_from < $t1
        and s.valid_from <> c.valid_from) as changes_inside
from scheduler_policy as p
inner join chosen as c on p.valid_from = c.valid_from
where p.cluster = $c
order by p.scope, p.subject, p.setting
