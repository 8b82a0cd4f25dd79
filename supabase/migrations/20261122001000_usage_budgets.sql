-- Daily token budgets (seed 000: usage summary, budget check, "Token Budget Exceeded").
--
-- cortex.usage_daily is a rollup of cortex.token_usage per tenant, local day (in the tenant's time
-- zone), agent and model, kept by statement triggers in the same transaction as the usage rows, so a
-- budget check reads one or a few rollup rows and never sums raw rows. Rows recorded with
-- budget_exceeded = true count as refused, not spent.
--
-- Recommendation thresholds: the share of the agent's daily budget used once the operation's
-- tokens are counted (used_today + estimated_tokens) / daily_token_budget:
--   <= 80 %            proceed      within budget, nothing to change
--   > 80 % and <= 95 % use_haiku    within budget, switch to the cheaper model
--   > 95 % and <= 100 % defer       within budget, only what cannot wait until the budget resets
--   > 100 %            alert_human  not within budget; record_usage refuses the operation
-- The budget resets at midnight in the tenant's time zone (resets_at, retry_after_seconds).
--
-- Concurrency: record_usage and cortex.enforce_budget take a transaction-level advisory lock per
-- (tenant, agent, local day) before reading the rollup, so concurrent spenders of one agent are
-- serialised and record_usage never lets an agent's counted usage pass its budget. Usage recorded
-- after the fact by Cortex itself (cortex.record_token_usage, e.g. an interaction's analysis) is
-- always counted, so used_today may exceed the budget through those paths; checks then say alert_human.

create table cortex.usage_daily (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  -- The local date in the tenant's time zone at the time of the call.
  day date not null,
  agent text not null,
  model text not null,
  input_tokens bigint not null default 0,
  output_tokens bigint not null default 0,
  total_tokens bigint not null default 0,
  cost_usd numeric(16, 6) not null default 0,
  operations bigint not null default 0,
  -- Calls refused for the budget (token_usage.budget_exceeded): counted here, not in the tokens above.
  refused bigint not null default 0,
  refused_tokens bigint not null default 0,
  updated_at timestamptz not null default now(),
  primary key (tenant_id, day, agent, model)
);
comment on table cortex.usage_daily is
  'Daily rollup of token_usage per tenant, local day (tenant time zone), agent and model; maintained by triggers in the same transaction as each usage row. Budget-exceeded rows count as refused, not spent.';

alter table cortex.usage_daily enable row level security;
create policy "Daily usage is visible to agents of their tenant" on cortex.usage_daily
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
grant select on cortex.usage_daily to authenticated;

-- Rollup maintenance ---------------------------------------------------------------------------
-- Statement-level triggers with transition tables: a bulk insert of many usage rows is one
-- aggregated upsert, not one upsert per row. The rollup mirrors token_usage exactly, deletes and
-- updates included, so it always equals the sums of the raw rows.

-- The one rollup aggregate: token_usage rows -> usage_daily deltas, added (p_sign 1) or taken
-- away (-1) in one upsert. The insert and update triggers, the delete trigger and the rebuild all
-- go through it, so the rollup's definition is written once.
create or replace function cortex.apply_usage_rollup(p_rows cortex.token_usage[], p_sign int) returns void
language sql volatile set search_path = '' as $$
  insert into cortex.usage_daily as d (tenant_id, day, agent, model, input_tokens, output_tokens, total_tokens,
                                       cost_usd, operations, refused, refused_tokens)
  select u.tenant_id, (u.created_at at time zone t.time_zone)::date, u.agent, u.model,
         p_sign * coalesce(sum(u.input_tokens) filter (where not u.budget_exceeded), 0),
         p_sign * coalesce(sum(u.output_tokens) filter (where not u.budget_exceeded), 0),
         p_sign * coalesce(sum(u.total_tokens) filter (where not u.budget_exceeded), 0),
         p_sign * coalesce(sum(u.cost_usd) filter (where not u.budget_exceeded), 0),
         p_sign * count(*) filter (where not u.budget_exceeded),
         p_sign * count(*) filter (where u.budget_exceeded),
         p_sign * coalesce(sum(u.total_tokens) filter (where u.budget_exceeded), 0)
  -- Joined with the tenant for its time zone: when a tenant is being deleted its rows find no
  -- tenant, and nothing is written (its rollup goes with it).
  from unnest(p_rows) u join cortex.tenants t on t.id = u.tenant_id
  group by 1, 2, 3, 4
  on conflict (tenant_id, day, agent, model) do update set
    input_tokens = d.input_tokens + excluded.input_tokens,
    output_tokens = d.output_tokens + excluded.output_tokens,
    total_tokens = d.total_tokens + excluded.total_tokens,
    cost_usd = d.cost_usd + excluded.cost_usd,
    operations = d.operations + excluded.operations,
    refused = d.refused + excluded.refused,
    refused_tokens = d.refused_tokens + excluded.refused_tokens,
    updated_at = now()
$$;
comment on function cortex.apply_usage_rollup(cortex.token_usage[], int) is
  'The usage_daily rollup aggregate, written once: adds (p_sign 1) or subtracts (-1) token_usage rows per tenant, local day, agent and model; budget-exceeded rows count as refused, not spent.';

create or replace function cortex.rollup_token_usage() returns trigger
language plpgsql set search_path = '' as $$
begin
  if tg_op in ('UPDATE', 'DELETE') then
    perform cortex.apply_usage_rollup(array(select o::cortex.token_usage from old_rows o), -1);
  end if;
  if tg_op in ('INSERT', 'UPDATE') then
    perform cortex.apply_usage_rollup(array(select n::cortex.token_usage from new_rows n), 1);
  end if;
  return null;
end $$;
comment on function cortex.rollup_token_usage() is
  'Trigger: applies inserted, updated and deleted token_usage rows to the usage_daily rollup (same transaction) through cortex.apply_usage_rollup.';

-- Transition tables allow one event per trigger, hence three triggers on one function.
create trigger token_usage_rollup_insert after insert on cortex.token_usage
  referencing new table as new_rows for each statement execute function cortex.rollup_token_usage();
create trigger token_usage_rollup_update after update on cortex.token_usage
  referencing old table as old_rows new table as new_rows for each statement execute function cortex.rollup_token_usage();
create trigger token_usage_rollup_delete after delete on cortex.token_usage
  referencing old table as old_rows for each statement execute function cortex.rollup_token_usage();

create or replace function cortex.rebuild_usage_daily(p_tenant_id uuid default null) returns bigint
language plpgsql volatile set search_path = '' as $$
declare
  r record;
  v_rows bigint;
begin
  -- Blocks new usage rows until commit, so no trigger upsert races the rebuild.
  lock table cortex.token_usage in share mode;
  delete from cortex.usage_daily d where p_tenant_id is null or d.tenant_id = p_tenant_id;
  -- One tenant-month at a time (the aggregate is additive), so memory stays bounded.
  for r in
    select u.tenant_id, date_trunc('month', u.created_at) as m
    from cortex.token_usage u where p_tenant_id is null or u.tenant_id = p_tenant_id
    group by 1, 2 order by 1, 2
  loop
    perform cortex.apply_usage_rollup(array(
      select u from cortex.token_usage u
      where u.tenant_id = r.tenant_id and u.created_at >= r.m and u.created_at < r.m + interval '1 month'), 1);
  end loop;
  select count(*) into v_rows from cortex.usage_daily d where p_tenant_id is null or d.tenant_id = p_tenant_id;
  return v_rows;
end $$;
comment on function cortex.rebuild_usage_daily(uuid) is
  'Recomputes the usage_daily rollup from token_usage (cortex.apply_usage_rollup, one tenant-month at a time) for one tenant (all when null); returns the rollup rows written. Operators only.';

-- Local days depend on the time zone: when a tenant moves, its rollup is recomputed.
create or replace function cortex.tenant_time_zone_changed() returns trigger
language plpgsql set search_path = '' as $$
begin
  perform cortex.rebuild_usage_daily(new.id);
  return null;
end $$;
comment on function cortex.tenant_time_zone_changed() is
  'Trigger: rebuilds the tenant''s usage_daily rollup when its time zone changes (local days move).';
create trigger tenants_rebuild_usage_daily after update of time_zone on cortex.tenants
  for each row when (old.time_zone is distinct from new.time_zone)
  execute function cortex.tenant_time_zone_changed();

-- Backfill: usage recorded before this migration (the trigger above now covers new rows; creating
-- it locked token_usage, so nothing slips between the two).
select cortex.rebuild_usage_daily(null);

-- Helpers ----------------------------------------------------------------------------------------

create or replace function cortex.usage_periods() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['day', 'week', 'month'];
end $$;
comment on function cortex.usage_periods() is 'Periods of usage_summary: the current day, ISO week (from Monday) or month in the tenant''s time zone.';

create or replace function cortex.budget_recommendations() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['proceed', 'use_haiku', 'defer', 'alert_human'];
end $$;
comment on function cortex.budget_recommendations() is
  'Recommendations of a budget check, by the share of the daily budget used after the operation: <= 80 % proceed, <= 95 % use_haiku, <= 100 % defer, over alert_human.';

create or replace function cortex.tenant_time_zone(p_tenant_id uuid) returns text
language sql stable set search_path = '' as $$
  select coalesce((select t.time_zone from cortex.tenants t where t.id = p_tenant_id), 'UTC')
$$;
comment on function cortex.tenant_time_zone(uuid) is 'The tenant''s IANA time zone (UTC when unknown).';

create or replace function cortex.iso_local(p_ts timestamptz, p_time_zone text) returns text
language plpgsql stable set search_path = '' as $$
declare
  v_local timestamp := p_ts at time zone p_time_zone;
  v_offset int := extract(epoch from v_local - (p_ts at time zone 'UTC'))::int;
begin
  if v_offset = 0 then
    return to_char(v_local, 'YYYY-MM-DD"T"HH24:MI:SS"Z"');
  end if;
  return to_char(v_local, 'YYYY-MM-DD"T"HH24:MI:SS')
    || case when v_offset < 0 then '-' else '+' end
    || lpad((abs(v_offset) / 3600)::text, 2, '0') || ':' || lpad((abs(v_offset) % 3600 / 60)::text, 2, '0');
end $$;
comment on function cortex.iso_local(timestamptz, text) is
  'ISO-8601 local time in a time zone with its offset (2025-01-28T00:00:00-08:00; Z when the offset is 0).';

create or replace function cortex.agent_daily_budget(p_tenant_id uuid, p_agent text) returns bigint
language plpgsql stable set search_path = '' as $$
declare v_budget bigint;
begin
  if p_agent is null or btrim(p_agent) = '' then
    raise exception 'agent is required' using errcode = '22023', column = 'agent';
  end if;
  select coalesce(c.daily_token_budget, 100000) into v_budget
  from cortex.agents a left join cortex.agent_config c on c.tenant_id = a.tenant_id and c.agent = a.name
  where a.tenant_id = p_tenant_id and a.name = p_agent;
  if not found then
    -- 22023 (422) like every other unknown-agent argument (cortex.check_agent).
    raise exception 'unknown agent "%"', left(p_agent, 100)
      using errcode = '22023', column = 'agent', hint = 'use the name of an agent of your tenant';
  end if;
  return v_budget;
end $$;
comment on function cortex.agent_daily_budget(uuid, text) is
  'Daily token budget of an agent of the tenant; SQLSTATE 22023 naming agent when the agent is unknown.';

create or replace function cortex.lock_budget(p_tenant_id uuid, p_agent text) returns date
language plpgsql volatile set search_path = '' as $$
declare v_day date := (now() at time zone cortex.tenant_time_zone(p_tenant_id))::date;
begin
  -- Held until the transaction ends: the next spender of this agent today waits for our usage row.
  perform pg_catalog.pg_advisory_xact_lock(
    pg_catalog.hashtextextended('cortex.budget:' || p_tenant_id::text || ':' || p_agent || ':' || v_day::text, 0));
  return v_day;
end $$;
comment on function cortex.lock_budget(uuid, text) is
  'Takes the transaction-level advisory lock of (tenant, agent, local day) that serialises budget spenders; returns the day.';

create or replace function cortex.budget_status(p_tenant_id uuid, p_agent text, p_estimated_tokens bigint default 0)
returns jsonb
language plpgsql stable set search_path = '' as $$
declare
  v_tz text := cortex.tenant_time_zone(p_tenant_id);
  v_day date := (now() at time zone v_tz)::date;
  v_resets timestamptz := (v_day + 1)::timestamp at time zone v_tz;
  v_budget bigint;
  v_used bigint;
  v_reserved bigint;
  v_after bigint;
  v_recommendation text;
begin
  v_budget := cortex.agent_daily_budget(p_tenant_id, p_agent);
  if p_estimated_tokens is null or p_estimated_tokens < 0 then
    raise exception 'estimated_tokens must be 0 or more' using errcode = '22023', column = 'estimated_tokens';
  end if;
  -- The rollup only: at most one row per model the agent used today.
  select coalesce(sum(d.total_tokens), 0) into v_used
  from cortex.usage_daily d where d.tenant_id = p_tenant_id and d.day = v_day and d.agent = p_agent;
  -- Model calls under way (reserved, not settled, not expired: cortex.token_reservations,
  -- created in 001900_usage_reservations; plpgsql resolves it when called).
  select coalesce(sum(r.estimated_tokens), 0) into v_reserved
  from cortex.token_reservations r
  where r.tenant_id = p_tenant_id and r.agent = p_agent and r.day = v_day and r.expires_at > clock_timestamp();
  v_after := v_used + v_reserved + p_estimated_tokens;
  -- Integer comparisons, so a band edge (exactly 80 % or 95 %) is never blurred by rounding.
  v_recommendation := (cortex.budget_recommendations())[case
    when v_after > v_budget then 4
    when v_after * 100 > v_budget * 95 then 3
    when v_after * 100 > v_budget * 80 then 2
    else 1 end];
  return jsonb_build_object(
    'agent', p_agent,
    'daily_budget', v_budget,
    'used_today', v_used,
    'reserved_tokens', v_reserved,
    'remaining', greatest(v_budget - v_used - v_reserved, 0),
    'estimated_tokens', p_estimated_tokens,
    'within_budget', v_after <= v_budget,
    'recommendation', v_recommendation,
    'budget_percentage_used', case when v_budget > 0 then round(v_used * 100.0 / v_budget, 1)
                                   when v_used > 0 then 100 else 0 end,
    'budget_percentage_after', case when v_budget > 0 then round(v_after * 100.0 / v_budget, 1)
                                    when v_after > 0 then 100 else 0 end,
    'day', v_day,
    'time_zone', v_tz,
    'resets_at', cortex.iso_local(v_resets, v_tz),
    'retry_after_seconds', greatest(ceil(extract(epoch from v_resets - clock_timestamp())), 1)::int);
end $$;
comment on function cortex.budget_status(uuid, text, bigint) is
  'Budget check of an agent for an operation of p_estimated_tokens, read from usage_daily and the open reservations (cortex.token_reservations) for today in the tenant''s time zone: '
  '{agent, daily_budget, used_today, reserved_tokens, remaining, estimated_tokens, within_budget, recommendation, budget_percentage_used, '
  'budget_percentage_after, day, time_zone, resets_at, retry_after_seconds}. Recommendation from the share used after the '
  'operation (used + reserved + estimated): <= 80 % proceed, <= 95 % use_haiku, <= 100 % defer, over 100 % alert_human (within_budget false).';

create or replace function cortex.refuse_usage(
  p_tenant_id uuid, p_agent text, p_model text, p_operation text, p_input_tokens int, p_output_tokens int,
  p_contact_id uuid, p_interaction_id uuid, p_status jsonb
) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare v_notification bigint;
begin
  -- record_token_usage and notify hold an API caller to its tenant, to writing and to its own agent.
  perform cortex.record_token_usage(p_tenant_id, p_agent, p_model, p_operation, p_input_tokens, p_output_tokens,
                                    p_contact_id, p_interaction_id, true);
  -- One alert per agent, day and budget: a retry storm is one dashboard alert (every refusal stays
  -- in token_usage and usage_daily.refused); raising the budget and exceeding it again alerts again.
  v_notification := cortex.notify(
    p_tenant_id, 'budget.exceeded', 'monitor',
    jsonb_build_object('agent', p_agent, 'day', p_status -> 'day', 'daily_budget', p_status -> 'daily_budget',
                       'used_today', p_status -> 'used_today', 'requested_tokens', p_input_tokens::bigint + p_output_tokens,
                       'model', p_model, 'operation', p_operation, 'recommendation', p_status -> 'recommendation',
                       'resets_at', p_status -> 'resets_at'),
    format('budget.exceeded:%s:%s:%s', p_agent, p_status ->> 'day', p_status ->> 'daily_budget'));
  return p_status || jsonb_build_object(
    'refused', true, 'model', p_model, 'operation', p_operation, 'input_tokens', p_input_tokens,
    'output_tokens', p_output_tokens, 'total_tokens', p_input_tokens::bigint + p_output_tokens,
    'monitor_notified', v_notification is not null);
end $$;
comment on function cortex.refuse_usage(uuid, text, text, text, int, int, uuid, uuid, jsonb) is
  'Records a refused operation (token_usage.budget_exceeded = true) and notifies the monitor (budget.exceeded, once per agent, day and budget); returns the check with refused = true.';

create or replace function cortex.enforce_budget(
  p_tenant_id uuid, p_agent text, p_estimated_tokens int, p_model text default null, p_operation text default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare v_status jsonb;
begin
  -- An API caller gates its own work (an admin anyone's), in its own tenant.
  perform cortex.guard_acting_agent(p_tenant_id, p_agent);
  perform cortex.agent_daily_budget(p_tenant_id, p_agent);
  if p_estimated_tokens is null or p_estimated_tokens < 0 then
    raise exception 'estimated_tokens must be 0 or more' using errcode = '22023', column = 'estimated_tokens';
  end if;
  perform cortex.lock_budget(p_tenant_id, p_agent);
  -- A new statement after the lock: under READ COMMITTED it sees the previous holder's usage.
  v_status := cortex.budget_status(p_tenant_id, p_agent, p_estimated_tokens);
  if not (v_status ->> 'within_budget')::boolean then
    return cortex.refuse_usage(p_tenant_id, p_agent, coalesce(nullif(btrim(p_model), ''), 'unknown'),
                               coalesce(nullif(btrim(p_operation), ''), 'preflight'), p_estimated_tokens, 0,
                               null, null, v_status);
  end if;
  return v_status || jsonb_build_object('refused', false);
end $$;
comment on function cortex.enforce_budget(uuid, text, int, text, text) is
  'Pre-flight budget gate for Cortex''s own model work: under the (tenant, agent, day) lock, returns the budget check with refused=false, '
  'or records a refused row (input_tokens = estimate) and notifies the monitor and returns refused=true. The lock lasts until the caller commits; '
  'record the actual call afterwards with cortex.record_token_usage.';

grant execute on function cortex.usage_periods(), cortex.budget_recommendations(),
  cortex.tenant_time_zone(uuid), cortex.iso_local(timestamptz, text),
  cortex.agent_daily_budget(uuid, text), cortex.lock_budget(uuid, text), cortex.budget_status(uuid, text, bigint),
  cortex.refuse_usage(uuid, text, text, text, int, int, uuid, uuid, jsonb),
  cortex.enforce_budget(uuid, text, int, text, text) to authenticated, service_role;

-- API ----------------------------------------------------------------------------------------------

create or replace function public.budget_check(agent text default null, estimated_tokens int default 0)
returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_column
declare v_tenant uuid := cortex.require_tenant();
begin
  return cortex.budget_status(v_tenant, coalesce(budget_check.agent, cortex.current_agent()),
                              coalesce(budget_check.estimated_tokens, 0));
end $$;
comment on function public.budget_check(text, int) is
  'GET /usage/budget-check/:agent. Whether an operation of estimated_tokens fits the agent''s (default: the caller''s) daily budget, '
  'read from the daily rollup for today in the tenant''s time zone: {agent, daily_budget, used_today, remaining, estimated_tokens, '
  'within_budget, recommendation, budget_percentage_used, budget_percentage_after, day, time_zone, resets_at, retry_after_seconds}. '
  'Recommendation from the share of the budget used after the operation: <= 80 % proceed; > 80 % to 95 % use_haiku; '
  '> 95 % to 100 % defer; over 100 % alert_human (within_budget false). SQLSTATE 22023 naming agent (unknown) or estimated_tokens (< 0).';
grant execute on function public.budget_check(text, int) to authenticated;

create or replace function public.record_usage(
  model text default null,
  operation text default null,
  input_tokens int default null,
  output_tokens int default null,
  contact_id uuid default null,
  interaction_id uuid default null,
  agent text default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_caller text := cortex.current_agent();
  v_agent text := coalesce(record_usage.agent, v_caller);
  v_status jsonb;
  v_usage jsonb;
begin
  -- Recording usage is a write (docs: a read-only agent's writes are 403).
  perform cortex.require_writer();
  perform cortex.agent_daily_budget(v_tenant, v_agent);
  perform cortex.guard_acting_agent(v_tenant, v_agent);
  if nullif(btrim(record_usage.model), '') is null or length(record_usage.model) > 200 then
    raise exception 'model is required (at most 200 characters)' using errcode = '22023', column = 'model';
  end if;
  if nullif(btrim(record_usage.operation), '') is null or length(record_usage.operation) > 100 then
    raise exception 'operation is required (at most 100 characters)' using errcode = '22023', column = 'operation';
  end if;
  if record_usage.input_tokens is null or record_usage.input_tokens < 0 then
    raise exception 'input_tokens must be 0 or more' using errcode = '22023', column = 'input_tokens';
  end if;
  if record_usage.output_tokens is null or record_usage.output_tokens < 0 then
    raise exception 'output_tokens must be 0 or more' using errcode = '22023', column = 'output_tokens';
  end if;
  if record_usage.contact_id is not null and not exists (
      select from cortex.contacts c where c.tenant_id = v_tenant and c.id = record_usage.contact_id) then
    perform cortex.contact_not_found(record_usage.contact_id);
  end if;
  if record_usage.interaction_id is not null and not exists (
      select from cortex.interactions i where i.tenant_id = v_tenant and i.id = record_usage.interaction_id) then
    raise exception 'interaction % not found', record_usage.interaction_id
      using errcode = 'P0002', column = 'interaction_id';
  end if;

  perform cortex.lock_budget(v_tenant, v_agent);
  -- Read after the lock (a new statement, a new snapshot): the previous spender's row is counted.
  v_status := cortex.budget_status(v_tenant, v_agent,
                                   record_usage.input_tokens::bigint + record_usage.output_tokens);
  if not (v_status ->> 'within_budget')::boolean then
    return cortex.refuse_usage(v_tenant, v_agent, record_usage.model, record_usage.operation,
                               record_usage.input_tokens, record_usage.output_tokens, record_usage.contact_id,
                               record_usage.interaction_id, v_status);
  end if;
  v_usage := cortex.record_token_usage(v_tenant, v_agent, record_usage.model, record_usage.operation,
                                       record_usage.input_tokens, record_usage.output_tokens,
                                       record_usage.contact_id, record_usage.interaction_id, false);
  return v_usage || jsonb_build_object(
    'refused', false, 'agent', v_agent, 'operation', record_usage.operation,
    'total_tokens', record_usage.input_tokens::bigint + record_usage.output_tokens,
    'budget', cortex.budget_status(v_tenant, v_agent, 0));
end $$;
comment on function public.record_usage(text, text, int, int, uuid, uuid, text) is
  'Records a model call of the calling agent (agent: another agent, for admin agents only) against its daily budget. Spenders of one agent '
  'are serialised by an advisory lock per (tenant, agent, day). Within budget: the call is recorded and {refused: false, model, input_tokens, '
  'output_tokens, total_tokens, cost_usd, budget: <check after it>} returned. Over budget: the call is recorded with budget_exceeded = true, '
  'the monitor is notified (budget.exceeded, once per agent, day and budget) and the budget check is returned with refused: true, '
  'recommendation alert_human and retry_after_seconds until the tenant''s midnight (the HTTP edge answers 429). '
  'SQLSTATE 22023 naming agent, model, operation, input_tokens or output_tokens; P0002 naming contact_id or interaction_id; '
  '42501 for a read-only agent, or for another agent than the caller unless the caller is an admin.';
grant execute on function public.record_usage(text, text, int, int, uuid, uuid, text) to authenticated;

create or replace function public.usage_summary(period text default 'day', agent text default null)
returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_tz text := cortex.tenant_time_zone(v_tenant);
  v_today date := (now() at time zone v_tz)::date;
  v_period text := coalesce(usage_summary.period, 'day');
  v_start date;
  v_end date;
  v_totals jsonb;
  v_by_agent jsonb;
  v_by_model jsonb;
  v_budgets jsonb;
begin
  perform cortex.check_enum('period', v_period, cortex.usage_periods());
  if usage_summary.agent is not null then
    perform cortex.agent_daily_budget(v_tenant, usage_summary.agent);
  end if;
  -- Calendar periods to date in the tenant's time zone; weeks start on Monday (ISO).
  v_start := case v_period
    when 'day' then v_today
    when 'week' then date_trunc('week', v_today::timestamp)::date
    else date_trunc('month', v_today::timestamp)::date end;
  v_end := case v_period
    when 'day' then v_start + 1
    when 'week' then v_start + 7
    else (v_start + interval '1 month')::date end;

  select jsonb_build_object(
           'input_tokens', coalesce(sum(d.input_tokens), 0), 'output_tokens', coalesce(sum(d.output_tokens), 0),
           'total_tokens', coalesce(sum(d.total_tokens), 0), 'cost_usd', coalesce(sum(d.cost_usd), 0),
           'operations', coalesce(sum(d.operations), 0), 'refused', coalesce(sum(d.refused), 0))
  into v_totals
  from cortex.usage_daily d
  where d.tenant_id = v_tenant and d.day >= v_start and d.day < v_end
    and (usage_summary.agent is null or d.agent = usage_summary.agent);

  select coalesce(jsonb_object_agg(a.agent, jsonb_build_object(
           'input_tokens', a.input_tokens, 'output_tokens', a.output_tokens, 'total_tokens', a.total_tokens,
           'cost_usd', a.cost_usd, 'operations', a.operations, 'refused', a.refused,
           'avg_tokens_per_operation', case when a.operations > 0 then round(a.total_tokens::numeric / a.operations)
                                            else 0 end)), '{}')
  into v_by_agent
  from (select d.agent, sum(d.input_tokens) as input_tokens, sum(d.output_tokens) as output_tokens,
               sum(d.total_tokens) as total_tokens, sum(d.cost_usd) as cost_usd, sum(d.operations) as operations,
               sum(d.refused) as refused
        from cortex.usage_daily d
        where d.tenant_id = v_tenant and d.day >= v_start and d.day < v_end
          and (usage_summary.agent is null or d.agent = usage_summary.agent)
        group by d.agent) a;

  select coalesce(jsonb_object_agg(m.model, jsonb_build_object(
           'tokens', m.total_tokens, 'cost_usd', m.cost_usd, 'operations', m.operations)), '{}')
  into v_by_model
  from (select d.model, sum(d.total_tokens) as total_tokens, sum(d.cost_usd) as cost_usd,
               sum(d.operations) as operations
        from cortex.usage_daily d
        where d.tenant_id = v_tenant and d.day >= v_start and d.day < v_end
          and (usage_summary.agent is null or d.agent = usage_summary.agent)
        group by d.model) m;

  -- Budgets are daily: their status is always today's, whatever the period.
  select coalesce(jsonb_object_agg(c.agent, jsonb_build_object(
           'used', u.used, 'budget', c.daily_token_budget, 'remaining', greatest(c.daily_token_budget - u.used, 0))), '{}')
  into v_budgets
  from cortex.agent_config c
  cross join lateral (select coalesce(sum(d.total_tokens), 0) as used from cortex.usage_daily d
                      where d.tenant_id = v_tenant and d.day = v_today and d.agent = c.agent) u
  where c.tenant_id = v_tenant and (usage_summary.agent is null or c.agent = usage_summary.agent);

  return jsonb_build_object(
    'period', v_period,
    'agent', usage_summary.agent,
    'start', cortex.iso_local(v_start::timestamp at time zone v_tz, v_tz),
    'end', cortex.iso_local(v_end::timestamp at time zone v_tz, v_tz),
    'time_zone', v_tz,
    'totals', v_totals,
    'by_agent', v_by_agent,
    'by_model', v_by_model,
    'budget_status', v_budgets);
end $$;
comment on function public.usage_summary(text, text) is
  'GET /usage/summary. Token usage of the current day, week (from Monday) or month in the tenant''s time zone, optionally for one agent, '
  'from the daily rollup: {period, agent, start, end (exclusive; ISO with the zone''s offset), time_zone, totals {input_tokens, output_tokens, '
  'total_tokens, cost_usd, operations, refused}, by_agent {name: {input_tokens, output_tokens, total_tokens, cost_usd, operations, refused, '
  'avg_tokens_per_operation}}, by_model {model: {tokens, cost_usd, operations}}, budget_status {agent: {used, budget, remaining}} for today}. '
  'SQLSTATE 22023 naming period (not day, week or month) or agent (unknown).';
grant execute on function public.usage_summary(text, text) to authenticated;
