-- Retention: the queue and the outbox keep finished rows for a while (to inspect what happened),
-- then a daily job deletes them. Parked jobs and dead letters stay until someone deals with them.

create index jobs_done on cortex.jobs (finished_at) where status = 'done';
create index outbox_finished on cortex.outbox (updated_at) where status in ('delivered', 'skipped');

create or replace function cortex.job_retention(p_keep interval default '30 days', p_now timestamptz default now())
returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_jobs int;
  v_outbox int;
begin
  delete from cortex.jobs where status = 'done' and finished_at < p_now - p_keep;
  get diagnostics v_jobs = row_count;
  delete from cortex.outbox where status in ('delivered', 'skipped') and updated_at < p_now - p_keep;
  get diagnostics v_outbox = row_count;
  return jsonb_build_object('jobs', v_jobs, 'outbox', v_outbox);
end $$;
comment on function cortex.job_retention(interval, timestamptz) is
  'Daily; deletes finished jobs (done) and finished outbox messages (delivered, skipped) older than p_keep (30 days); parked jobs and dead letters are kept. Returns the counts.';

do $$
begin
  if to_regnamespace('cron') is not null and to_regprocedure('cron.schedule(text, text, text)') is not null then
    perform cron.schedule('cortex-retention', '45 3 * * *', 'select cortex.job_retention()');
  end if;
end $$;
