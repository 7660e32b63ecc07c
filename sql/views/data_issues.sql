-- What the data lacks or had to be corrected, per row and the source (collector) that loaded it: runs overlapping an earlier run of the same job (clipped, never double-counted), runs whose job is missing (left out), preemptions whose run start, pool or preemptor is unknown (in the ledger, with the figures that need it unknown), preemption links whose victim's runs were never collected (not in the ledger), claims of an Event its victim's state did not bear out, and preemptors an Event names that cannot have been one.
with

runs as (
    select * from job_runs
),

staged as (
    select * from stg_runs
),

all_staged as (
    -- every run with a job, also those no source wrote (a KAI PodGroup's eviction before its pods were seen)
    select * from stg_job_runs
),

ledger as (
    select * from preemption_ledger
),

links as (
    select * from preemption_links
),

overlapping as (
    select
        s.cluster,
        r.source,
        s.job_id,
        s.run,
        'run overlaps an earlier run of its job' as issue,
        'counted from ' || cast(s.effective_start as varchar) || ' instead of ' || cast(s.start_time as varchar)
            as handling
    from staged as s
    inner join runs as r on r.cluster = s.cluster and r.job_id = s.job_id and r.run = s.run
    where s.overlaps_previous
),

orphan as (
    select
        r.cluster,
        r.source,
        r.job_id,
        r.run,
        'run has no row in jobs' as issue,
        'left out of every figure' as handling
    from runs as r
    where not exists (select 1 from jobs as j where j.cluster = r.cluster and j.job_id = r.job_id)
),

preemptions as (
    select p.*, r.source
    from ledger as p
    inner join all_staged as r on r.cluster = p.cluster and r.job_id = p.victim_job_id and r.run = p.victim_run
),

unknown_start as (
    select
        cluster,
        source,
        victim_job_id as job_id,
        victim_run as run,
        'preemption with unknown run start' as issue,
        'in the ledger; lost progress, run age, recovery and work done unknown (NULL)' as handling
    from preemptions
    where run_start is null
),

unknown_pool as (
    select
        cluster,
        source,
        victim_job_id as job_id,
        victim_run as run,
        'preemption with unknown pool' as issue,
        'in the ledger; no capacity, so gain and avoidability unknown' as handling
    from preemptions
    where pool is null
),

unknown_preemptor as (
    select
        cluster,
        source,
        victim_job_id as job_id,
        victim_run as run,
        'preemption with unknown preemptor' as issue,
        'in the ledger; no gain, and it counts against visibility (readiness Q4)' as handling
    from preemptions
    where preemptor_job_id is null
),

unbound_link as (
    select
        l.cluster,
        l.source,
        l.victim_job_id as job_id,
        cast(null as integer) as run,
        'preemption link whose victim has no runs' as issue,
        'not in the ledger: only its event was collected (the victim''s stream not read, or it was deleted unseen)'
            as handling
    from links as l
    where not exists (
        select 1 from all_staged as r where r.cluster = l.cluster and r.job_id = l.victim_job_id
    )
),

uncorroborated_link as (
    -- an Event's claim that the victim's state did not bear out when the collector read it back (the victim was
    -- gone, or KAI before v0.17.0): counted here whatever the ledger made of it. A claim the victim's state
    -- gainsaid is never loaded: the quarantine holds it ("claimed but not corroborated").
    select
        l.cluster,
        l.source,
        l.victim_job_id as job_id,
        cast(null as integer) as run,
        'preemption claimed by an event, not corroborated by its victim' as issue,
        'in the ledger only where the victim''s own state says preempted, it was last seen running (gone unseen), '
            || 'or it is a KAI gang its pods'' deletion ended; never where its runs record another end '
            || '(docs/deploy.md)' as handling
    from links as l
    where l.victim_kind is not null
        and l.corroboration is null
        and exists (select 1 from runs as r where r.cluster = l.cluster and r.job_id = l.victim_job_id)
),

implausible_preemptor as (
    select
        l.cluster,
        l.source,
        l.victim_job_id as job_id,
        cast(null as integer) as run,
        'preemptor named by an event is not plausible' as issue,
        'not taken as the preemptor: a known job with no run started at the preemption or later' as handling
    from links as l
    cross join analytics_params as p
    where l.victim_kind is not null
        and exists (select 1 from jobs as j where j.cluster = l.cluster and j.job_id = l.preemptor_job_id)
        and not exists (
            select 1 from runs as r
            where r.cluster = l.cluster
                and r.job_id = l.preemptor_job_id
                and (r.start_time is null or epoch(r.start_time) >= epoch(l.time) - p.link_tolerance_s)
        )
        and exists (select 1 from runs as r where r.cluster = l.cluster and r.job_id = l.preemptor_job_id)
),

final as (
    select * from overlapping
    union all
    select * from orphan
    union all
    select * from unknown_start
    union all
    select * from unknown_pool
    union all
    select * from unknown_preemptor
    union all
    select * from unbound_link
    union all
    select * from uncorroborated_link
    union all
    select * from implausible_preemptor
)

select * from final
