-- Scheduled jobs (seed 000 "Background Jobs"). Each job's logic is a plain SQL function taking the
-- clock as p_now, so tests call it directly with a frozen time; pg_cron only calls it. A job never
-- calls a model: it enqueues work for the worker (cortex.jobs) or notifications (cortex.outbox).
--
-- Per-tenant local time: the jobs run hourly and act for the tenants whose local clock is in the
-- job's hours (02:00-05:59 for the nightly refresh, 00:00-03:59 for the daily report), once per
-- local date; the later hours catch up a run missed at the first (a server that was down, the
-- 02:00 hour a DST change skips). Every job records the window it ran for, per tenant, in
-- cortex.schedule_runs; a second run in the same window finds the record and does nothing.

create table cortex.schedule_runs (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  job text not null check (job ~ '^[a-z_]+$'),
  -- Start of the window this run covers (a local 02:00, a local midnight, a 6-hour or 2-hour slot).
  window_start timestamptz not null,
  ran_at timestamptz not null default now(),
  result jsonb not null default '{}' check (jsonb_typeof(result) = 'object'),
  primary key (tenant_id, job, window_start)
);
comment on table cortex.schedule_runs is
  'One row per scheduled job, tenant and window it ran for: what makes a second run in the same window a no-op, and what it did.';
create index schedule_runs_recent on cortex.schedule_runs (tenant_id, ran_at desc);

alter table cortex.schedule_runs enable row level security;
create policy "Schedule runs are visible to agents of their tenant" on cortex.schedule_runs
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
grant select on cortex.schedule_runs to authenticated;

-- Windows ---------------------------------------------------------------------------------------

create or replace function cortex.claim_schedule_window(p_tenant_id uuid, p_job text, p_window_start timestamptz)
returns boolean
language plpgsql volatile set search_path = '' as $$
declare v_new int;
begin
  insert into cortex.schedule_runs (tenant_id, job, window_start) values (p_tenant_id, p_job, p_window_start)
  on conflict (tenant_id, job, window_start) do nothing;
  get diagnostics v_new = row_count;
  return v_new = 1;
end $$;
comment on function cortex.claim_schedule_window(uuid, text, timestamptz) is
  'Records that p_job runs for a tenant''s window; true the first time, false when it already ran (or is running) for that window.';

create or replace function cortex.finish_schedule_window(
  p_tenant_id uuid, p_job text, p_window_start timestamptz, p_result jsonb
) returns void
language sql volatile set search_path = '' as $$
  update cortex.schedule_runs set result = coalesce(p_result, '{}')
  where tenant_id = p_tenant_id and job = p_job and window_start = p_window_start
$$;
comment on function cortex.finish_schedule_window(uuid, text, timestamptz, jsonb) is
  'Stores what a scheduled job did for a tenant''s window (counts), for operators and dashboards.';

create or replace function cortex.slot_start(p_now timestamptz, p_every interval) returns timestamptz
language sql immutable set search_path = '' as $$
  select pg_catalog.date_bin(p_every, p_now, timestamptz '2000-01-01 00:00:00+00')
$$;
comment on function cortex.slot_start(timestamptz, interval) is
  'Start of the UTC-aligned slot (6 hours, 2 hours, ...) containing p_now: the window of a job that runs every p_every.';

-- 1. Nightly context refresh ----------------------------------------------------------------------

create or replace function cortex.job_nightly_context_refresh(p_now timestamptz default now())
returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  t record;
  v_local timestamp;
  v_window timestamptz;
  v_queued int;
  v_tenants int := 0;
  v_total int := 0;
begin
  for t in select id, time_zone from cortex.tenants order by id loop
    v_local := p_now at time zone t.time_zone;
    continue when extract(hour from v_local) not between 2 and 5;
    v_window := (date_trunc('day', v_local) + interval '2 hours') at time zone t.time_zone;
    continue when not cortex.claim_schedule_window(t.id, 'nightly_context_refresh', v_window);
    -- Contacts touched in the last 30 days whose context is stale (seed 000: the interaction
    -- count changed or it is older than 24 h; also: none yet, marked stale, or expired).
    select count(cortex.request_context_refresh(c.tenant_id, c.id, 'nightly_refresh')) into v_queued
    from cortex.contacts c
    left join cortex.contact_context x on x.tenant_id = c.tenant_id and x.contact_id = c.id
    where c.tenant_id = t.id
      and c.last_touch_at > p_now - interval '30 days'
      and (x.contact_id is null
           or x.stale_since is not null
           or x.interaction_count_at_generation is distinct from c.interaction_count
           or x.generated_at < p_now - interval '24 hours'
           or (x.expires_at is not null and x.expires_at <= p_now));
    perform cortex.finish_schedule_window(t.id, 'nightly_context_refresh', v_window,
                                          jsonb_build_object('queued', v_queued));
    v_tenants := v_tenants + 1;
    v_total := v_total + v_queued;
  end loop;
  return jsonb_build_object('tenants', v_tenants, 'queued', v_total);
end $$;
comment on function cortex.job_nightly_context_refresh(timestamptz) is
  'Hourly; for each tenant whose local time is 02:00-05:59 and not yet done that local night: queues a context refresh (generate_context job) for every contact touched in 30 days whose context is stale. Returns {tenants, queued}.';

-- 2. Stale-context sweep --------------------------------------------------------------------------

create or replace function cortex.job_stale_context_sweep(p_now timestamptz default now())
returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  t record;
  v_window timestamptz := cortex.slot_start(p_now, interval '6 hours');
  v_expired int;
  v_queued int;
  v_tenants int := 0;
  v_total_expired int := 0;
  v_total_queued int := 0;
begin
  for t in select id from cortex.tenants order by id loop
    continue when not cortex.claim_schedule_window(t.id, 'stale_context_sweep', v_window);
    -- Contexts older than 7 days of contacts nobody touched in 30 days: expired, not regenerated
    -- (a read still gets the old context, marked stale).
    update cortex.contact_context x
    set expires_at = p_now, stale_since = coalesce(x.stale_since, p_now)
    from cortex.contacts c
    where x.tenant_id = t.id and c.tenant_id = x.tenant_id and c.id = x.contact_id
      and x.generated_at < p_now - interval '7 days'
      and (c.last_touch_at is null or c.last_touch_at <= p_now - interval '30 days')
      and (x.expires_at is null or x.expires_at > p_now);
    get diagnostics v_expired = row_count;
    -- Those of active contacts: queued for regeneration (one job per contact, deduplicated).
    select count(cortex.request_context_refresh(x.tenant_id, x.contact_id, 'stale_sweep')) into v_queued
    from cortex.contact_context x
    join cortex.contacts c on c.tenant_id = x.tenant_id and c.id = x.contact_id
    where x.tenant_id = t.id
      and x.generated_at < p_now - interval '7 days'
      and c.last_touch_at > p_now - interval '30 days';
    perform cortex.finish_schedule_window(t.id, 'stale_context_sweep', v_window,
                                          jsonb_build_object('expired', v_expired, 'queued', v_queued));
    v_tenants := v_tenants + 1;
    v_total_expired := v_total_expired + v_expired;
    v_total_queued := v_total_queued + v_queued;
  end loop;
  return jsonb_build_object('tenants', v_tenants, 'expired', v_total_expired, 'queued', v_total_queued);
end $$;
comment on function cortex.job_stale_context_sweep(timestamptz) is
  'Every 6 h; contexts generated more than 7 days ago: expired (expires_at = now) when the contact had no touch in 30 days, else queued for regeneration. Once per tenant and 6-hour slot. Returns {tenants, expired, queued}.';

-- 3. Daily usage report ---------------------------------------------------------------------------

create or replace function cortex.usage_report(p_tenant_id uuid, p_day date) returns jsonb
language sql stable set search_path = '' as $$
  -- From token_usage itself (the record of every call), over the tenant's local day; refused
  -- calls (budget_exceeded) are counted apart and spend nothing.
  with bounds as (
    select (p_day::timestamp at time zone t.time_zone) as from_ts,
           ((p_day + 1)::timestamp at time zone t.time_zone) as to_ts, t.time_zone
    from cortex.tenants t where t.id = p_tenant_id
  ), per_agent as (
    select u.agent,
           count(*) filter (where not u.budget_exceeded) as calls,
           coalesce(sum(u.input_tokens) filter (where not u.budget_exceeded), 0) as input_tokens,
           coalesce(sum(u.output_tokens) filter (where not u.budget_exceeded), 0) as output_tokens,
           coalesce(sum(u.total_tokens) filter (where not u.budget_exceeded), 0) as total_tokens,
           coalesce(sum(u.cost_usd) filter (where not u.budget_exceeded), 0) as cost_usd,
           count(*) filter (where u.budget_exceeded) as refused
    from cortex.token_usage u, bounds b
    where u.tenant_id = p_tenant_id and u.created_at >= b.from_ts and u.created_at < b.to_ts
    group by u.agent
  ), agents as (
    select p.*, ac.daily_token_budget,
           case when ac.daily_token_budget > 0
                then round(100.0 * p.total_tokens / ac.daily_token_budget, 1) end as budget_used_pct
    from per_agent p
    left join cortex.agent_config ac on ac.tenant_id = p_tenant_id and ac.agent = p.agent
  )
  select jsonb_build_object(
    'date', p_day, 'time_zone', b.time_zone,
    'totals', jsonb_build_object(
      'calls', coalesce((select sum(calls) from agents), 0),
      'input_tokens', coalesce((select sum(input_tokens) from agents), 0),
      'output_tokens', coalesce((select sum(output_tokens) from agents), 0),
      'total_tokens', coalesce((select sum(total_tokens) from agents), 0),
      'cost_usd', coalesce((select sum(cost_usd) from agents), 0),
      'refused', coalesce((select sum(refused) from agents), 0)),
    'agents', coalesce((select jsonb_agg(to_jsonb(a) order by a.total_tokens desc, a.agent) from agents a), '[]'))
  from bounds b
$$;
comment on function cortex.usage_report(uuid, date) is
  'A tenant''s token usage on one local day: totals and per agent (calls, tokens, cost, refused calls, share of the daily budget).';

create or replace function cortex.job_daily_usage_report(p_now timestamptz default now())
returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  t record;
  v_local timestamp;
  v_today date;
  v_window timestamptz;
  v_report jsonb;
  v_sent int := 0;
begin
  for t in select id, time_zone from cortex.tenants order by id loop
    v_local := p_now at time zone t.time_zone;
    continue when extract(hour from v_local) not between 0 and 3;
    v_today := v_local::date;
    v_window := v_today::timestamp at time zone t.time_zone;
    continue when not cortex.claim_schedule_window(t.id, 'daily_usage_report', v_window);
    v_report := cortex.usage_report(t.id, v_today - 1);
    -- The key makes the report one message per tenant and day even if the window record is lost.
    perform cortex.notify(t.id, 'usage.daily_report', 'monitor', v_report,
                          format('usage.daily_report:%s', v_today - 1));
    perform cortex.finish_schedule_window(t.id, 'daily_usage_report', v_window,
                                          jsonb_build_object('date', v_today - 1, 'totals', v_report -> 'totals'));
    v_sent := v_sent + 1;
  end loop;
  return jsonb_build_object('reports', v_sent);
end $$;
comment on function cortex.job_daily_usage_report(timestamptz) is
  'Hourly; for each tenant whose local time is 00:00-03:59 and not yet reported that day: sends yesterday''s usage report (cortex.usage_report) to the monitor through the outbox. Returns {reports}.';

-- 4. Handoff reminders ----------------------------------------------------------------------------

create or replace function cortex.job_handoff_reminders(p_now timestamptz default now())
returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  t record;
  h record;
  v_window timestamptz := cortex.slot_start(p_now, interval '2 hours');
  v_recipient text;
  v_payload jsonb;
  v_key text;
  v_reminders int;
  v_escalations int;
  v_total_reminders int := 0;
  v_total_escalations int := 0;
begin
  for t in select id from cortex.tenants order by id loop
    continue when not cortex.claim_schedule_window(t.id, 'handoff_reminders', v_window);
    v_reminders := 0;
    v_escalations := 0;
    for h in
      select e as handoff,
             case when e.urgency in ('high', 'urgent') then 'handoff.reminder' else 'handoff.escalated' end as event
      from cortex.handoff_events e
      where e.tenant_id = t.id and e.status = 'pending'
        and ((e.urgency in ('high', 'urgent') and e.created_at < p_now - interval '4 hours')
          or (e.urgency = 'normal' and e.created_at < p_now - interval '24 hours'))
      order by e.created_at
    loop
      v_payload := cortex.handoff_json(h.handoff) || jsonb_build_object(
        'contact', cortex.handoff_contact_json(t.id, (h.handoff).contact_id),
        'pending_hours', round((extract(epoch from p_now - (h.handoff).created_at) / 3600)::numeric, 1));
      -- High and urgent: remind the receiver and the monitor. Normal after a day: the tenant's admin.
      foreach v_recipient in array case when h.event = 'handoff.reminder'
          then array[coalesce('agent:' || (h.handoff).to_agent, 'human:' || (h.handoff).to_human_id), 'monitor']
          else array['admin'] end
      loop
        -- A reminder once per 2-hour window while pending (seed 000), an escalation once ever: the
        -- idempotency key is looked up first so that a repeat sends nothing at all (not even a wake-up).
        v_key := format('%s:%s:%s', h.event, (h.handoff).id, v_recipient)
                 || case when h.event = 'handoff.reminder' then ':' || cortex.iso(v_window) else '' end;
        continue when exists (select from cortex.outbox o where o.tenant_id = t.id and o.idempotency_key = v_key);
        perform cortex.notify(t.id, h.event, v_recipient, v_payload, v_key);
        if h.event = 'handoff.reminder' then v_reminders := v_reminders + 1;
        else v_escalations := v_escalations + 1; end if;
      end loop;
    end loop;
    perform cortex.finish_schedule_window(t.id, 'handoff_reminders', v_window,
                                          jsonb_build_object('reminders', v_reminders, 'escalations', v_escalations));
    v_total_reminders := v_total_reminders + v_reminders;
    v_total_escalations := v_total_escalations + v_escalations;
  end loop;
  return jsonb_build_object('reminders', v_total_reminders, 'escalations', v_total_escalations);
end $$;
comment on function cortex.job_handoff_reminders(timestamptz) is
  'Every 2 h; pending handoffs: high/urgent ones older than 4 h get a handoff.reminder to the receiver and the monitor in every 2-hour window while they stay pending, normal ones older than 24 h a handoff.escalated to the tenant''s admin, once. Returns {reminders, escalations} (messages queued).';

-- 5. Cleanup ----------------------------------------------------------------------------------------

create or replace function cortex.job_cleanup_cron_history(
  p_keep interval default '7 days', p_now timestamptz default now()
) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_cron int := 0;
  v_runs int;
begin
  -- pg_cron's run log grows by a row per job run and is never trimmed by pg_cron itself.
  if to_regclass('cron.job_run_details') is not null then
    execute 'delete from cron.job_run_details where coalesce(end_time, start_time) < $1' using p_now - p_keep;
    get diagnostics v_cron = row_count;
  end if;
  -- Window records older than any window a job could still be asked about.
  delete from cortex.schedule_runs where window_start < p_now - greatest(p_keep, interval '35 days');
  get diagnostics v_runs = row_count;
  return jsonb_build_object('cron_run_details', v_cron, 'schedule_runs', v_runs);
end $$;
comment on function cortex.job_cleanup_cron_history(interval, timestamptz) is
  'Daily; deletes pg_cron run history (cron.job_run_details, where the cron schema exists) older than p_keep, and schedule_runs older than 35 days. Returns the counts.';

-- Schedule ------------------------------------------------------------------------------------------
-- Only in the database pg_cron serves (cron.database_name; see the extensions migration): a test
-- database has no cron schema and gets the functions without the schedule. cron.schedule with a
-- job name replaces an existing job of that name, so re-running this is harmless.
do $$
begin
  if to_regnamespace('cron') is not null and to_regprocedure('cron.schedule(text, text, text)') is not null then
    perform cron.schedule('cortex-nightly-context-refresh', '0 * * * *',
                          'select cortex.job_nightly_context_refresh()');
    perform cron.schedule('cortex-stale-context-sweep', '0 */6 * * *', 'select cortex.job_stale_context_sweep()');
    perform cron.schedule('cortex-daily-usage-report', '0 * * * *', 'select cortex.job_daily_usage_report()');
    perform cron.schedule('cortex-handoff-reminders', '0 */2 * * *', 'select cortex.job_handoff_reminders()');
    perform cron.schedule('cortex-cleanup-cron-history', '30 3 * * *', 'select cortex.job_cleanup_cron_history()');
  end if;
end $$;
