-- The readiness scorecard's verdict and the questions it answered no.
select yes_count, verdict, fix_first, string_agg(case when not answer then question end, ' ') as no
from readiness_scorecard
where cluster = $c
group by yes_count, verdict, fix_first
