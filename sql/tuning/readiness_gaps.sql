-- The readiness scorecard's verdict, how many questions it answered yes, no and unknown, and those it answered no.
select
    yes_count,
    no_count,
    unknown_count,
    verdict,
    fix_first,
    string_agg(case when not answer then question end, ' ' order by question_no) as no
from readiness_scorecard
where cluster = $c
group by yes_count, no_count, unknown_count, verdict, fix_first
