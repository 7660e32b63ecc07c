-- Every contiguous idle stretch of an allocated GPU at least the hoarding window long, from all of gpu_samples (gaps-and-islands); the full-rebuild form of analytics/hoarding.py, in SQL that DuckDB and Spark both run.
with

params as (
    select * from analytics_params
),

idle as (
    select s.cluster, s.host, s.gpu_uuid, s.gpu_instance, s.job_id, s.time, st.sample_step_s, p.hoarding_window_s
    from gpu_samples as s
    cross join params as p
    -- each cluster's own sampling step (analytics/hoarding.py infer_steps)
    inner join analytics_sample_steps as st on s.cluster = st.cluster
    where s.job_id is not null
        and is_idle(s.busy, p.idle_zero_rule, p.idle_busy_below)  -- sql/functions/shared.sql
),

marked as (
    -- samples more than 1.5 steps apart are not contiguous (hoarding.CONTIGUOUS_STEPS): a gap is not idle time
    select
        *,
        case when epoch(time) - epoch(lag(time) over w) <= 1.5 * sample_step_s then 0 else 1 end as starts
    from idle
    window w as (partition by cluster, host, gpu_uuid, gpu_instance, job_id order by time)
),

numbered as (
    select
        *,
        sum(starts) over (
            partition by cluster, host, gpu_uuid, gpu_instance, job_id order by time
            rows between unbounded preceding and current row
        ) as stretch_no
    from marked
),

stretches as (
    select
        cluster,
        host,
        gpu_uuid,
        gpu_instance,
        job_id,
        min(time) as start_time,
        max(time) + min(sample_step_s) * interval '1' second as end_time,
        count(*) as samples,
        min(hoarding_window_s) as hoarding_window_s
    from numbered
    group by cluster, host, gpu_uuid, gpu_instance, job_id, stretch_no
),

final as (
    select cluster, host, gpu_uuid, gpu_instance, job_id, start_time, end_time, samples
    from stretches
    where epoch(end_time) - epoch(start_time) >= hoarding_window_s
)

select * from final
