-- Background work: one queue table, claimed with FOR UPDATE SKIP LOCKED under a lease.
-- A worker that dies leaves its jobs leased; when the lease runs out another worker takes them.
-- A job that keeps failing is parked with its error and an alert row, never dropped.

create or replace function cortex.queue_statuses() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['queued', 'running', 'done', 'parked'];
end $$;
comment on function cortex.queue_statuses() is 'Allowed job statuses: queued -> running -> done, or parked after the last failed attempt.';

create or replace function cortex.alert_severities() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['info', 'warning', 'critical'];
end $$;
comment on function cortex.alert_severities() is 'Allowed alert severities, least severe first.';
-- The alerts table's CHECK calls it, and API roles acknowledge alerts (an UPDATE re-checks).
grant execute on function cortex.alert_severities() to authenticated, service_role;

create table cortex.jobs (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  id bigint generated always as identity,
  kind text not null check (kind ~ '^[a-z_]+$'),
  payload jsonb not null default '{}' check (jsonb_typeof(payload) = 'object'),
  -- Jobs with the same dedup_key are one job while queued (e.g. one context refresh per contact).
  dedup_key text,
  status text not null default 'queued' check (status = any (cortex.queue_statuses())),
  attempts int not null default 0 check (attempts >= 0),
  max_attempts int not null default 5 check (max_attempts >= 1),
  -- Seconds before the first retry; doubled each further attempt.
  retry_base_seconds int not null default 10 check (retry_base_seconds >= 0),
  run_at timestamptz not null default now(),
  locked_by text,
  locked_until timestamptz,
  last_error text,
  result jsonb,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  finished_at timestamptz,
  primary key (tenant_id, id)
);
comment on table cortex.jobs is 'Queue of background work (summaries, context generation, ...); claimed under a lease.';
create index jobs_ready on cortex.jobs (run_at) where status = 'queued';
create index jobs_leased on cortex.jobs (locked_until) where status = 'running';
create unique index jobs_dedup on cortex.jobs (tenant_id, kind, dedup_key)
  where dedup_key is not null and status in ('queued', 'running');
create trigger jobs_updated_at before update on cortex.jobs
  for each row execute function cortex.touch_updated_at();

create table cortex.alerts (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  id bigint generated always as identity,
  kind text not null,
  severity text not null default 'warning' check (severity = any (cortex.alert_severities())),
  message text not null,
  details jsonb not null default '{}',
  created_at timestamptz not null default now(),
  acknowledged_at timestamptz,
  primary key (tenant_id, id)
);
comment on table cortex.alerts is 'Alerts for the tenant''s monitor and admin (parked jobs, repeated failures, ...).';
create index alerts_recent on cortex.alerts (tenant_id, created_at desc);

alter table cortex.jobs enable row level security;
alter table cortex.alerts enable row level security;
create policy "Jobs are visible to agents of their tenant" on cortex.jobs
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
create policy "Alerts are visible to agents of their tenant" on cortex.alerts
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
grant select on cortex.jobs, cortex.alerts to authenticated;

-- Enqueue: for the worker, operators and other security definer functions only (request_context_refresh,
-- queue_interaction_summary), which check what an API caller may queue before they call it. No API
-- role may execute it: a job is model spend, and its kind and payload are the worker's to trust.
create or replace function cortex.enqueue_job(
  p_tenant_id uuid, p_kind text, p_payload jsonb default '{}', p_dedup_key text default null,
  p_run_at timestamptz default now(), p_max_attempts int default 5, p_retry_base_seconds int default 10
) returns bigint
language plpgsql volatile security definer set search_path = '' as $$
declare v_id bigint;
begin
  -- Reached only through definer functions; the guard still holds their caller to its tenant.
  perform cortex.guard_tenant(p_tenant_id);
  insert into cortex.jobs (tenant_id, kind, payload, dedup_key, run_at, max_attempts, retry_base_seconds)
  values (p_tenant_id, p_kind, coalesce(p_payload, '{}'), p_dedup_key, p_run_at, p_max_attempts, p_retry_base_seconds)
  on conflict (tenant_id, kind, dedup_key) where dedup_key is not null and status in ('queued', 'running')
  do nothing
  returning id into v_id;
  if v_id is null then
    -- Already queued: keep the earlier of the two run times.
    update cortex.jobs j set run_at = least(j.run_at, p_run_at)
    where j.tenant_id = p_tenant_id and j.kind = p_kind and j.dedup_key = p_dedup_key and j.status = 'queued'
    returning j.id into v_id;
  end if;
  -- Any role can LISTEN, so the signal carries nothing (no tenant, no kind): it only wakes workers.
  perform pg_notify('cortex_jobs', '');
  return v_id;
end $$;
comment on function cortex.enqueue_job(uuid, text, jsonb, text, timestamptz, int, int) is
  'Queues a job (once per dedup_key while queued or running) and wakes idle workers with an empty NOTIFY cortex_jobs. '
  'Worker, operators and definer functions only (cortex.guard_tenant holds a caller with claims to its tenant).';
revoke execute on function cortex.enqueue_job(uuid, text, jsonb, text, timestamptz, int, int)
  from public, anon, authenticated, service_role;

create or replace function cortex.claim_jobs(p_worker text, p_limit int default 1, p_lease_seconds int default 60)
returns setof cortex.jobs
language sql volatile set search_path = '' as $$
  update cortex.jobs j
  set status = 'running', locked_by = p_worker, attempts = j.attempts + 1,
      locked_until = now() + make_interval(secs => p_lease_seconds)
  from (
    select tenant_id, id from cortex.jobs
    where (status = 'queued' and run_at <= now())
       or (status = 'running' and locked_until < now())
    order by run_at
    limit p_limit
    for update skip locked
  ) c
  where j.tenant_id = c.tenant_id and j.id = c.id
  returning j.*
$$;
comment on function cortex.claim_jobs(text, int, int) is
  'Claims up to p_limit due jobs (or jobs whose lease expired) for a worker, under a lease; skips rows other workers hold.';

create or replace function cortex.extend_lease(p_tenant_id uuid, p_id bigint, p_worker text, p_lease_seconds int default 60)
returns boolean
language sql volatile set search_path = '' as $$
  with u as (
    update cortex.jobs set locked_until = now() + make_interval(secs => p_lease_seconds)
    where tenant_id = p_tenant_id and id = p_id and locked_by = p_worker and status = 'running'
    returning 1)
  select exists (select from u)
$$;
comment on function cortex.extend_lease(uuid, bigint, text, int) is 'Heartbeat: extends a running job''s lease; false when the worker lost it.';

create or replace function cortex.complete_job(p_tenant_id uuid, p_id bigint, p_worker text, p_result jsonb default null)
returns boolean
language sql volatile set search_path = '' as $$
  with u as (
    update cortex.jobs set status = 'done', result = p_result, finished_at = now(),
                           locked_by = null, locked_until = null, last_error = null
    where tenant_id = p_tenant_id and id = p_id and locked_by = p_worker and status = 'running'
    returning 1)
  select exists (select from u)
$$;
comment on function cortex.complete_job(uuid, bigint, text, jsonb) is 'Marks a job done; false when this worker no longer holds it.';

create or replace function cortex.fail_job(p_tenant_id uuid, p_id bigint, p_worker text, p_error text)
returns text
language plpgsql volatile set search_path = '' as $$
declare j cortex.jobs;
begin
  select * into j from cortex.jobs where tenant_id = p_tenant_id and id = p_id for update;
  if not found or j.locked_by is distinct from p_worker or j.status <> 'running' then
    return 'lost';
  end if;
  if j.attempts >= j.max_attempts then
    update cortex.jobs set status = 'parked', last_error = p_error, finished_at = now(),
                           locked_by = null, locked_until = null
    where tenant_id = p_tenant_id and id = p_id;
    insert into cortex.alerts (tenant_id, kind, severity, message, details)
    values (p_tenant_id, 'job_parked', 'critical',
            format('%s job %s failed %s times and was parked: %s', j.kind, j.id, j.attempts, left(p_error, 500)),
            jsonb_build_object('job_id', j.id, 'kind', j.kind, 'payload', j.payload, 'error', p_error));
    perform pg_notify('cortex_alerts', '');  -- a wake-up only: any role can LISTEN
    return 'parked';
  end if;
  update cortex.jobs
  set status = 'queued', last_error = p_error, locked_by = null, locked_until = null,
      run_at = now() + make_interval(secs => j.retry_base_seconds * power(2, j.attempts - 1))
  where tenant_id = p_tenant_id and id = p_id;
  return 'retry';
end $$;
comment on function cortex.fail_job(uuid, bigint, text, text) is
  'Records a failed attempt: requeues with exponential backoff, or after max_attempts parks the job and writes an alert.';

create or replace function cortex.release_jobs(p_worker text, p_tenant_ids uuid[], p_ids bigint[])
returns int
language sql volatile set search_path = '' as $$
  -- Not started, so the claim's attempt is given back too: stopping a worker costs no retries.
  with r as (
    update cortex.jobs j set status = 'queued', attempts = greatest(j.attempts - 1, 0),
                             locked_by = null, locked_until = null
    from unnest(p_tenant_ids, p_ids) as k(tenant_id, id)
    where j.tenant_id = k.tenant_id and j.id = k.id and j.locked_by = p_worker and j.status = 'running'
    returning 1)
  select count(*)::int from r
$$;
comment on function cortex.release_jobs(text, uuid[], bigint[]) is
  'Gives claimed but unstarted jobs back to the queue (a stopping worker), with their attempt refunded; returns how many.';

create or replace function cortex.retry_parked_job(p_tenant_id uuid, p_id bigint) returns boolean
language sql volatile set search_path = '' as $$
  with u as (
    update cortex.jobs set status = 'queued', attempts = 0, run_at = now(), finished_at = null
    where tenant_id = p_tenant_id and id = p_id and status = 'parked' returning 1)
  select exists (select from u)
$$;
comment on function cortex.retry_parked_job(uuid, bigint) is 'Puts a parked job back in the queue with a fresh set of attempts.';
