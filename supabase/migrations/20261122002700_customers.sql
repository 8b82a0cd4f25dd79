-- Customers (issue 11, seed 002): two customer agents on Cortex's own memory.
--
--   Customers are contacts. The seed's lifecycle status maps onto the contact's stage
--   (cortex.customer_status_stage) and the exact status is kept in custom_fields.lifecycle_status;
--   the seed's `info` is the contact's custom_fields (merged atomically by merge_customer_info).
--   The seed's customer events are interactions (the interaction types gain meeting, email, task,
--   milestone, status_change and artifact_created; note and call existed).
--   New here, each tenant-scoped with RLS: agreements, receivables, projects and artifacts.
--
--   build_customer_context renders the seed's markdown context in one function, with its health
--   signals and its token budget (about 3,000 tokens, ceil(chars / 4)) cut in the seed's three
--   rounds; the agents' tools are the API functions below, called as the speaking agent, so RLS
--   and the writer rules apply to them as to everyone. A handoff between the two agents is recorded
--   as a Cortex handoff, completed at once (record_customer_handoff).

-- Vocabularies -----------------------------------------------------------------------------------

create or replace function cortex.interaction_types() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['email_sent', 'email_received', 'ticket_opened', 'ticket_resolved', 'call', 'note',
               'order_placed', 'refund_processed', 'nudge_sent', 'sequence_started', 'sequence_completed',
               -- seed 002's customer events (note and call are above)
               'meeting', 'email', 'task', 'milestone', 'status_change', 'artifact_created'];
end $$;
comment on function cortex.interaction_types() is
  'Allowed interaction types (the table''s check constraint); the last six are seed 002''s customer events.';

create or replace function cortex.customer_statuses() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['lead', 'prospect', 'active', 'paused', 'churned', 'archived'];
end $$;
comment on function cortex.customer_statuses() is
  'Seed 002''s customer lifecycle statuses (mapped onto contact stages by cortex.customer_status_stage).';

create or replace function cortex.customer_status_stage(p_status text) returns text
language sql immutable parallel safe set search_path = '' as $$
  select case p_status
    when 'lead' then 'prospect' when 'prospect' then 'qualified' when 'active' then 'customer'
    when 'paused' then 'churning' when 'churned' then 'lost' when 'archived' then 'lost' end
$$;
comment on function cortex.customer_status_stage(text) is
  'The contact stage a seed 002 status maps to: lead->prospect, prospect->qualified, active->customer, paused->churning, churned->lost, archived->lost.';

create or replace function cortex.customer_stage_status(p_stage text) returns text
language sql immutable parallel safe set search_path = '' as $$
  select case p_stage
    when 'prospect' then 'lead' when 'qualified' then 'prospect' when 'opportunity' then 'prospect'
    when 'customer' then 'active' when 'recovered' then 'active' when 'churning' then 'paused'
    when 'lost' then 'churned' end
$$;
comment on function cortex.customer_stage_status(text) is
  'The seed 002 status a contact stage reads as when no lifecycle_status was set (the inverse of customer_status_stage; opportunity reads as prospect, recovered as active).';

create or replace function cortex.customer_event_types() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['note', 'meeting', 'email', 'call', 'task', 'milestone'];
end $$;
comment on function cortex.customer_event_types() is 'The event types an agent may log (seed 002''s createEventLogEntry); all are interaction types.';

create or replace function cortex.customer_project_statuses() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['planning', 'active', 'on_hold', 'completed'];
end $$;
comment on function cortex.customer_project_statuses() is 'A customer project''s status (seed 002).';

create or replace function cortex.customer_artifact_types() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['strategy', 'research', 'roadmap', 'spec', 'analysis', 'report', 'other'];
end $$;
comment on function cortex.customer_artifact_types() is 'A customer artifact''s type (seed 002).';

create or replace function cortex.customer_artifact_statuses() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['draft', 'review', 'final'];
end $$;
comment on function cortex.customer_artifact_statuses() is 'A customer artifact''s status (seed 002).';

create or replace function cortex.customer_agreement_statuses() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['draft', 'active', 'suspended', 'terminated'];
end $$;
comment on function cortex.customer_agreement_statuses() is
  'An agreement''s status; suspended and terminated agreements raise no expiry signal.';

create or replace function cortex.customer_receivable_types() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['invoice', 'credit_note'];
end $$;
comment on function cortex.customer_receivable_types() is 'A receivable''s type; only invoices count as invoiced or overdue.';

create or replace function cortex.customer_agents() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['customer_mgmt', 'product_mgmt'];
end $$;
comment on function cortex.customer_agents() is
  'Seed 002''s two customer agents (agents of a tenant like any other); the first is the default speaker.';

grant execute on function cortex.customer_statuses(), cortex.customer_status_stage(text),
  cortex.customer_stage_status(text), cortex.customer_event_types(), cortex.customer_project_statuses(),
  cortex.customer_artifact_types(), cortex.customer_artifact_statuses(), cortex.customer_agreement_statuses(),
  cortex.customer_receivable_types(), cortex.customer_agents() to authenticated, service_role;

-- Tables -----------------------------------------------------------------------------------------

create table cortex.customer_agreements (
  tenant_id uuid not null,
  id uuid not null default gen_random_uuid(),
  customer_id uuid not null,
  title text not null check (length(btrim(title)) between 1 and 200),
  type text not null default 'retainer' check (length(btrim(type)) between 1 and 50),
  status text not null default 'active' check (status = any (cortex.customer_agreement_statuses())),
  start_date date,
  end_date date,
  amount numeric(14, 2) check (amount >= 0),
  currency text not null default 'USD' check (currency ~ '^[A-Z]{3}$'),
  billing_period text check (length(btrim(billing_period)) between 1 and 30),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant_id, id),
  check (end_date is null or start_date is null or end_date >= start_date),
  foreign key (tenant_id, customer_id) references cortex.contacts (tenant_id, id) on delete cascade
);
comment on table cortex.customer_agreements is 'A customer''s agreements (seed 002): title, type, dates, amount; the end date drives the expiry signal.';
create index customer_agreements_customer on cortex.customer_agreements (tenant_id, customer_id, created_at desc);

create table cortex.customer_receivables (
  tenant_id uuid not null,
  id uuid not null default gen_random_uuid(),
  customer_id uuid not null,
  type text not null default 'invoice' check (type = any (cortex.customer_receivable_types())),
  description text check (length(description) <= 500),
  amount numeric(14, 2) not null check (amount > 0),
  currency text not null default 'USD' check (currency ~ '^[A-Z]{3}$'),
  due_date date not null,
  paid_at timestamptz,
  created_at timestamptz not null default now(),
  primary key (tenant_id, id),
  foreign key (tenant_id, customer_id) references cortex.contacts (tenant_id, id) on delete cascade
);
comment on table cortex.customer_receivables is 'What a customer owes (seed 002): amount, due date, paid or not (paid_at). An unpaid invoice past its due date is overdue.';
create index customer_receivables_customer on cortex.customer_receivables (tenant_id, customer_id, due_date);

create table cortex.customer_projects (
  tenant_id uuid not null,
  id uuid not null default gen_random_uuid(),
  customer_id uuid not null,
  name text not null check (length(btrim(name)) between 1 and 200),
  description text check (length(description) <= 4000),
  status text not null default 'planning' check (status = any (cortex.customer_project_statuses())),
  agreement_id uuid,
  created_by text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant_id, id),
  unique (tenant_id, customer_id, id),
  foreign key (tenant_id, customer_id) references cortex.contacts (tenant_id, id) on delete cascade,
  foreign key (tenant_id, agreement_id) references cortex.customer_agreements (tenant_id, id) on delete set null (agreement_id)
);
comment on table cortex.customer_projects is 'A customer''s projects (seed 002): planning, active, on_hold, completed.';
create index customer_projects_customer on cortex.customer_projects (tenant_id, customer_id, updated_at desc);

create table cortex.customer_artifacts (
  tenant_id uuid not null,
  id uuid not null default gen_random_uuid(),
  customer_id uuid not null,
  project_id uuid not null,
  title text not null check (length(btrim(title)) between 1 and 300),
  type text not null check (type = any (cortex.customer_artifact_types())),
  status text not null default 'draft' check (status = any (cortex.customer_artifact_statuses())),
  content text not null default '' check (length(content) <= 200000),
  created_by text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant_id, id),
  -- An artifact belongs to a project of the same customer.
  foreign key (tenant_id, customer_id, project_id) references cortex.customer_projects (tenant_id, customer_id, id)
    on delete cascade
);
comment on table cortex.customer_artifacts is 'Documents made for a customer within a project (seed 002): type, status (draft, review, final), Markdown content.';
create index customer_artifacts_customer on cortex.customer_artifacts (tenant_id, customer_id, updated_at desc);
create index customer_artifacts_project on cortex.customer_artifacts (tenant_id, project_id, updated_at desc);

create trigger customer_agreements_updated_at before update on cortex.customer_agreements
  for each row execute function cortex.touch_updated_at();
create trigger customer_projects_updated_at before update on cortex.customer_projects
  for each row execute function cortex.touch_updated_at();
create trigger customer_artifacts_updated_at before update on cortex.customer_artifacts
  for each row execute function cortex.touch_updated_at();

alter table cortex.customer_agreements enable row level security;
alter table cortex.customer_receivables enable row level security;
alter table cortex.customer_projects enable row level security;
alter table cortex.customer_artifacts enable row level security;

create policy "Agreements are visible to agents of their tenant" on cortex.customer_agreements
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
create policy "Writing agents add agreements to their tenant" on cortex.customer_agreements
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write()));
create policy "Receivables are visible to agents of their tenant" on cortex.customer_receivables
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
create policy "Writing agents add receivables to their tenant" on cortex.customer_receivables
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write()));
create policy "Projects are visible to agents of their tenant" on cortex.customer_projects
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
create policy "Writing agents add projects to their tenant" on cortex.customer_projects
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write()));
create policy "Artifacts are visible to agents of their tenant" on cortex.customer_artifacts
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
create policy "Writing agents add artifacts to their tenant" on cortex.customer_artifacts
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write()));
create policy "Writing agents change artifacts of their tenant" on cortex.customer_artifacts
  for update to authenticated
  using (tenant_id = (select cortex.current_tenant()))
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write()));
grant select, insert on cortex.customer_agreements, cortex.customer_receivables, cortex.customer_projects
  to authenticated;
grant select, insert, update on cortex.customer_artifacts to authenticated;

-- Helpers -----------------------------------------------------------------------------------------

create or replace function cortex.customer_of_caller(p_customer_id uuid, p_field text default 'customer_id')
returns cortex.contacts
language plpgsql stable set search_path = '' as $$
declare v_row cortex.contacts;
begin
  if p_customer_id is null then
    raise exception '% is required', p_field using errcode = '22023', column = p_field;
  end if;
  select * into v_row from cortex.contacts c
  where c.tenant_id = cortex.require_tenant() and c.id = p_customer_id;
  if not found then
    raise exception 'customer % not found', p_customer_id using errcode = 'P0002', column = p_field,
      hint = 'a customer is a contact of your tenant: create it with POST /api/v1/contacts';
  end if;
  return v_row;
end $$;
comment on function cortex.customer_of_caller(uuid, text) is
  'The caller''s customer (a contact of the caller''s tenant), or SQLSTATE 22023 (no id) / P0002 (unknown here: another tenant''s customer is unknown too), naming p_field.';

create or replace function cortex.customer_money(p_amount numeric, p_currency text) returns text
language sql immutable set search_path = '' as $$
  select case when p_currency = 'USD' then '$' || to_char(p_amount, 'FM999,999,999,990.00')
              else to_char(p_amount, 'FM999,999,999,990.00') || ' ' || p_currency end
$$;
comment on function cortex.customer_money(numeric, text) is 'An amount as the context shows it: $15,000.00 for USD, 15,000.00 EUR otherwise.';

create or replace function cortex.customer_health_signals(p_tenant_id uuid, p_customer_id uuid) returns text[]
language sql stable set search_path = '' as $$
  select array_remove(array[
    (select format('⚠️ %s agreement(s) expiring within 30 days', count(*))
     from cortex.customer_agreements a
     where a.tenant_id = p_tenant_id and a.customer_id = p_customer_id
       and a.status not in ('terminated', 'suspended')
       and a.end_date between current_date and current_date + 30
     having count(*) > 0),
    (select format('⚠️ %s overdue invoice(s) totalling %s', count(*),
                   cortex.customer_money(sum(r.amount), min(r.currency)))
     from cortex.customer_receivables r
     where r.tenant_id = p_tenant_id and r.customer_id = p_customer_id
       and r.type = 'invoice' and r.paid_at is null and r.due_date < current_date
     having count(*) > 0),
    (select case when last is null then '⚠️ No activity recorded yet'
                 when last < now() - interval '14 days'
                   then format('⚠️ No activity in %s days', extract(day from now() - last)::int) end
     from (select max(i.occurred_at) as last from cortex.interactions i
           where i.tenant_id = p_tenant_id and i.contact_id = p_customer_id) x)
  ], null)
$$;
comment on function cortex.customer_health_signals(uuid, uuid) is
  'Seed 002''s health signals for a customer: agreements (not terminated or suspended) ending within 30 days, unpaid invoices past due with their total, no event (interaction) in 14 days.';

create or replace function cortex.render_customer_context(
  p_tenant_id uuid, p_customer_id uuid, p_events int, p_projects int, p_artifacts int, p_agreements int
) returns text
language sql stable set search_path = '' as $$
  with agreements as (
    select a.*, count(*) over () as total, row_number() over (order by a.created_at desc, a.id) as n
    from cortex.customer_agreements a where a.tenant_id = p_tenant_id and a.customer_id = p_customer_id
  ), money as (
    select coalesce(sum(r.amount) filter (where r.type = 'invoice'), 0) as invoiced,
           coalesce(sum(r.amount) filter (where r.type = 'invoice' and r.paid_at is not null), 0) as paid,
           coalesce(min(r.currency), 'USD') as currency, count(*) as n
    from cortex.customer_receivables r where r.tenant_id = p_tenant_id and r.customer_id = p_customer_id
  ), projects as (
    select p.*, count(*) over () as total, row_number() over (order by p.updated_at desc, p.id) as n
    from cortex.customer_projects p
    where p.tenant_id = p_tenant_id and p.customer_id = p_customer_id and p.status <> 'completed'
  ), artifacts as (
    select a.title, a.type, a.status, count(*) over () as total, row_number() over (order by a.updated_at desc, a.id) as n
    from cortex.customer_artifacts a where a.tenant_id = p_tenant_id and a.customer_id = p_customer_id
  ), events as (
    select i.occurred_at, i.type, coalesce(i.subject, i.summary, i.raw_content, '') as what
    from cortex.interactions i where i.tenant_id = p_tenant_id and i.contact_id = p_customer_id
    order by i.occurred_at desc, i.id desc limit p_events
  ), signals as (
    select cortex.customer_health_signals(p_tenant_id, p_customer_id) as list
  )
  select concat_ws(E'\n\n',
    '## Current Customer Context',
    concat_ws(E'\n',
      '**Customer**: ' || cortex.fit_words(cortex.contact_label(c)
        || case when c.company_name is not null and c.company_name <> coalesce(c.name, '')
                then ' (' || c.company_name || ')' else '' end, 300),
      '**Status**: ' || coalesce(c.custom_fields ->> 'lifecycle_status', cortex.customer_stage_status(c.stage)),
      '**Vertical**: ' || cortex.fit_words(nullif(btrim(c.custom_fields ->> 'vertical'), ''), 200),
      '**Persona**: ' || cortex.fit_words(nullif(btrim(c.custom_fields ->> 'persona'), ''), 200),
      '**ICP**: ' || cortex.fit_words(nullif(btrim(c.custom_fields ->> 'icp'), ''), 400)),
    nullif(concat_ws(E'\n',
      '**About**: ' || cortex.fit_words(nullif(btrim(c.custom_fields ->> 'about'), ''), 800),
      '**Product**: ' || cortex.fit_words(nullif(btrim(c.custom_fields ->> 'product'), ''), 800)), ''),
    (select E'**Team**:\n' || string_agg('- ' || cortex.fit_words(
         case jsonb_typeof(m) when 'object' then concat(m ->> 'name', ' (' || (m ->> 'role') || ')') else m #>> '{}' end,
         120), E'\n' order by o)
     from jsonb_array_elements(case when jsonb_typeof(c.custom_fields -> 'team') = 'array' then c.custom_fields -> 'team' end)
          with ordinality as t(m, o) where o <= 10),
    (select format('**Agreements** (%s):', case when max(a.total) > p_agreements
                                               then format('showing %s of %s', p_agreements, max(a.total))
                                               else max(a.total)::text end)
            || E'\n' || string_agg(concat_ws(' | ', '- ' || cortex.fit_words(a.title, 120), a.type,
                 nullif(concat(to_char(a.start_date, 'YYYY-MM'), ' - ', to_char(a.end_date, 'YYYY-MM')), ' - '),
                 nullif(concat_ws(' ', cortex.customer_money(a.amount, a.currency)
                                        || case when a.currency = 'USD' then ' USD' else '' end, a.billing_period), '')),
               E'\n' order by a.n)
     from agreements a where a.n <= p_agreements),
    (select E'**Financial Summary**:\n- Total Invoiced: ' || cortex.customer_money(m.invoiced, m.currency)
            || E'\n- Total Paid: ' || cortex.customer_money(m.paid, m.currency)
            || E'\n- Outstanding: ' || cortex.customer_money(m.invoiced - m.paid, m.currency)
     from money m where m.n > 0),
    (select E'**Health Signals**:\n' || array_to_string(array(select '- ' || s from unnest(list) s), E'\n')
     from signals where cardinality(list) > 0),
    (select format('**Active Projects** (%s):', case when max(p.total) > p_projects
                                                  then format('showing %s of %s', p_projects, max(p.total))
                                                  else max(p.total)::text end)
            || E'\n' || string_agg('- ' || cortex.fit_words(p.name, 120) || ' (' || p.status || ')'
                                   || coalesce(' - ' || cortex.fit_words(nullif(btrim(p.description), ''), 200), ''),
                                   E'\n' order by p.n)
     from projects p where p.n <= p_projects),
    (select format('**Deliverables** (%s total):', max(a.total))
            || E'\n' || string_agg('- ' || cortex.fit_words(a.title, 120) || ' (' || a.type || ', ' || a.status || ')',
                                   E'\n' order by a.n)
     from artifacts a where a.n <= p_artifacts),
    (select format('**Recent Events** (last %s):', count(*))
            || E'\n' || string_agg(format('- [%s] %s: %s', to_char(e.occurred_at at time zone 'UTC', 'YYYY-MM-DD'), e.type,
                                          coalesce(cortex.fit_words(regexp_replace(btrim(e.what), '\s+', ' ', 'g'), 200), '')),
                                   E'\n' order by e.occurred_at desc)
     from events e having count(*) > 0))
  from cortex.contacts c where c.tenant_id = p_tenant_id and c.id = p_customer_id
$$;
comment on function cortex.render_customer_context(uuid, uuid, int, int, int, int) is
  'Seed 002''s customer context in markdown with these list limits (events, active projects, artifacts, agreements): profile (custom_fields: vertical, persona, icp, about, product, team), agreements, financial summary, health signals, active projects, deliverables and recent events (interactions). Long fields are cut at word boundaries. Used by build_customer_context.';

-- API: the context --------------------------------------------------------------------------------

create or replace function public.build_customer_context(customer_id uuid, max_tokens int default 3000)
returns text
language plpgsql stable set search_path = '' as $$
#variable_conflict use_variable
declare
  v_customer cortex.contacts := cortex.customer_of_caller(build_customer_context.customer_id);
  v_budget int := coalesce(build_customer_context.max_tokens, 3000);
  v_text text;
  -- The seed's rounds: all (up to 10 events and artifacts, 20 projects and agreements), then
  -- events to 3, then projects and artifacts to 5, then agreements to 3.
  v_rounds int[] := array[[10, 20, 10, 20], [3, 20, 10, 20], [3, 5, 5, 20], [3, 5, 5, 3]];
  v_round int;
begin
  if v_budget not between 200 and 20000 then
    raise exception 'max_tokens must be between 200 and 20000' using errcode = '22023', column = 'max_tokens';
  end if;
  for v_round in 1 .. 4 loop
    v_text := cortex.render_customer_context(v_customer.tenant_id, v_customer.id, v_rounds[v_round][1],
                                             v_rounds[v_round][2], v_rounds[v_round][3], v_rounds[v_round][4]);
    exit when ceil(length(v_text) / 4.0) <= v_budget;
  end loop;
  -- Past the three rounds (a huge profile): the budget still holds, cut at a word boundary.
  return cortex.fit_words(v_text, v_budget * 4);
end $$;
comment on function public.build_customer_context(uuid, int) is
  'Seed 002''s customer context (markdown, the agents'' system prompt and getCustomerSummary) within max_tokens (default 3000, estimated as ceil(chars / 4)): the 10 newest events and artifacts, projects and agreements; over budget, events go to 3, then projects and artifacts to 5, then agreements to 3, then the text is cut at a word boundary. P0002 for an unknown customer (another tenant''s included).';
grant execute on function public.build_customer_context(uuid, int) to authenticated;

-- API: the tools ----------------------------------------------------------------------------------

create or replace function public.merge_customer_info(cid uuid, new_info jsonb) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_customer cortex.contacts;
  v_row cortex.contacts;
begin
  perform cortex.require_writer();
  v_customer := cortex.customer_of_caller(cid, 'cid');
  if new_info is null or jsonb_typeof(new_info) <> 'object' then
    raise exception 'new_info must be a JSON object' using errcode = '22023', column = 'new_info';
  end if;
  -- One statement: concurrent merges never lose each other's keys.
  update cortex.contacts c set custom_fields = coalesce(c.custom_fields, '{}'::jsonb) || new_info
  where c.tenant_id = v_customer.tenant_id and c.id = v_customer.id
  returning c.* into v_row;
  return jsonb_build_object('customer_id', v_row.id, 'info', v_row.custom_fields, 'merged_keys',
                            to_jsonb(array(select jsonb_object_keys(new_info))));
end $$;
comment on function public.merge_customer_info(uuid, jsonb) is
  'Seed 002''s atomic JSONB merge of new_info into the customer''s info (the contact''s custom_fields): COALESCE(info, ''{}'') || new_info in one UPDATE. Returns {customer_id, info, merged_keys}.';
grant execute on function public.merge_customer_info(uuid, jsonb) to authenticated;

create or replace function public.update_customer_status(customer_id uuid, new_status text, reason text default null)
returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_customer cortex.contacts;
  v_old text;
  v_event jsonb;
begin
  perform cortex.require_writer();
  v_customer := cortex.customer_of_caller(update_customer_status.customer_id);
  if new_status is null then
    raise exception 'new_status is required; one of: %', array_to_string(cortex.customer_statuses(), ', ')
      using errcode = '22023', column = 'new_status';
  end if;
  perform cortex.check_enum('new_status', new_status, cortex.customer_statuses());
  if length(reason) > 1000 then
    raise exception 'reason must be at most 1000 characters' using errcode = '22023', column = 'reason';
  end if;
  -- Lock order (docs/architecture.md): the contact row first, then its interaction.
  select coalesce(c.custom_fields ->> 'lifecycle_status', cortex.customer_stage_status(c.stage)) into v_old
  from cortex.contacts c where c.tenant_id = v_customer.tenant_id and c.id = v_customer.id for no key update;
  update cortex.contacts c
  set stage = cortex.customer_status_stage(new_status),
      custom_fields = c.custom_fields || jsonb_build_object('lifecycle_status', new_status)
  where c.tenant_id = v_customer.tenant_id and c.id = v_customer.id;
  v_event := public.log_interaction(contact_id => v_customer.id, type => 'status_change',
    subject => format('%s -> %s', v_old, new_status) || coalesce(': ' || cortex.fit_words(nullif(btrim(reason), ''), 500), ''),
    metadata => jsonb_build_object('from', v_old, 'to', new_status, 'reason', reason));
  return jsonb_build_object('customer_id', v_customer.id, 'previous_status', v_old, 'status', new_status,
                            'stage', cortex.customer_status_stage(new_status), 'event_id', v_event ->> 'id');
end $$;
comment on function public.update_customer_status(uuid, text, text) is
  'Seed 002''s updateCustomerStatus: sets the customer''s lifecycle status (custom_fields.lifecycle_status, and the stage it maps to) and logs the transition as a status_change interaction ("old -> new: reason"), in one transaction.';
grant execute on function public.update_customer_status(uuid, text, text) to authenticated;

create or replace function public.log_customer_event(customer_id uuid, event_type text, description text)
returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_customer cortex.contacts;
  v_event jsonb;
begin
  perform cortex.require_writer();
  v_customer := cortex.customer_of_caller(log_customer_event.customer_id);
  if event_type is null then
    raise exception 'event_type is required; one of: %', array_to_string(cortex.customer_event_types(), ', ')
      using errcode = '22023', column = 'event_type';
  end if;
  perform cortex.check_enum('event_type', event_type, cortex.customer_event_types());
  if nullif(btrim(description), '') is null or length(description) > 10000 then
    raise exception 'description is required (at most 10000 characters)' using errcode = '22023', column = 'description';
  end if;
  v_event := public.log_interaction(contact_id => v_customer.id, type => event_type,
    subject => cortex.fit_words(regexp_replace(btrim(description), '\s+', ' ', 'g'), 200), raw_content => description);
  return jsonb_build_object('customer_id', v_customer.id, 'event_id', v_event ->> 'id', 'event_type', event_type,
                            'occurred_at', v_event ->> 'occurred_at');
end $$;
comment on function public.log_customer_event(uuid, text, text) is
  'Seed 002''s createEventLogEntry: logs a note, meeting, email, call, task or milestone as an interaction of the customer by the calling agent.';
grant execute on function public.log_customer_event(uuid, text, text) to authenticated;

create or replace function cortex.customer_project_json(p cortex.customer_projects) returns jsonb
language sql stable set search_path = '' as $$
  select jsonb_build_object('id', p.id, 'customer_id', p.customer_id, 'name', p.name, 'description', p.description,
    'status', p.status, 'agreement_id', p.agreement_id, 'created_by', p.created_by,
    'created_at', p.created_at, 'updated_at', p.updated_at,
    'artifact_count', (select count(*) from cortex.customer_artifacts a where a.tenant_id = p.tenant_id and a.project_id = p.id))
$$;
comment on function cortex.customer_project_json(cortex.customer_projects) is 'A project as the API shows it, with its artifact count.';

create or replace function cortex.customer_artifact_json(a cortex.customer_artifacts, p_content boolean) returns jsonb
language sql immutable set search_path = '' as $$
  select jsonb_build_object('id', a.id, 'customer_id', a.customer_id, 'project_id', a.project_id, 'title', a.title,
    'type', a.type, 'status', a.status, 'created_by', a.created_by, 'created_at', a.created_at, 'updated_at', a.updated_at,
    'content_chars', length(a.content))
  || case when p_content then jsonb_build_object('content', a.content) else '{}'::jsonb end
$$;
comment on function cortex.customer_artifact_json(cortex.customer_artifacts, boolean) is 'An artifact as the API shows it (its content only when asked).';
grant execute on function cortex.customer_project_json(cortex.customer_projects),
  cortex.customer_artifact_json(cortex.customer_artifacts, boolean), cortex.customer_of_caller(uuid, text),
  cortex.customer_money(numeric, text), cortex.customer_health_signals(uuid, uuid),
  cortex.render_customer_context(uuid, uuid, int, int, int, int) to authenticated, service_role;

create or replace function public.create_customer_project(
  customer_id uuid, name text, description text default null, status text default 'planning'
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_agent text := cortex.require_writer();
  v_customer cortex.contacts := cortex.customer_of_caller(create_customer_project.customer_id);
  v_row cortex.customer_projects;
begin
  if nullif(btrim(name), '') is null or length(name) > 200 then
    raise exception 'name is required (at most 200 characters)' using errcode = '22023', column = 'name';
  end if;
  if length(description) > 4000 then
    raise exception 'description must be at most 4000 characters' using errcode = '22023', column = 'description';
  end if;
  perform cortex.check_enum('status', coalesce(status, 'planning'), cortex.customer_project_statuses());
  insert into cortex.customer_projects (tenant_id, customer_id, name, description, status, created_by)
  values (v_customer.tenant_id, v_customer.id, btrim(name), nullif(btrim(description), ''), coalesce(status, 'planning'),
          v_agent)
  returning * into v_row;
  return cortex.customer_project_json(v_row);
end $$;
comment on function public.create_customer_project(uuid, text, text, text) is
  'Seed 002''s createProject: a new project of the customer (status planning unless given).';
grant execute on function public.create_customer_project(uuid, text, text, text) to authenticated;

create or replace function public.create_customer_artifact(
  project_id uuid, title text, type text, content text, status text default 'draft'
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_agent text := cortex.require_writer();
  v_project cortex.customer_projects;
  v_row cortex.customer_artifacts;
  v_event jsonb;
begin
  if project_id is null then
    raise exception 'project_id is required' using errcode = '22023', column = 'project_id';
  end if;
  select * into v_project from cortex.customer_projects p
  where p.tenant_id = cortex.require_tenant() and p.id = create_customer_artifact.project_id;
  if not found then
    raise exception 'project % not found', project_id using errcode = 'P0002', column = 'project_id',
      hint = 'list the customer''s projects (listProjects) or create one (createProject)';
  end if;
  if nullif(btrim(title), '') is null or length(title) > 300 then
    raise exception 'title is required (at most 300 characters)' using errcode = '22023', column = 'title';
  end if;
  if type is null then
    raise exception 'type is required; one of: %', array_to_string(cortex.customer_artifact_types(), ', ')
      using errcode = '22023', column = 'type';
  end if;
  perform cortex.check_enum('type', type, cortex.customer_artifact_types());
  perform cortex.check_enum('status', coalesce(status, 'draft'), cortex.customer_artifact_statuses());
  if content is null or length(content) > 200000 then
    raise exception 'content is required (Markdown, at most 200000 characters)' using errcode = '22023', column = 'content';
  end if;
  -- Lock order: the contact first (log_interaction locks it), then the artifact.
  perform from cortex.contacts c where c.tenant_id = v_project.tenant_id and c.id = v_project.customer_id for no key update;
  insert into cortex.customer_artifacts (tenant_id, customer_id, project_id, title, type, status, content, created_by)
  values (v_project.tenant_id, v_project.customer_id, v_project.id, btrim(title), type, coalesce(status, 'draft'),
          content, v_agent)
  returning * into v_row;
  v_event := public.log_interaction(contact_id => v_project.customer_id, type => 'artifact_created',
    subject => cortex.fit_words(format('%s (%s) in %s', v_row.title, v_row.type, v_project.name), 200),
    metadata => jsonb_build_object('artifact_id', v_row.id, 'project_id', v_project.id));
  return cortex.customer_artifact_json(v_row, false) || jsonb_build_object('event_id', v_event ->> 'id');
end $$;
comment on function public.create_customer_artifact(uuid, text, text, text, text) is
  'Seed 002''s createArtifact: a new Markdown document in a project of the caller''s tenant, and an artifact_created interaction of its customer, in one transaction.';
grant execute on function public.create_customer_artifact(uuid, text, text, text, text) to authenticated;

create or replace function public.update_customer_artifact(
  artifact_id uuid, content text default null, title text default null, status text default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_row cortex.customer_artifacts;
begin
  perform cortex.require_writer();
  if artifact_id is null then
    raise exception 'artifact_id is required' using errcode = '22023', column = 'artifact_id';
  end if;
  if content is null and title is null and status is null then
    raise exception 'give at least one of content, title or status' using errcode = '22023', column = 'content';
  end if;
  if title is not null and (btrim(title) = '' or length(title) > 300) then
    raise exception 'title must be 1 to 300 characters' using errcode = '22023', column = 'title';
  end if;
  if length(content) > 200000 then
    raise exception 'content must be at most 200000 characters' using errcode = '22023', column = 'content';
  end if;
  perform cortex.check_enum('status', status, cortex.customer_artifact_statuses());
  update cortex.customer_artifacts a
  set content = coalesce(update_customer_artifact.content, a.content),
      title = coalesce(btrim(update_customer_artifact.title), a.title),
      status = coalesce(update_customer_artifact.status, a.status)
  where a.tenant_id = cortex.require_tenant() and a.id = artifact_id
  returning a.* into v_row;
  if not found then
    raise exception 'artifact % not found', artifact_id using errcode = 'P0002', column = 'artifact_id',
      hint = 'list the customer''s artifacts (listArtifacts)';
  end if;
  return cortex.customer_artifact_json(v_row, false);
end $$;
comment on function public.update_customer_artifact(uuid, text, text, text) is
  'Seed 002''s updateArtifact: changes an artifact''s content, title or status (at least one).';
grant execute on function public.update_customer_artifact(uuid, text, text, text) to authenticated;

create or replace function public.list_customer_projects(customer_id uuid) returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_variable
declare v_customer cortex.contacts := cortex.customer_of_caller(list_customer_projects.customer_id);
begin
  return jsonb_build_object('customer_id', v_customer.id, 'items', coalesce((
    select jsonb_agg(cortex.customer_project_json(p) order by p.updated_at desc, p.id)
    from cortex.customer_projects p where p.tenant_id = v_customer.tenant_id and p.customer_id = v_customer.id), '[]'));
end $$;
comment on function public.list_customer_projects(uuid) is 'Seed 002''s listProjects: the customer''s projects, newest change first.';
grant execute on function public.list_customer_projects(uuid) to authenticated;

create or replace function public.list_customer_artifacts(project_id uuid default null, customer_id uuid default null)
returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.require_tenant();
  v_customer uuid;
begin
  if project_id is null and customer_id is null then
    raise exception 'give project_id or customer_id' using errcode = '22023', column = 'project_id';
  end if;
  if project_id is not null then
    select p.customer_id into v_customer from cortex.customer_projects p where p.tenant_id = v_tenant and p.id = project_id;
    if not found then
      raise exception 'project % not found', project_id using errcode = 'P0002', column = 'project_id';
    end if;
    if customer_id is not null and customer_id <> v_customer then
      raise exception 'project % is not a project of customer %', project_id, customer_id
        using errcode = '22023', column = 'project_id';
    end if;
  else
    v_customer := (cortex.customer_of_caller(customer_id)).id;
  end if;
  return jsonb_build_object('customer_id', v_customer, 'project_id', project_id, 'items', coalesce((
    select jsonb_agg(cortex.customer_artifact_json(a, false) order by a.updated_at desc, a.id)
    from cortex.customer_artifacts a
    where a.tenant_id = v_tenant and a.customer_id = v_customer
      and (list_customer_artifacts.project_id is null or a.project_id = list_customer_artifacts.project_id)), '[]'));
end $$;
comment on function public.list_customer_artifacts(uuid, uuid) is
  'Seed 002''s listArtifacts: the artifacts of a project, or of all the customer''s projects (without their content).';
grant execute on function public.list_customer_artifacts(uuid, uuid) to authenticated;

-- API: agreements and receivables (what the context reads; operators and agents add them) ---------

create or replace function public.add_customer_agreement(
  customer_id uuid, title text, type text default 'retainer', start_date date default null, end_date date default null,
  amount numeric default null, currency text default 'USD', billing_period text default null, status text default 'active'
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_customer cortex.contacts;
  v_row cortex.customer_agreements;
begin
  perform cortex.require_writer();
  v_customer := cortex.customer_of_caller(add_customer_agreement.customer_id);
  if nullif(btrim(title), '') is null or length(title) > 200 then
    raise exception 'title is required (at most 200 characters)' using errcode = '22023', column = 'title';
  end if;
  perform cortex.check_enum('status', coalesce(status, 'active'), cortex.customer_agreement_statuses());
  if end_date < start_date then
    raise exception 'end_date is before start_date' using errcode = '22023', column = 'end_date';
  end if;
  if amount < 0 then
    raise exception 'amount must be 0 or more' using errcode = '22023', column = 'amount';
  end if;
  if coalesce(currency, 'USD') !~ '^[A-Z]{3}$' then
    raise exception 'currency must be an ISO 4217 code such as USD' using errcode = '22023', column = 'currency';
  end if;
  insert into cortex.customer_agreements (tenant_id, customer_id, title, type, status, start_date, end_date, amount,
                                          currency, billing_period)
  values (v_customer.tenant_id, v_customer.id, btrim(title), coalesce(nullif(btrim(type), ''), 'retainer'),
          coalesce(status, 'active'), start_date, end_date, amount, coalesce(currency, 'USD'), nullif(btrim(billing_period), ''))
  returning * into v_row;
  return to_jsonb(v_row) - 'tenant_id';
end $$;
comment on function public.add_customer_agreement(uuid, text, text, date, date, numeric, text, text, text) is
  'Adds an agreement of the customer (title, type, dates, amount, currency, billing period, status).';
grant execute on function public.add_customer_agreement(uuid, text, text, date, date, numeric, text, text, text) to authenticated;

create or replace function public.add_customer_receivable(
  customer_id uuid, amount numeric, due_date date, type text default 'invoice', description text default null,
  currency text default 'USD', paid_at timestamptz default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_customer cortex.contacts;
  v_row cortex.customer_receivables;
begin
  perform cortex.require_writer();
  v_customer := cortex.customer_of_caller(add_customer_receivable.customer_id);
  if amount is null or amount <= 0 then
    raise exception 'amount must be more than 0' using errcode = '22023', column = 'amount';
  end if;
  if due_date is null then
    raise exception 'due_date is required' using errcode = '22023', column = 'due_date';
  end if;
  perform cortex.check_enum('type', coalesce(type, 'invoice'), cortex.customer_receivable_types());
  if coalesce(currency, 'USD') !~ '^[A-Z]{3}$' then
    raise exception 'currency must be an ISO 4217 code such as USD' using errcode = '22023', column = 'currency';
  end if;
  insert into cortex.customer_receivables (tenant_id, customer_id, type, description, amount, currency, due_date, paid_at)
  values (v_customer.tenant_id, v_customer.id, coalesce(type, 'invoice'), cortex.fit_words(description, 500), amount,
          coalesce(currency, 'USD'), due_date, paid_at)
  returning * into v_row;
  return to_jsonb(v_row) - 'tenant_id';
end $$;
comment on function public.add_customer_receivable(uuid, numeric, date, text, text, text, timestamptz) is
  'Adds a receivable of the customer (an invoice or credit note, its amount, due date and, if paid, when).';
grant execute on function public.add_customer_receivable(uuid, numeric, date, text, text, text, timestamptz) to authenticated;

-- API: the chat --------------------------------------------------------------------------------------

create or replace function public.start_customer_chat(customer_id uuid) returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.require_tenant();
  v_caller text := cortex.require_writer();
  v_customer cortex.contacts;
  v_missing text[];
begin
  -- The edge lets the two customer agents speak: only they (or an admin) may open their chat.
  if not (v_caller = any (cortex.customer_agents()) or cortex.caller_is_admin()) then
    raise exception 'agent "%" cannot open a customer chat', v_caller using errcode = '42501', column = 'agent',
      hint = 'use the key of customer_mgmt or product_mgmt (or an admin agent)';
  end if;
  v_customer := cortex.customer_of_caller(start_customer_chat.customer_id);
  select array_agg(n order by n) into v_missing from unnest(cortex.customer_agents()) n
  where not exists (select from cortex.agents a where a.tenant_id = v_tenant and a.name = n and a.enabled
                    and not a.read_only);
  if v_missing is not null then
    raise exception 'the customer agents % are not registered (or are disabled or read-only)',
      array_to_string(v_missing, ', ') using errcode = '55000', column = 'agent',
      hint = 'cortex agents add customer_mgmt; cortex agents add product_mgmt';
  end if;
  return jsonb_build_object('customer_id', v_customer.id, 'name', cortex.contact_label(v_customer),
    'tenant_id', v_tenant, 'caller', v_caller, 'context', public.build_customer_context(v_customer.id, 3000));
end $$;
comment on function public.start_customer_chat(uuid) is
  'Opens a customer chat: the caller must be one of the customer agents (or an admin), the customer a contact of its tenant (P0002), both customer agents registered, enabled and writing (55000). Returns {customer_id, name, tenant_id, caller, context}.';
grant execute on function public.start_customer_chat(uuid) to authenticated;

create or replace function public.record_customer_handoff(
  customer_id uuid, to_agent text, reason text, summary text, pending_request text default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_from text := cortex.require_writer();
  v_claims text := current_setting('request.jwt.claims', true);
  v_customer cortex.contacts;
  v_reason text;
  v_handoff jsonb;
begin
  if not v_from = any (cortex.customer_agents()) then
    raise exception 'agent "%" is not a customer agent', v_from using errcode = '42501', column = 'agent';
  end if;
  v_customer := cortex.customer_of_caller(record_customer_handoff.customer_id);
  if to_agent is null or not to_agent = any (cortex.customer_agents()) or to_agent = v_from then
    raise exception 'to_agent must be the other customer agent' using errcode = '22023', column = 'to_agent',
      detail = format('got "%s"', left(to_agent, 100));
  end if;
  if nullif(btrim(summary), '') is null then
    raise exception 'summary is required' using errcode = '22023', column = 'summary';
  end if;
  -- The model's reason is free text: one of Cortex's reasons is kept, anything else is "other".
  v_reason := case when lower(btrim(reason)) = any (cortex.handoff_reasons()) then lower(btrim(reason)) else 'other' end;
  v_handoff := public.create_handoff(contact_id => v_customer.id, to_agent => to_agent, reason => v_reason,
    reason_detail => cortex.fit_words(nullif(btrim(reason), ''), 2000),
    context_summary => cortex.fit_words(btrim(summary), 4000),
    suggested_action => cortex.fit_words(nullif(btrim(pending_request), ''), 1000),
    metadata => jsonb_build_object('source', 'customer_chat', 'pending_request', cortex.fit_words(pending_request, 2000)));
  -- The receiver is speaking in the same response: it takes the handoff at once, as itself, for
  -- these two moves only (the claims are restored right after).
  perform set_config('request.jwt.claims', (v_claims::jsonb || jsonb_build_object('agent', to_agent))::text, true);
  perform public.update_handoff_status((v_handoff ->> 'id')::uuid, 'accepted');
  v_handoff := public.update_handoff_status((v_handoff ->> 'id')::uuid, 'completed', 'taken over in the customer chat');
  perform set_config('request.jwt.claims', v_claims, true);
  return jsonb_build_object('handoff_id', v_handoff ->> 'id', 'status', v_handoff ->> 'status', 'reason', v_reason,
                            'from_agent', v_from, 'to_agent', to_agent);
end $$;
comment on function public.record_customer_handoff(uuid, text, text, text, text) is
  'Records a customer agent''s in-stream handoff (seed 002''s handoff tool) as a Cortex handoff to the other customer agent (reason: a Cortex reason if the model named one, else other; the summary; the pending request as suggested action), accepted and completed at once by the receiver, so the audit trail and the monitor see it.';
grant execute on function public.record_customer_handoff(uuid, text, text, text, text) to authenticated;
