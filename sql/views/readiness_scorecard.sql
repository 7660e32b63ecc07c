-- Per cluster, the four questions that decide whether preemption should be a main tool, each answered yes (every required measure passes, and one of its alternatives), no (a measured failure decides it) or unknown (null, with the missing inputs named), and a verdict over the measured answers that names what to fix first and what data would answer the rest.
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

verdicts_of_measures as (
    -- three-valued logic: the question needs every 'all' measure to pass (AND) and, when it has 'any'
    -- measures, one of them (OR); a measured failure of the AND, or of every OR measure, answers no
    select
        cluster,
        question_no,
        count(case when rule = 'all' and not passes then 1 end) > 0 as all_fails,
        count(case when rule = 'all' and passes is null then 1 end) > 0 as all_unknown,
        case
            when count(case when rule = 'any' then 1 end) = 0 then true
            when count(case when rule = 'any' and passes then 1 end) > 0 then true
            when count(case when rule = 'any' and passes is null then 1 end) > 0 then null
            else false
        end as any_passes
    from evidence
    group by cluster, question_no
),

measured as (
    select
        cluster,
        question_no,
        case
            when all_fails or any_passes = false then false
            when not all_unknown and any_passes then true
        end as answer,
        any_passes
    from verdicts_of_measures
),

lacking as (
    -- the missing inputs that keep a question unknown: not those of an alternative another one made moot
    select e.cluster, e.question_no, e.missing
    from evidence as e
    inner join measured as m on m.cluster = e.cluster and m.question_no = e.question_no
    where e.missing is not null and (e.question_no = 0 or (m.answer is null and (e.rule = 'all' or m.any_passes is null)))
),

answers as (
    select
        e.cluster,
        e.question_no,
        q.question,
        m.answer,
        concat_ws('; ',
            string_agg(case when e.rule = 'all' then e.measure || ' = '
                || coalesce(cast(round(e.value, 3) as varchar), 'unknown')
                || ' (needs ' || e.comparison || ' ' || cast(round(e.threshold, 3) as varchar) || ')' end,
                '; ' order by e.measure),
            'and one of: ' || string_agg(case when e.rule = 'any' then e.measure || ' = '
                || coalesce(cast(round(e.value, 3) as varchar), 'unknown')
                || ' (needs ' || e.comparison || ' ' || cast(round(e.threshold, 3) as varchar) || ')' end,
                ', ' order by e.measure)
        ) as evidence,
        l.missing
    from evidence as e
    inner join questions as q on q.question_no = e.question_no
    inner join measured as m on m.cluster = e.cluster and m.question_no = e.question_no
    left join (
        select cluster, question_no, string_agg(distinct missing, '; ' order by missing) as missing
        from lacking
        group by cluster, question_no
    ) as l on l.cluster = e.cluster and l.question_no = e.question_no
    group by e.cluster, e.question_no, q.question, m.answer, l.missing
),

idle as (
    select cluster, passes = false as reclaim_first, missing as idle_missing
    from evidence
    where question_no = 0
),

tally as (
    select
        a.cluster,
        cast(count(case when a.answer then 1 end) as bigint) as yes_count,
        cast(count(case when not a.answer then 1 end) as bigint) as no_count,
        cast(count(*) - count(a.answer) as bigint) as unknown_count,
        coalesce(bool_or(a.question_no in (1, 2) and a.answer = false), false) as needs_quotas,
        coalesce(bool_or(a.question_no in (3, 4) and a.answer = false), false) as needs_tiered_pools,
        string_agg(case when a.answer is null then 'Q' || cast(a.question_no as varchar) end, ', '
            order by a.question_no) as unanswered
    from answers as a
    group by a.cluster
),

wanted as (
    -- the data that would answer the unknowns (and hoarding, which the verdict reads): each missing input once
    select cluster, string_agg(distinct missing, '; ' order by missing) as collect
    from lacking
    group by cluster
),

verdicts as (
    select
        t.*,
        w.collect,
        nullif(concat_ws(', ',
            case when i.reclaim_first then 'reclaiming idle GPUs' end,
            case when t.needs_quotas then 'quotas' end,
            case when t.needs_tiered_pools then 'tiered pools' end
        ), '') as fix_first
    from tally as t
    left join idle as i on i.cluster = t.cluster
    left join wanted as w on w.cluster = t.cluster
),

final as (
    select
        a.cluster,
        a.question_no,
        a.question,
        a.answer,
        a.evidence,
        a.missing,
        v.yes_count,
        v.no_count,
        v.unknown_count,
        case
            when v.no_count >= 2 then 'preemption should not be the main tool'
            when v.unknown_count > 0 then 'cannot tell yet'
            when v.yes_count = 4 then 'preemption can be a main tool'
            else 'preemption can be a main tool once the remaining no is fixed'
        end as verdict,
        v.fix_first,
        v.unanswered,
        v.collect
    from answers as a
    inner join verdicts as v on v.cluster = a.cluster
)

select * from final
