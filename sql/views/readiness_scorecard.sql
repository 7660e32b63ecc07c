-- Per cluster, the four questions that decide whether preemption should be a main tool, each answered yes (every required measure passes, and one of its alternatives), no (a measured failure decides it) or unknown (null, with the missing inputs named), borderline when a measure whose interval holds its threshold could turn the answer, with the tallies and what data would answer the unknowns (the verdict over them, analytics/whatif/scorecard.py, is the table readiness_verdict).
with

evidence as (
    select * from readiness_evidence where rule in ('all', 'any')
),

questions as (
    select * from (values
        (1, 'Are GPUs scarce for long stretches (not just at peaks)?'),
        (2, 'Are priorities clear and narrow?'),
        (3, 'Do victims recover cheaply?'),
        (4, 'Are the rules visible?')
    ) as q (question_no, question)
),

cases as (
    -- each question answered three ways: as measured, and with every borderline measure read as passing and as
    -- failing; the answer is monotone in its measures, so it is borderline exactly when those two differ
    select cluster, question_no, rule, passes, 'measured' as reading from evidence
    union all
    select cluster, question_no, rule, case when borderline then true else passes end, 'high' from evidence
    union all
    select cluster, question_no, rule, case when borderline then false else passes end, 'low' from evidence
),

verdicts_of_measures as (
    -- three-valued logic: the question needs every 'all' measure to pass (AND) and, when it has 'any'
    -- measures, one of them (OR); a measured failure of the AND, or of every OR measure, answers no
    select
        cluster,
        question_no,
        reading,
        count(case when rule = 'all' and not passes then 1 end) > 0 as all_fails,
        count(case when rule = 'all' and passes is null then 1 end) > 0 as all_unknown,
        case
            when count(case when rule = 'any' then 1 end) = 0 then true
            when count(case when rule = 'any' and passes then 1 end) > 0 then true
            when count(case when rule = 'any' and passes is null then 1 end) > 0 then null
            else false
        end as any_passes
    from cases
    group by cluster, question_no, reading
),

readings as (
    select
        cluster,
        question_no,
        reading,
        case
            when all_fails or any_passes = false then false
            when not all_unknown and any_passes then true
        end as answer,
        any_passes
    from verdicts_of_measures
),

measured as (
    select
        m.cluster,
        m.question_no,
        m.answer,
        m.any_passes,
        h.answer is distinct from l.answer as borderline
    from readings as m
    inner join readings as h on h.cluster = m.cluster and h.question_no = m.question_no and h.reading = 'high'
    inner join readings as l on l.cluster = m.cluster and l.question_no = m.question_no and l.reading = 'low'
    where m.reading = 'measured'
),

lacking as (
    -- the missing inputs that keep a question unknown: not those of an alternative another one made moot
    select e.cluster, e.question_no, e.missing
    from readiness_evidence as e
    left join measured as m on m.cluster = e.cluster and m.question_no = e.question_no
    where e.missing is not null and e.rule <> 'info'
        and (e.question_no = 0 or (m.answer is null and (e.rule = 'all' or m.any_passes is null)))
),

answers as (
    select
        m.cluster,
        m.question_no,
        q.question,
        m.answer,
        m.borderline,
        l.missing
    from measured as m
    inner join questions as q on q.question_no = m.question_no
    left join (
        select cluster, question_no, string_agg(distinct missing, '; ' order by missing) as missing
        from lacking
        group by cluster, question_no
    ) as l on l.cluster = m.cluster and l.question_no = m.question_no
),

tally as (
    select
        a.cluster,
        cast(count(case when a.answer then 1 end) as bigint) as yes_count,
        cast(count(case when not a.answer then 1 end) as bigint) as no_count,
        cast(count(*) - count(a.answer) as bigint) as unknown_count,
        cast(count(case when a.borderline then 1 end) as bigint) as borderline_count,
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

final as (
    select
        a.cluster,
        a.question_no,
        a.question,
        a.answer,
        a.borderline,
        a.missing,
        t.yes_count,
        t.no_count,
        t.unknown_count,
        t.borderline_count,
        t.unanswered,
        w.collect
    from answers as a
    inner join tally as t on t.cluster = a.cluster
    left join wanted as w on w.cluster = a.cluster
)

select * from final
