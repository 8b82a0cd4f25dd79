-- The interaction log: append-only, one row per touchpoint, summarised at write time.
-- Raw fields never change after insert; the analysis (summary, key points, sentiment, intent,
-- token count) is written once, either with the row (HTTP path) or later by the worker.

create or replace function cortex.interaction_types() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['email_sent', 'email_received', 'ticket_opened', 'ticket_resolved', 'call', 'note',
               'order_placed', 'refund_processed', 'nudge_sent', 'sequence_started', 'sequence_completed'];
end $$;
comment on function cortex.interaction_types() is 'Allowed interaction types (the table''s check constraint).';

create or replace function cortex.sentiments() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['positive', 'neutral', 'negative', 'escalation'];
end $$;
comment on function cortex.sentiments() is 'Allowed sentiments of an interaction (seed 000).';

create or replace function cortex.intents() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['question', 'complaint', 'complaint_resolved', 'purchase_intent', 'churn_risk', 'info_request',
               'scheduling', 'feedback', 'other'];
end $$;
comment on function cortex.intents() is 'Allowed intents of an interaction.';

create or replace function cortex.interaction_directions() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['inbound', 'outbound'];
end $$;
comment on function cortex.interaction_directions() is 'Allowed interaction directions.';

create or replace function cortex.analysis_statuses() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['pending', 'done'];
end $$;
comment on function cortex.analysis_statuses() is 'Allowed analysis statuses of an interaction: pending until its analysis is written once, then done.';

create table cortex.interactions (
  tenant_id uuid not null,
  id uuid not null default gen_random_uuid(),
  contact_id uuid not null,
  agent text not null check (agent ~ '^[a-z][a-z0-9_-]{0,62}$'),
  human_id text check (length(human_id) <= 200),
  type text not null check (type = any (cortex.interaction_types())),
  direction text check (direction = any (cortex.interaction_directions())),
  subject text check (length(subject) <= 1000),
  raw_content text check (length(raw_content) <= 1000000),
  summary text,
  sentiment text check (sentiment = any (cortex.sentiments())),
  key_points text[],
  intent text check (intent = any (cortex.intents())),
  external_id text check (length(external_id) <= 200),
  campaign_id text check (length(campaign_id) <= 200),
  thread_id text check (length(thread_id) <= 200),
  metadata jsonb not null default '{}' check (jsonb_typeof(metadata) = 'object'),
  token_count int check (token_count >= 0),
  analysis_status text not null default 'pending' check (analysis_status = any (cortex.analysis_statuses())),
  analysis_model text,
  analysed_at timestamptz,
  -- Wall clock, not transaction start: several interactions logged in one transaction keep their order.
  created_at timestamptz not null default clock_timestamp(),
  -- When it happened (ordering, recency, last touch): given on import, else created_at (trigger in
  -- …001700_interactions_import). Never in the future beyond a small clock skew.
  occurred_at timestamptz not null check (occurred_at <= created_at + interval '5 minutes'),
  primary key (tenant_id, id),
  foreign key (tenant_id, contact_id) references cortex.contacts (tenant_id, id) on delete cascade,
  check (agent <> 'human' or human_id is not null)
);
comment on table cortex.interactions is 'Append-only log of every touchpoint with a contact; summaries are what context is built from.';
create index interactions_contact on cortex.interactions (tenant_id, contact_id, occurred_at desc);
create index interactions_tenant_agent on cortex.interactions (tenant_id, agent, created_at desc);
create index interactions_thread on cortex.interactions (tenant_id, thread_id, created_at) where thread_id is not null;
create index interactions_pending on cortex.interactions (tenant_id, created_at) where analysis_status = 'pending';
-- The same external event logged twice (a retried request) is one interaction.
create unique index interactions_external on cortex.interactions (tenant_id, contact_id, type, external_id)
  where external_id is not null;

create or replace function cortex.interactions_append_only() returns trigger
language plpgsql set search_path = '' as $$
begin
  if (new.tenant_id, new.id, new.contact_id, new.agent, new.human_id, new.type, new.direction, new.subject,
      new.raw_content, new.external_id, new.campaign_id, new.thread_id, new.metadata, new.created_at)
     is distinct from
     (old.tenant_id, old.id, old.contact_id, old.agent, old.human_id, old.type, old.direction, old.subject,
      old.raw_content, old.external_id, old.campaign_id, old.thread_id, old.metadata, old.created_at) then
    raise exception 'interactions are append-only: their recorded fields cannot change'
      using errcode = '55000', hint = 'log a new interaction instead';
  end if;
  if old.analysis_status = 'done' and
     (new.summary, new.key_points, new.sentiment, new.intent, new.token_count, new.analysis_model, new.analysis_status)
     is distinct from
     (old.summary, old.key_points, old.sentiment, old.intent, old.token_count, old.analysis_model, old.analysis_status) then
    raise exception 'the analysis of interaction % is already written', old.id using errcode = '55000';
  end if;
  return new;
end $$;
comment on function cortex.interactions_append_only() is 'Trigger: recorded fields never change; the analysis is written once.';
create trigger interactions_append_only before update on cortex.interactions
  for each row execute function cortex.interactions_append_only();

-- Not even the owner deletes from the log. Rows go only with their contact (the erasure of a
-- person: `delete from cortex.contacts`, which cascades) or their tenant (which cascades through
-- its contacts), or in a transaction that declared an erasure (cortex.begin_erasure, the documented
-- maintenance path; see the tenancy migration). TRUNCATE is refused outright.
create or replace function cortex.interactions_no_delete() returns trigger
language plpgsql set search_path = '' as $$
begin
  if tg_op = 'DELETE'
     and (cortex.erasure_declared()
          or not exists (select from cortex.contacts c where c.tenant_id = old.tenant_id and c.id = old.contact_id)) then
    return old;
  end if;
  raise exception 'interactions are append-only: they cannot be deleted'
    using errcode = '55000',
          hint = 'interactions go only with their contact or tenant (erasure), or after select cortex.begin_erasure(<reason>)';
end $$;
comment on function cortex.interactions_no_delete() is
  'Trigger: refuses DELETE and TRUNCATE of interactions for every role, the owner included (SQLSTATE 55000), except the cascade of a deleted contact or tenant, or a DELETE after cortex.begin_erasure.';
create trigger interactions_no_delete before delete on cortex.interactions
  for each row execute function cortex.interactions_no_delete();
create trigger interactions_no_truncate before truncate on cortex.interactions
  for each statement execute function cortex.interactions_no_delete();

alter table cortex.interactions enable row level security;
create policy "Interactions are visible to agents of their tenant" on cortex.interactions
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
create policy "Writing agents log interactions in their tenant" on cortex.interactions
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write()));
-- No update or delete grant for any API role: the log is append-only.
grant select, insert on cortex.interactions to authenticated;

-- Whether an interaction changes what an agent should know enough to regenerate context now.
create or replace function cortex.is_significant(p_type text, p_sentiment text, p_intent text) returns boolean
language sql immutable set search_path = '' as $$
  select p_type in ('order_placed', 'refund_processed', 'ticket_opened', 'ticket_resolved', 'sequence_completed')
      or p_sentiment in ('negative', 'escalation')
      or p_intent in ('churn_risk', 'purchase_intent', 'complaint')
$$;
comment on function cortex.is_significant(text, text, text) is
  'True for interactions that should regenerate working context at once (orders, refunds, tickets, negative sentiment, churn or purchase intent).';

grant execute on function cortex.interaction_types(), cortex.sentiments(), cortex.intents(),
  cortex.interaction_directions(), cortex.analysis_statuses(), cortex.is_significant(text, text, text)
  to authenticated, service_role;

create or replace function cortex.interaction_json(i cortex.interactions, p_include_raw boolean) returns jsonb
language sql stable set search_path = '' as $$
  select jsonb_build_object(
    'id', i.id, 'contact_id', i.contact_id, 'agent', i.agent, 'human_id', i.human_id, 'type', i.type,
    'direction', i.direction, 'subject', i.subject, 'summary', i.summary, 'sentiment', i.sentiment,
    'key_points', to_jsonb(i.key_points), 'intent', i.intent, 'external_id', i.external_id,
    'campaign_id', i.campaign_id, 'thread_id', i.thread_id, 'metadata', i.metadata,
    'token_count', i.token_count, 'analysis_status', i.analysis_status, 'created_at', i.created_at,
    'occurred_at', i.occurred_at)
  || case when p_include_raw then jsonb_build_object('raw_content', i.raw_content) else '{}'::jsonb end
$$;
comment on function cortex.interaction_json(cortex.interactions, boolean) is 'API representation of an interaction; raw_content only when asked.';
grant execute on function cortex.interaction_json(cortex.interactions, boolean) to authenticated, service_role;

-- Writes the analysis once, records its usage, and queues a context refresh when significant.
-- Shared by log_interaction (analysis given with the row) and the worker (analysis later).
create or replace function cortex.record_interaction_analysis(
  p_tenant_id uuid, p_interaction_id uuid, p_analysis jsonb, p_usage jsonb
) returns jsonb
language plpgsql volatile security definer set search_path = '' as $$
declare
  v_row cortex.interactions;
  v_usage jsonb := null;
  v_tokens int;
  v_refresh boolean;
begin
  -- Definer (API roles cannot update the log): the rules of log_interaction, a writing agent of
  -- the tenant (its usage, recorded below, is held to the caller by record_token_usage).
  perform cortex.guard_writer(p_tenant_id);
  if p_analysis is null or jsonb_typeof(p_analysis) <> 'object' then
    raise exception 'analysis must be a JSON object' using errcode = '22023', column = 'analysis';
  end if;
  perform cortex.check_enum('sentiment', p_analysis ->> 'sentiment', cortex.sentiments());
  perform cortex.check_enum('intent', p_analysis ->> 'intent', cortex.intents());
  if nullif(btrim(p_analysis ->> 'summary'), '') is null then
    raise exception 'summary is required' using errcode = '22023', column = 'summary';
  end if;
  -- Lock order (docs/architecture.md): the contact row first, then the interaction, then the context.
  perform from cortex.contacts c
  where c.tenant_id = p_tenant_id
    and c.id = (select i.contact_id from cortex.interactions i where i.tenant_id = p_tenant_id and i.id = p_interaction_id)
  for no key update;
  if p_usage is not null then
    v_usage := cortex.record_token_usage(
      p_tenant_id, coalesce(p_usage ->> 'agent', cortex.current_agent(), 'system'), p_usage ->> 'model',
      coalesce(p_usage ->> 'operation', 'summarize'), (p_usage ->> 'input_tokens')::int,
      (p_usage ->> 'output_tokens')::int, (p_usage ->> 'contact_id')::uuid, p_interaction_id);
    v_tokens := (v_usage ->> 'input_tokens')::int + (v_usage ->> 'output_tokens')::int;
  end if;
  update cortex.interactions i set
    summary = left(p_analysis ->> 'summary', 2000),
    key_points = coalesce((select array_agg(left(k, 500)) from jsonb_array_elements_text(
                   coalesce(p_analysis -> 'key_points', '[]')) k), '{}'),
    sentiment = p_analysis ->> 'sentiment',
    intent = p_analysis ->> 'intent',
    token_count = v_tokens,
    analysis_model = v_usage ->> 'model',
    analysis_status = 'done',
    analysed_at = now()
  where i.tenant_id = p_tenant_id and i.id = p_interaction_id
  returning i.* into v_row;
  if not found then
    raise exception 'interaction % not found', p_interaction_id using errcode = 'P0002', column = 'interaction_id';
  end if;
  -- Only news refreshes at once: an old (imported) interaction makes the context stale by count.
  v_refresh := cortex.is_significant(v_row.type, v_row.sentiment, v_row.intent)
               and v_row.occurred_at > now() - interval '24 hours';
  if v_refresh then
    perform cortex.request_context_refresh(p_tenant_id, v_row.contact_id, 'interaction');
  end if;
  return jsonb_build_object('token_usage', v_usage, 'context_refresh_triggered', v_refresh);
end $$;
comment on function cortex.record_interaction_analysis(uuid, uuid, jsonb, jsonb) is
  'Writes an interaction''s analysis once (summary, key_points, sentiment, intent), records the model call in token_usage, and queues a context refresh when the interaction is significant. '
  'An API caller must be a writing agent of p_tenant_id (cortex.guard_writer), recording usage for itself unless admin.';
revoke execute on function cortex.record_interaction_analysis(uuid, uuid, jsonb, jsonb) from public, anon;
grant execute on function cortex.record_interaction_analysis(uuid, uuid, jsonb, jsonb) to authenticated;

-- The PostgREST path's summary job. Definer (API roles cannot queue jobs themselves): it queues
-- only a summary of an interaction of the caller's tenant that still waits for one.
create or replace function cortex.queue_interaction_summary(p_tenant_id uuid, p_interaction_id uuid) returns bigint
language plpgsql volatile security definer set search_path = '' as $$
declare v_row cortex.interactions;
begin
  perform cortex.guard_writer(p_tenant_id);
  select * into v_row from cortex.interactions i where i.tenant_id = p_tenant_id and i.id = p_interaction_id;
  if not found then
    raise exception 'interaction % not found', p_interaction_id
      using errcode = 'P0002', column = 'interaction_id', hint = 'log the interaction first (log_interaction)';
  end if;
  if v_row.analysis_status <> 'pending' then
    return null;  -- already analysed: nothing to queue
  end if;
  return cortex.enqueue_job(p_tenant_id, 'summarise_interaction',
    jsonb_build_object('interaction_id', v_row.id, 'agent', v_row.agent), v_row.id::text);
end $$;
comment on function cortex.queue_interaction_summary(uuid, uuid) is
  'Queues the summarise_interaction job of a pending interaction (once; null when already analysed). An API caller must be a writing agent of p_tenant_id (cortex.guard_writer); P0002 naming interaction_id when unknown.';
revoke execute on function cortex.queue_interaction_summary(uuid, uuid) from public, anon;
grant execute on function cortex.queue_interaction_summary(uuid, uuid) to authenticated;

create or replace function public.log_interaction(
  contact_id uuid,
  type text,
  direction text default null,
  subject text default null,
  raw_content text default null,
  summary text default null,
  key_points text[] default null,
  sentiment text default null,
  intent text default null,
  external_id text default null,
  campaign_id text default null,
  thread_id text default null,
  metadata jsonb default null,
  agent text default null,
  human_id text default null,
  usage jsonb default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_caller text := cortex.require_writer();
  v_agent text := coalesce(log_interaction.agent, v_caller);
  v_row cortex.interactions;
  v_result jsonb := '{}';
  v_existing cortex.interactions;
begin
  if contact_id is null then
    raise exception 'contact_id is required' using errcode = '22023', column = 'contact_id';
  end if;
  if log_interaction.type is null then
    raise exception 'type is required' using errcode = '22023', column = 'type';
  end if;
  perform cortex.check_enum('type', log_interaction.type, cortex.interaction_types());
  perform cortex.check_enum('direction', log_interaction.direction, cortex.interaction_directions());
  perform cortex.check_enum('sentiment', log_interaction.sentiment, cortex.sentiments());
  perform cortex.check_enum('intent', log_interaction.intent, cortex.intents());
  -- An agent logs as itself, or on behalf of a named human.
  if v_agent <> v_caller and v_agent <> 'human' then
    raise exception 'agent must be the calling agent ("%") or "human"', v_caller
      using errcode = '22023', column = 'agent';
  end if;
  if v_agent = 'human' and log_interaction.human_id is null then
    raise exception 'human_id is required when agent is "human"' using errcode = '22023', column = 'human_id';
  end if;
  if metadata is not null and jsonb_typeof(metadata) <> 'object' then
    raise exception 'metadata must be a JSON object' using errcode = '22023', column = 'metadata';
  end if;
  if length(raw_content) > 1000000 then
    raise exception 'raw_content must be at most 1,000,000 characters' using errcode = '22023', column = 'raw_content';
  end if;

  -- Lock the contact: its counters change with the log, and a concurrent log must see them.
  -- Lock order (docs/architecture.md): the contact row first, then its context row.
  perform from cortex.contacts c
  where c.tenant_id = v_tenant and c.id = log_interaction.contact_id for no key update;
  if not found then
    perform cortex.contact_not_found(log_interaction.contact_id);
  end if;

  if external_id is not null then
    select * into v_existing from cortex.interactions i
    where i.tenant_id = v_tenant and i.contact_id = log_interaction.contact_id
      and i.type = log_interaction.type and i.external_id = log_interaction.external_id;
    if found then
      return cortex.interaction_json(v_existing, false) || jsonb_build_object('duplicate', true,
        'token_usage', null, 'context_refresh_triggered', false);
    end if;
  end if;

  insert into cortex.interactions as i (tenant_id, contact_id, agent, human_id, type, direction, subject,
                                        raw_content, external_id, campaign_id, thread_id, metadata)
  values (v_tenant, log_interaction.contact_id, v_agent, log_interaction.human_id, log_interaction.type,
          log_interaction.direction, log_interaction.subject, log_interaction.raw_content,
          log_interaction.external_id, log_interaction.campaign_id, log_interaction.thread_id,
          coalesce(log_interaction.metadata, '{}'))
  returning i.* into v_row;

  update cortex.contacts c set
    interaction_count = c.interaction_count + 1,
    first_touch_at = least(coalesce(c.first_touch_at, v_row.occurred_at), v_row.occurred_at),
    last_touch_at = greatest(coalesce(c.last_touch_at, v_row.occurred_at), v_row.occurred_at),
    last_touch_agent = case when c.last_touch_at > v_row.occurred_at then c.last_touch_agent else v_agent end
  where c.tenant_id = v_tenant and c.id = log_interaction.contact_id;

  if log_interaction.summary is not null then
    -- Analysis given with the row (the HTTP edge summarised it, or the caller brought its own).
    v_result := cortex.record_interaction_analysis(v_tenant, v_row.id, jsonb_build_object(
      'summary', log_interaction.summary, 'key_points', to_jsonb(coalesce(log_interaction.key_points, '{}')),
      'sentiment', coalesce(log_interaction.sentiment, 'neutral'), 'intent', coalesce(log_interaction.intent, 'other')),
      case when usage is null then null
           -- The model call was the caller's, also when it logs on behalf of a human.
           else usage || jsonb_build_object('agent', v_caller, 'contact_id', log_interaction.contact_id) end);
  else
    -- The worker summarises it; the job is queued in this transaction, so it cannot be lost.
    perform cortex.queue_interaction_summary(v_tenant, v_row.id);
    v_result := jsonb_build_object('token_usage', null, 'context_refresh_triggered', false);
  end if;

  select * into v_row from cortex.interactions i where i.tenant_id = v_tenant and i.id = v_row.id;
  return cortex.interaction_json(v_row, false) || v_result || jsonb_build_object('duplicate', false);
end $$;
comment on function public.log_interaction(uuid, text, text, text, text, text, text[], text, text, text, text, text, jsonb, text, text, jsonb) is
  'Appends an interaction for a contact and updates the contact''s touch times. With a summary it is analysed at once; without one a summarise job is queued in the same transaction. A repeated external_id returns the first row (duplicate=true).';
grant execute on function public.log_interaction(uuid, text, text, text, text, text, text[], text, text, text, text, text, jsonb, text, text, jsonb) to authenticated;

create or replace function public.list_interactions(
  contact_id uuid,
  agent text default null,
  type text default null,
  since timestamptz default null,
  "limit" int default 20,
  include_raw boolean default false
) returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_items jsonb;
begin
  if list_interactions.contact_id is null then
    raise exception 'contact_id is required' using errcode = '22023', column = 'contact_id';
  end if;
  perform cortex.check_enum('type', list_interactions.type, cortex.interaction_types());
  if list_interactions."limit" is null or list_interactions."limit" not between 1 and 100 then
    raise exception 'limit must be between 1 and 100' using errcode = '22023', column = 'limit';
  end if;
  if not exists (select from cortex.contacts c where c.tenant_id = v_tenant and c.id = list_interactions.contact_id) then
    perform cortex.contact_not_found(list_interactions.contact_id);
  end if;
  select coalesce(jsonb_agg(cortex.interaction_json(r, coalesce(list_interactions.include_raw, false))
                            order by r.occurred_at desc, r.id), '[]')
  into v_items
  from (
    select * from cortex.interactions i
    where i.tenant_id = v_tenant and i.contact_id = list_interactions.contact_id
      and (list_interactions.agent is null or i.agent = list_interactions.agent)
      and (list_interactions.type is null or i.type = list_interactions.type)
      and (list_interactions.since is null or i.occurred_at >= list_interactions.since)
    order by i.occurred_at desc, i.id
    limit list_interactions."limit"
  ) r;
  return jsonb_build_object('items', v_items, 'limit', list_interactions."limit");
end $$;
comment on function public.list_interactions(uuid, text, text, timestamptz, int, boolean) is
  'A contact''s interactions, newest first, filtered by agent, type and since; summaries only unless include_raw.';
grant execute on function public.list_interactions(uuid, text, text, timestamptz, int, boolean) to authenticated;

-- The worker's read of an interaction it is about to summarise (owner only: API roles never call it).
create or replace function cortex.interaction_for_analysis(p_tenant_id uuid, p_interaction_id uuid)
returns jsonb language sql stable set search_path = '' as $$
  select jsonb_build_object('type', i.type, 'subject', i.subject, 'raw_content', i.raw_content, 'agent', i.agent,
                            'contact_id', i.contact_id, 'analysis_status', i.analysis_status)
  from cortex.interactions i
  where i.tenant_id = p_tenant_id and i.id = p_interaction_id;
$$;
comment on function cortex.interaction_for_analysis(uuid, uuid) is
  'What the worker needs to summarise one interaction (type, subject, raw content, agent, contact, analysis status); null when unknown. Owner only.';
revoke execute on function cortex.interaction_for_analysis(uuid, uuid) from public, anon, authenticated;
