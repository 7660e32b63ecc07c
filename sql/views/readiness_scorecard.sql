-- Per cluster, the four questions that decide whether preemption should be a main tool, each answered yes only when every measure that the data can measure passes, with the evidence, and a verdict naming what to fix first.
with

evidence as (
    select * from readiness_evidence
),

questions as (
    select * from (values
        (1, 'Are GPUs scarce for long stretches (not just at peaks)?'),
        (2, 'Are priorities clear and narrow?'),
        (3, 'Do victims recover cheaply?'),
        (4, 'Are the rules visible?')
    ) as q (question_no, question)
),

answers as (
    select
        e.cluster,
        e.question_no,
        q.question,
        count(e.passes) > 0 and count(case when not e.passes then 1 end) = 0 as answer,
        string_agg(
            e.measure || ' = ' || coalesce(cast(round(e.value, 3) as varchar), 'not measured')
                || ' (needs ' || e.comparison || ' ' || cast(round(e.threshold, 3) as varchar) || ')',
            '; ' order by e.measure
        ) as evidence
    from evidence as e
    inner join questions as q on q.question_no = e.question_no
    group by e.cluster, e.question_no, q.question
),

idle as (
    select cluster, not coalesce(passes, true) as reclaim_first, value as hoarded_share
    from evidence
    where question_no = 0
),

tally as (
    select
        a.cluster,
        cast(sum(case when a.answer then 1 else 0 end) as bigint) as yes_count,
        bool_or(a.question_no in (1, 2) and not a.answer) as needs_quotas,
        bool_or(a.question_no in (3, 4) and not a.answer) as needs_tiered_pools
    from answers as a
    group by a.cluster
),

verdicts as (
    select
        t.cluster,
        t.yes_count,
        concat_ws(', ',
            case when i.reclaim_first then 'reclaiming idle GPUs' end,
            case when t.needs_quotas then 'quotas' end,
            case when t.needs_tiered_pools then 'tiered pools' end
        ) as fixes
    from tally as t
    left join idle as i on i.cluster = t.cluster
),

final as (
    select
        a.cluster,
        a.question_no,
        a.question,
        a.answer,
        a.evidence,
        v.yes_count,
        case
            when v.yes_count = 4 then 'preemption can be a main tool'
            when v.yes_count = 3 then 'preemption can be a main tool once the remaining no is fixed'
            else 'preemption should not be the main tool'
        end as verdict,
        nullif(v.fixes, '') as fix_first
    from answers as a
    inner join verdicts as v on v.cluster = a.cluster
)

select * from final
