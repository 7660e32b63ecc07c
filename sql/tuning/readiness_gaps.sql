-- The verdict (readiness_verdict), how many questions the scorecard answered yes, no and unknown, and those it answered no.
select
    s.yes_count,
    s.no_count,
    s.unknown_count,
    v.verdict,
    v.borderline,
    v.reasons,
    string_agg(case when not s.answer then s.question end, ' ' order by s.question_no) as no
from readiness_scorecard as s
inner join readiness_verdict as v on v.cluster = s.cluster
where s.cluster = $c
group by s.yes_count, s.no_count, s.unknown_count, v.verdict, v.borderline, v.reasons
