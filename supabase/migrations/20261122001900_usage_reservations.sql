-- Budgets for Cortex's own model calls: reserve before the call, settle after (seed 000: "every
-- endpoint respects budgets").
--
-- Before a model call (an interaction summary, a handoff briefing, a context generation) Cortex
-- reserves its estimate under the same per (tenant, agent, local day) advisory lock as
-- public.record_usage: estimate = input tokens (ceil(chars / 4) of the prompt) + the agent's
-- max_output_tokens (the call's output cap, so the answer cannot exceed it). Open reservations
-- count against the budget (cortex.budget_status), so concurrent calls of one agent cannot
-- overshoot it together. After the call, cortex.settle_reservation releases the reservation in the
-- transaction that records the call's actual usage. A reservation never settled (a worker killed
-- mid-call) expires after its TTL (10 minutes by default): budget_status ignores it from then on,
-- and the next reservation of the agent deletes it.
--
-- The reservation answers with the action Cortex takes, following the budget's recommendation
-- (the share of the daily budget used once spent, reserved and estimated tokens are counted):
--   proceed      <= 80 %   the agent's model: agent_config.default_model, or complex_task_model
--                          for complex work (the caller says which)
--   use_haiku    <= 95 %   the cheaper model ('haiku')
--   defer        <= 100 %  work that can wait (background summaries and context generation) is
--                          queued for the tenant's next midnight (run_at) and nothing is reserved;
--                          work that cannot wait (a handoff's briefing) proceeds with 'haiku'
--   local        over      no remote call: the deterministic local generator does the work, its
--                          call is recorded with budget_exceeded = true (counted as refused, not
--                          spent) and the monitor is notified once per agent and day (the same
--                          budget.exceeded notification, and idempotency key, as a refusal)
-- No write is refused or lost on the budget's account; the 429 stays for callers who ask to spend
-- (public.record_usage).

create or replace function cortex.reservation_actions() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['proceed', 'use_haiku', 'defer', 'local'];
end $$;
comment on function cortex.reservation_actions() is
  'What cortex.reserve_tokens tells Cortex to do: proceed (the agent''s model), use_haiku (the cheaper model), defer (queue the work for the tenant''s midnight; nothing is reserved), local (over budget: the local generator, marked).';
grant execute on function cortex.reservation_actions() to authenticated, service_role;

create table cortex.token_reservations (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  id uuid not null default gen_random_uuid(),
  agent text not null,
  day date not null,
  operation text not null,
  -- proceed | use_haiku | local (a local reservation holds 0 tokens; it marks the call it settles).
  action text not null check (action = any (cortex.reservation_actions()) and action <> 'defer'),
  estimated_tokens bigint not null check (estimated_tokens >= 0),
  contact_id uuid,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  primary key (tenant_id, id),
  foreign key (tenant_id, agent) references cortex.agents (tenant_id, name) on delete cascade
);
comment on table cortex.token_reservations is
  'Open token reservations of Cortex''s own model calls (cortex.reserve_tokens), counted against the agent''s daily budget until settled (cortex.settle_reservation) or expired.';
create index token_reservations_agent_day on cortex.token_reservations (tenant_id, agent, day);

alter table cortex.token_reservations enable row level security;
create policy "Reservations are visible to agents of their tenant" on cortex.token_reservations
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
grant select on cortex.token_reservations to authenticated;

-- The budget.exceeded notification to the monitor, once per agent, day and budget: the same event,
-- payload and idempotency key as cortex.refuse_usage, so a refusal and a local fallback of the same
-- agent on the same day are one notification.
create or replace function cortex.notify_budget_exceeded(
  p_tenant_id uuid, p_agent text, p_model text, p_operation text, p_requested_tokens bigint, p_status jsonb
) returns boolean
language plpgsql volatile set search_path = '' as $$
begin
  return cortex.notify(
    p_tenant_id, 'budget.exceeded', 'monitor',
    jsonb_build_object('agent', p_agent, 'day', p_status -> 'day', 'daily_budget', p_status -> 'daily_budget',
                       'used_today', p_status -> 'used_today', 'requested_tokens', p_requested_tokens,
                       'model', p_model, 'operation', p_operation, 'recommendation', p_status -> 'recommendation',
                       'resets_at', p_status -> 'resets_at'),
    format('budget.exceeded:%s:%s:%s', p_agent, p_status ->> 'day', p_status ->> 'daily_budget')) is not null;
end $$;
comment on function cortex.notify_budget_exceeded(uuid, text, text, text, bigint, jsonb) is
  'Queues budget.exceeded for the monitor once per agent, day and budget (the key cortex.refuse_usage uses); true when this call queued it.';

create or replace function cortex.reserve_tokens(
  p_tenant_id uuid, p_agent text, p_operation text, p_input_tokens int,
  p_complex boolean default false, p_can_defer boolean default false, p_contact_id uuid default null,
  p_ttl_seconds int default 600
) returns jsonb
language plpgsql volatile security definer set search_path = '' as $$
declare
  v_agent text := p_agent;
  v_cfg cortex.agent_config;
  v_max_out int;
  v_estimate bigint;
  v_status jsonb;
  v_action text;
  v_model text;
  v_id uuid;
  v_notified boolean := false;
begin
  -- An API caller reserves for its own work (an admin for anyone's), as a writing agent.
  if cortex.guard_writer(p_tenant_id) then
    perform cortex.guard_acting_agent(p_tenant_id, v_agent);
  elsif v_agent is null or not exists (
      select from cortex.agents a where a.tenant_id = p_tenant_id and a.name = v_agent) then
    -- The worker, for work of no agent (an interaction logged for a human): the tenant's system agent.
    v_agent := 'system';
  end if;
  if nullif(btrim(p_operation), '') is null or length(p_operation) > 100 then
    raise exception 'operation is required (at most 100 characters)' using errcode = '22023', column = 'operation';
  end if;
  if p_input_tokens is null or p_input_tokens < 0 then
    raise exception 'input_tokens must be 0 or more' using errcode = '22023', column = 'input_tokens';
  end if;
  if p_ttl_seconds is null or p_ttl_seconds not between 1 and 86400 then
    raise exception 'ttl_seconds must be between 1 and 86400' using errcode = '22023', column = 'ttl_seconds';
  end if;
  select * into v_cfg from cortex.agent_config c where c.tenant_id = p_tenant_id and c.agent = v_agent;
  -- The output cap of the call is the agent's max_output_tokens (the table's default without a row).
  v_max_out := coalesce(v_cfg.max_output_tokens, 500);
  v_estimate := p_input_tokens::bigint + v_max_out;

  perform cortex.lock_budget(p_tenant_id, v_agent);
  -- Reservations of crashed callers: already ignored by budget_status, gone from now on.
  delete from cortex.token_reservations r
  where r.tenant_id = p_tenant_id and r.agent = v_agent and r.expires_at <= clock_timestamp();
  -- A new statement after the lock: under READ COMMITTED it sees the previous holder's reservation.
  v_status := cortex.budget_status(p_tenant_id, v_agent, v_estimate);
  v_action := case v_status ->> 'recommendation'
    when 'proceed' then 'proceed'
    when 'use_haiku' then 'use_haiku'
    when 'defer' then case when coalesce(p_can_defer, false) then 'defer' else 'use_haiku' end
    else 'local' end;
  -- Model aliases ('haiku', 'sonnet') or model ids; null: the service's configured default.
  v_model := case v_action
    when 'proceed' then case when coalesce(p_complex, false) then v_cfg.complex_task_model else v_cfg.default_model end
    when 'use_haiku' then 'haiku' end;

  if v_action <> 'defer' then
    insert into cortex.token_reservations (tenant_id, agent, day, operation, action, estimated_tokens, contact_id, expires_at)
    values (p_tenant_id, v_agent, (v_status ->> 'day')::date, p_operation, v_action,
            case when v_action = 'local' then 0 else v_estimate end, p_contact_id,
            clock_timestamp() + make_interval(secs => p_ttl_seconds))
    returning id into v_id;
  end if;
  if v_action = 'local' then
    v_notified := cortex.notify_budget_exceeded(p_tenant_id, v_agent, coalesce(v_cfg.default_model, 'default'),
                                                p_operation, v_estimate, v_status);
  end if;
  return jsonb_build_object(
    'reservation_id', v_id, 'agent', v_agent, 'operation', p_operation, 'action', v_action,
    'recommendation', v_status ->> 'recommendation', 'model', v_model, 'max_output_tokens', v_max_out,
    'estimated_tokens', v_estimate,
    'run_at', case when v_action = 'defer' then v_status -> 'resets_at' end,
    'monitor_notified', v_notified, 'budget', v_status);
end $$;
comment on function cortex.reserve_tokens(uuid, text, text, int, boolean, boolean, uuid, int) is
  'Before one of Cortex''s own model calls: under the (tenant, agent, day) budget lock, reserves input tokens + the agent''s max_output_tokens '
  'and answers what to do: {reservation_id, agent, operation, action (proceed | use_haiku | defer | local), recommendation, model (the agent''s '
  'default_model, complex_task_model when p_complex, haiku for use_haiku; null: the service default), max_output_tokens, estimated_tokens, '
  'run_at (defer: the tenant''s next midnight), monitor_notified, budget}. defer only when p_can_defer (else use_haiku) and reserves nothing; '
  'local (over budget) reserves 0 tokens and notifies the monitor once per agent and day. Settle with cortex.settle_reservation. '
  'An API caller must be a writing agent of p_tenant_id reserving for itself unless admin; the worker reserves for the system agent when p_agent is no agent.';
revoke execute on function cortex.reserve_tokens(uuid, text, text, int, boolean, boolean, uuid, int) from public, anon;
grant execute on function cortex.reserve_tokens(uuid, text, text, int, boolean, boolean, uuid, int) to authenticated;

create or replace function cortex.settle_reservation(
  p_tenant_id uuid, p_reservation_id uuid, p_usage jsonb default null,
  p_contact_id uuid default null, p_interaction_id uuid default null
) returns jsonb
language plpgsql volatile security definer set search_path = '' as $$
declare
  v_api boolean := cortex.guard_writer(p_tenant_id);
  v_res cortex.token_reservations;
  v_last uuid := nullif(pg_catalog.current_setting('cortex.last_usage_id', true), '')::uuid;
  v_agent text;
  v_usage_id uuid;
  v_recorded jsonb;
  v_meta jsonb;
begin
  select * into v_res from cortex.token_reservations r where r.tenant_id = p_tenant_id and r.id = p_reservation_id;
  v_agent := coalesce(v_res.agent, p_usage ->> 'agent', cortex.current_agent(), 'system');
  if v_api then
    perform cortex.guard_acting_agent(p_tenant_id, v_agent);
  end if;
  delete from cortex.token_reservations r where r.tenant_id = p_tenant_id and r.id = p_reservation_id;
  v_meta := jsonb_strip_nulls(jsonb_build_object(
    'reservation_id', p_reservation_id, 'budget_action', v_res.action,
    'estimated_tokens', v_res.estimated_tokens, 'error', left(p_usage ->> 'error', 500)));

  -- The write that preceded this call in the transaction (log_interaction, store_context,
  -- create_handoff, record_interaction_analysis) recorded the call already: attach to that row.
  if v_last is not null then
    update cortex.token_usage u
    set budget_exceeded = v_res.action is not distinct from 'local', metadata = u.metadata || v_meta
    where u.tenant_id = p_tenant_id and u.id = v_last and u.agent = v_agent
    returning u.id into v_usage_id;
  end if;
  -- Otherwise (a failed call, a write that recorded nothing): record what the call reported.
  if v_usage_id is null and p_usage is not null then
    v_recorded := cortex.record_token_usage(
      p_tenant_id, v_agent, coalesce(nullif(p_usage ->> 'model', ''), 'unknown'),
      coalesce(p_usage ->> 'operation', v_res.operation, 'unknown'),
      coalesce((p_usage ->> 'input_tokens')::int, 0), coalesce((p_usage ->> 'output_tokens')::int, 0),
      coalesce(p_contact_id, v_res.contact_id), p_interaction_id, v_res.action is not distinct from 'local');
    v_usage_id := nullif(pg_catalog.current_setting('cortex.last_usage_id', true), '')::uuid;
    update cortex.token_usage u set metadata = u.metadata || v_meta
    where u.tenant_id = p_tenant_id and u.id = v_usage_id;
  end if;
  perform pg_catalog.set_config('cortex.last_usage_id', '', true);
  return jsonb_build_object('reservation_id', p_reservation_id, 'released', v_res.id is not null,
                            'usage_id', v_usage_id, 'budget_exceeded', v_res.action is not distinct from 'local');
end $$;
comment on function cortex.settle_reservation(uuid, uuid, jsonb, uuid, uuid) is
  'After the model call: releases the reservation, in the transaction that records the call. When a write earlier in the transaction recorded '
  'the call (cortex.record_token_usage remembers its row), that row is marked (metadata.reservation_id, budget_action; budget_exceeded for a '
  'local fallback); otherwise p_usage {model, operation, input_tokens, output_tokens, error} is recorded (a failed call: what the API reported, '
  '0 when nothing). An API caller must be a writing agent of p_tenant_id settling its own reservation unless admin.';
revoke execute on function cortex.settle_reservation(uuid, uuid, jsonb, uuid, uuid) from public, anon;
grant execute on function cortex.settle_reservation(uuid, uuid, jsonb, uuid, uuid) to authenticated;

-- Deferred work --------------------------------------------------------------------------------

-- The worker: a running job whose model work the budget deferred goes back to the queue until
-- run_at, with its attempt refunded (it did not fail).
create or replace function cortex.defer_job(p_tenant_id uuid, p_id bigint, p_worker text, p_run_at timestamptz)
returns boolean
language sql volatile set search_path = '' as $$
  with u as (
    update cortex.jobs j set status = 'queued', run_at = greatest(p_run_at, now()),
                             attempts = greatest(j.attempts - 1, 0), locked_by = null, locked_until = null
    where j.tenant_id = p_tenant_id and j.id = p_id and j.locked_by = p_worker and j.status = 'running'
    returning 1)
  select exists (select from u)
$$;
comment on function cortex.defer_job(uuid, bigint, text, timestamptz) is
  'Worker: puts a running job back in the queue until p_run_at (the budget deferred its model work), its attempt refunded; false when this worker no longer holds it.';
revoke execute on function cortex.defer_job(uuid, bigint, text, timestamptz) from public, anon, authenticated, service_role;

-- The HTTP path: the summary of an interaction just logged, deferred by the budget, waits for run_at.
create or replace function cortex.postpone_interaction_summary(p_tenant_id uuid, p_interaction_id uuid, p_run_at timestamptz)
returns timestamptz
language plpgsql volatile security definer set search_path = '' as $$
declare v_run_at timestamptz;
begin
  perform cortex.guard_writer(p_tenant_id);
  update cortex.jobs j set run_at = greatest(j.run_at, p_run_at)
  where j.tenant_id = p_tenant_id and j.kind = 'summarise_interaction' and j.dedup_key = p_interaction_id::text
    and j.status = 'queued'
  returning j.run_at into v_run_at;
  return v_run_at;
end $$;
comment on function cortex.postpone_interaction_summary(uuid, uuid, timestamptz) is
  'Moves the queued summarise_interaction job of an interaction to p_run_at (the budget deferred it); returns its run_at, null when none is queued. '
  'An API caller must be a writing agent of p_tenant_id.';
revoke execute on function cortex.postpone_interaction_summary(uuid, uuid, timestamptz) from public, anon;
grant execute on function cortex.postpone_interaction_summary(uuid, uuid, timestamptz) to authenticated;

-- Checks before a model call ---------------------------------------------------------------------

-- The checks of public.log_interaction that need no lock, so the HTTP path refuses a read-only
-- caller and bad input, and answers a repeated external_id, before it summarises (no model call is
-- spent on a request that would not be written). log_interaction repeats them in its transaction.
create or replace function cortex.check_interaction_request(
  p_contact_id uuid, p_type text, p_direction text default null, p_sentiment text default null,
  p_intent text default null, p_external_id text default null, p_metadata jsonb default null,
  p_agent text default null, p_human_id text default null, p_raw_content text default null
) returns jsonb
language plpgsql stable set search_path = '' as $$
declare
  v_tenant uuid := cortex.require_tenant();
  v_caller text := cortex.require_writer();
  v_agent text := coalesce(p_agent, v_caller);
  v_existing cortex.interactions;
begin
  if p_contact_id is null then
    raise exception 'contact_id is required' using errcode = '22023', column = 'contact_id';
  end if;
  if p_type is null then
    raise exception 'type is required' using errcode = '22023', column = 'type';
  end if;
  perform cortex.check_enum('type', p_type, cortex.interaction_types());
  perform cortex.check_enum('direction', p_direction, cortex.interaction_directions());
  perform cortex.check_enum('sentiment', p_sentiment, cortex.sentiments());
  perform cortex.check_enum('intent', p_intent, cortex.intents());
  if v_agent <> v_caller and v_agent <> 'human' then
    raise exception 'agent must be the calling agent ("%") or "human"', v_caller
      using errcode = '22023', column = 'agent';
  end if;
  if v_agent = 'human' and p_human_id is null then
    raise exception 'human_id is required when agent is "human"' using errcode = '22023', column = 'human_id';
  end if;
  if p_metadata is not null and jsonb_typeof(p_metadata) <> 'object' then
    raise exception 'metadata must be a JSON object' using errcode = '22023', column = 'metadata';
  end if;
  if length(p_raw_content) > 1000000 then
    raise exception 'raw_content must be at most 1,000,000 characters' using errcode = '22023', column = 'raw_content';
  end if;
  if not exists (select from cortex.contacts c where c.tenant_id = v_tenant and c.id = p_contact_id) then
    perform cortex.contact_not_found(p_contact_id);
  end if;
  if p_external_id is not null then
    select * into v_existing from cortex.interactions i
    where i.tenant_id = v_tenant and i.contact_id = p_contact_id and i.type = p_type and i.external_id = p_external_id;
    if found then
      return jsonb_build_object('agent', v_caller, 'duplicate', cortex.interaction_json(v_existing, false)
        || jsonb_build_object('duplicate', true, 'token_usage', null, 'context_refresh_triggered', false));
    end if;
  end if;
  return jsonb_build_object('agent', v_caller, 'duplicate', null);
end $$;
comment on function cortex.check_interaction_request(uuid, text, text, text, text, text, jsonb, text, text, text) is
  'Validates a log_interaction request without writing (a writing caller, known contact, vocabularies, agent/human_id, metadata, size) and finds a '
  'repeated external_id: {agent: the caller, duplicate: the response log_interaction gives for it, or null}. SQLSTATE 22023 naming the field, '
  'P0002 for an unknown contact, 42501 for a read-only agent.';
grant execute on function cortex.check_interaction_request(uuid, text, text, text, text, text, jsonb, text, text, text)
  to authenticated, service_role;

grant execute on function cortex.notify_budget_exceeded(uuid, text, text, text, bigint, jsonb) to authenticated, service_role;
