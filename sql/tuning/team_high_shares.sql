-- The (at most two) teams whose high-tier share of a pool grows fastest.
select team, high_share_slope, high_share_last
from scope_creep_teams
where cluster = $c and pool = $p and high_share_slope > 0 and growth_rank <= 2
order by growth_rank
