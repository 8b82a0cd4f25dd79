-- Handoffs: explicit transitions of a contact from one agent to another agent or to a human
-- (seed 000). Creating one is a single transaction: the handoff row, the contact's new owner,
-- the working context marked for regeneration, and outbox notifications for the receiver and
-- the monitor. Status moves only pending -> accepted -> completed, or pending/accepted ->
-- rejected; a trigger enforces that for every writer, and every change lands in an append-only
-- audit trail that no API role can rewrite.

create or replace function cortex.handoff_reasons() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['warm_reply', 'escalation', 'complex_question', 'upsell_opportunity', 'churn_risk',
               'completed_sequence', 'customer_request', 'other'];
end $$;
comment on function cortex.handoff_reasons() is 'Allowed handoff reasons (seed 000; the table''s check constraint).';

create or replace function cortex.handoff_urgencies() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['low', 'normal', 'high', 'urgent'];
end $$;
comment on function cortex.handoff_urgencies() is 'Allowed handoff urgencies, least urgent first (the position is the queue''s urgency_rank).';

create or replace function cortex.handoff_statuses() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['pending', 'accepted', 'completed', 'rejected'];
end $$;
comment on function cortex.handoff_statuses() is 'Allowed handoff statuses.';

create or replace function cortex.handoff_allowed_moves(p_status text) returns text[]
language sql immutable set search_path = '' as $$
  select case p_status
    when 'pending' then array['accepted', 'rejected']
    when 'accepted' then array['completed', 'rejected']
    else array[]::text[]
  end
$$;
comment on function cortex.handoff_allowed_moves(text) is
  'The statuses a handoff may move to from p_status: pending -> accepted|rejected, accepted -> completed|rejected; none from completed or rejected.';

grant execute on function cortex.handoff_reasons(), cortex.handoff_urgencies(), cortex.handoff_statuses(),
  cortex.handoff_allowed_moves(text) to authenticated, service_role;

create table cortex.handoff_events (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  id uuid not null default gen_random_uuid(),
  contact_id uuid not null,
  from_agent text not null,
  to_agent text,
  to_human_id text constraint handoff_to_human_id_check check (length(btrim(to_human_id)) between 1 and 200),
  reason text not null constraint handoff_reason_check check (reason = any (cortex.handoff_reasons())),
  reason_detail text constraint handoff_reason_detail_check check (length(reason_detail) <= 2000),
  context_summary text not null constraint handoff_context_summary_check
    check (length(btrim(context_summary)) between 1 and 4000),
  suggested_action text constraint handoff_suggested_action_check check (length(suggested_action) <= 1000),
  urgency text not null default 'normal' constraint handoff_urgency_check
    check (urgency = any (cortex.handoff_urgencies())),
  -- The pending queue sorts on this: urgent first (low 1, normal 2, high 3, urgent 4).
  urgency_rank smallint generated always as (array_position(cortex.handoff_urgencies(), urgency)) stored,
  status text not null default 'pending' constraint handoff_status_check
    check (status = any (cortex.handoff_statuses())),
  -- The note given with the latest status change (a rejection's reason, say).
  status_note text constraint handoff_status_note_check check (length(status_note) <= 2000),
  accepted_by text,
  accepted_at timestamptz,
  completed_at timestamptz,
  rejected_at timestamptz,
  -- Who owned the contact before this handoff, so that a rejection can give it back.
  previous_owner_agent text,
  previous_owner_human_id text,
  metadata jsonb not null default '{}' constraint handoff_metadata_check check (jsonb_typeof(metadata) = 'object'),
  -- Wall clock: several handoffs created in one transaction keep their order in the queue.
  created_at timestamptz not null default clock_timestamp(),
  updated_at timestamptz not null default clock_timestamp(),
  primary key (tenant_id, id),
  foreign key (tenant_id, contact_id) references cortex.contacts (tenant_id, id) on delete cascade,
  foreign key (tenant_id, from_agent) references cortex.agents (tenant_id, name),
  foreign key (tenant_id, to_agent) references cortex.agents (tenant_id, name),
  foreign key (tenant_id, accepted_by) references cortex.agents (tenant_id, name),
  constraint handoff_to_agent_check check (num_nonnulls(to_agent, to_human_id) = 1)
);
comment on table cortex.handoff_events is
  'Explicit transitions of a contact to another agent or to a human, with the briefing the receiver needs; status pending -> accepted -> completed, or rejected.';
-- The pending queues, most urgent first then oldest (get_pending_handoffs).
create index handoff_events_pending_agent on cortex.handoff_events (tenant_id, to_agent, urgency_rank desc, created_at)
  where status = 'pending';
create index handoff_events_pending_human on cortex.handoff_events (tenant_id, to_human_id, urgency_rank desc, created_at)
  where status = 'pending' and to_human_id is not null;
-- The monitor's view: every pending handoff of the tenant, without an agent filter.
create index handoff_events_pending_tenant on cortex.handoff_events (tenant_id, urgency_rank desc, created_at, id)
  where status = 'pending';
-- list_handoffs: by change time, by status and by contact.
create index handoff_events_recent on cortex.handoff_events (tenant_id, updated_at desc);
create index handoff_events_status on cortex.handoff_events (tenant_id, status, updated_at desc);
create index handoff_events_contact on cortex.handoff_events (tenant_id, contact_id, created_at desc);

create table cortex.handoff_audit (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  id bigint generated always as identity,
  handoff_id uuid not null,
  from_status text,
  to_status text not null,
  -- The agent whose request made the change ('system' for the worker or an operator).
  actor text not null,
  note text,
  -- The columns that changed, {"column": {"from": ..., "to": ...}}; null for the creation.
  changes jsonb,
  at timestamptz not null default clock_timestamp(),
  primary key (tenant_id, id),
  foreign key (tenant_id, handoff_id) references cortex.handoff_events (tenant_id, id) on delete cascade
);
comment on table cortex.handoff_audit is
  'Append-only trail of every change to a handoff (creation and each status move), written by trigger; API roles can only read it.';
create index handoff_audit_handoff on cortex.handoff_audit (tenant_id, handoff_id, at);

-- Triggers -------------------------------------------------------------------------------------

-- Volatile (the default), not immutable: it raises, so the planner must never pre-evaluate it.
create or replace function cortex.handoff_move_error(p_from text, p_to text) returns void
language plpgsql set search_path = '' as $$
declare v_allowed text[] := cortex.handoff_allowed_moves(p_from);
begin
  raise exception '%', case when cardinality(v_allowed) = 0
      then format('cannot move handoff from %s to %s: %s is final, no further moves are allowed', p_from, p_to, p_from)
      else format('cannot move handoff from %s to %s; allowed moves from %s: %s',
                  p_from, p_to, p_from, array_to_string(v_allowed, ', ')) end
    using errcode = '55000', column = 'status',
          detail = jsonb_build_object('from', p_from, 'to', p_to, 'allowed', to_jsonb(v_allowed))::text,
          hint = case when cardinality(v_allowed) = 0 then 'create a new handoff instead'
                      else 'allowed: ' || array_to_string(v_allowed, ', ') end;
end $$;
comment on function cortex.handoff_move_error(text, text) is
  'Raises the one "illegal status move" error: SQLSTATE 55000 naming status, with the allowed moves in the message and as JSON in the detail.';

-- Who may move a handoff (issue 7): its addressee, an admin or the monitor; a handoff to a human is
-- moved by the service key (the system agent, an admin) or an admin agent. update_handoff_status
-- checks it for a clear error before it writes; the trigger below checks it for a direct UPDATE.
create or replace function cortex.check_handoff_actor(h cortex.handoff_events, p_status text) returns void
language plpgsql stable set search_path = '' as $$
declare
  v_agent text := cortex.current_agent();
  v_role text;
  v_verb text := case p_status when 'accepted' then 'accept' when 'completed' then 'complete'
                               when 'rejected' then 'reject' else 'move' end;
begin
  if v_agent is null then
    if cortex.is_api_caller() then
      raise exception 'no agent in the request claims' using errcode = '28000',
        hint = 'authenticate with an agent key or a JWT carrying tenant_id and agent';
    end if;
    return;  -- the owner or the worker
  end if;
  select a.role into v_role from cortex.agents a where a.tenant_id = h.tenant_id and a.name = v_agent and a.enabled;
  if v_role = 'admin' then
    return;
  end if;
  if h.to_human_id is not null then
    raise exception 'agent "%" cannot % a handoff to a human', v_agent, v_verb
      using errcode = '42501', column = 'status',
            hint = 'a handoff to a human is moved with the service key (agent system) or by an admin agent';
  end if;
  if v_agent = h.to_agent or v_role = 'monitor' then
    return;
  end if;
  raise exception 'agent "%" cannot % a handoff addressed to "%"', v_agent, v_verb, h.to_agent
    using errcode = '42501', column = 'status',
          hint = 'only the addressee, an admin agent or the monitor may accept, complete or reject a handoff';
end $$;
comment on function cortex.check_handoff_actor(cortex.handoff_events, text) is
  'Raises SQLSTATE 42501 (naming status) unless the calling agent may move the handoff: its addressee, an admin or the monitor; for a handoff to a human only an admin (the service key acts as the admin agent system). The owner and worker (no claims) pass; an API caller without an agent gets 28000.';

-- Runs for every writer (API roles and the owner alike): the state machine and the immutable
-- fields cannot be bypassed by updating the table directly.
create or replace function cortex.handoff_events_guard() returns trigger
language plpgsql set search_path = '' as $$
declare v_acceptor text;
begin
  if tg_op = 'INSERT' then
    if new.status <> 'pending' then
      raise exception 'a new handoff starts as pending' using errcode = '55000', column = 'status';
    end if;
    new.accepted_by := null; new.accepted_at := null; new.completed_at := null; new.rejected_at := null;
    new.updated_at := new.created_at;
    return new;
  end if;
  if (new.tenant_id, new.id, new.contact_id, new.from_agent, new.to_agent, new.to_human_id, new.reason,
      new.reason_detail, new.context_summary, new.suggested_action, new.urgency, new.previous_owner_agent,
      new.previous_owner_human_id, new.metadata, new.created_at)
     is distinct from
     (old.tenant_id, old.id, old.contact_id, old.from_agent, old.to_agent, old.to_human_id, old.reason,
      old.reason_detail, old.context_summary, old.suggested_action, old.urgency, old.previous_owner_agent,
      old.previous_owner_human_id, old.metadata, old.created_at) then
    raise exception 'a handoff''s recorded fields cannot change; only its status moves'
      using errcode = '55000', hint = 'create a new handoff instead';
  end if;
  if new.status is not distinct from old.status and new.status_note is distinct from old.status_note then
    raise exception 'a handoff''s status_note is written only with a status move'
      using errcode = '55000', column = 'status_note', hint = 'give the note with update_handoff_status';
  end if;
  -- Timestamps and the acceptor follow the status; nobody sets them by hand. The acceptor is the
  -- calling agent; only the owner (no claims) may name one.
  v_acceptor := new.accepted_by;
  new.accepted_by := old.accepted_by; new.accepted_at := old.accepted_at;
  new.completed_at := old.completed_at; new.rejected_at := old.rejected_at;
  if new.status is distinct from old.status then
    if not (new.status = any (cortex.handoff_allowed_moves(old.status))) then
      perform cortex.handoff_move_error(old.status, new.status);
    end if;
    perform cortex.check_handoff_actor(old, new.status);
    case new.status
      when 'accepted' then
        new.accepted_at := now();
        new.accepted_by := coalesce(cortex.current_agent(), v_acceptor);
      when 'completed' then new.completed_at := now();
      when 'rejected' then new.rejected_at := now();
      else null;
    end case;
  end if;
  new.updated_at := clock_timestamp();
  return new;
end $$;
comment on function cortex.handoff_events_guard() is
  'Trigger: new handoffs start pending; recorded fields (metadata included) never change and status_note only with a status move (else SQLSTATE 55000); status moves only along cortex.handoff_allowed_moves (55000) by an agent cortex.check_handoff_actor allows (42501); stamps accepted/completed/rejected times and accepted_by (the calling agent).';
create trigger handoff_events_guard before insert or update on cortex.handoff_events
  for each row execute function cortex.handoff_events_guard();

-- Definer: API roles have no write grant on the audit table; only this trigger writes it.
create or replace function cortex.handoff_events_audit() returns trigger
language plpgsql security definer set search_path = '' as $$
declare v_changes jsonb;
begin
  if tg_op = 'INSERT' then
    insert into cortex.handoff_audit (tenant_id, handoff_id, from_status, to_status, actor, note)
    values (new.tenant_id, new.id, null, new.status, coalesce(cortex.current_agent(), new.from_agent), 'created');
    return null;
  end if;
  select jsonb_object_agg(n.key, jsonb_build_object('from', o.value, 'to', n.value))
  into v_changes
  from jsonb_each(to_jsonb(new)) n join jsonb_each(to_jsonb(old)) o on o.key = n.key
  where n.value is distinct from o.value and n.key <> 'updated_at';
  if v_changes is null then
    return null;  -- a no-op update changes nothing worth recording
  end if;
  insert into cortex.handoff_audit (tenant_id, handoff_id, from_status, to_status, actor, note, changes)
  values (new.tenant_id, new.id, old.status, new.status, coalesce(cortex.current_agent(), 'system'),
          case when new.status is distinct from old.status then new.status_note end, v_changes);
  return null;
end $$;
comment on function cortex.handoff_events_audit() is
  'Trigger: appends one handoff_audit row for the creation and for every change of a handoff (status move, actor, note, changed columns).';
revoke execute on function cortex.handoff_events_audit() from public, anon;
create trigger handoff_events_audit after insert or update on cortex.handoff_events
  for each row execute function cortex.handoff_events_audit();

-- Handoffs are not deleted either, so their audit trail survives: rows go only with their contact
-- (erasure of a person: `delete from cortex.contacts`) or tenant, through the cascades.
create or replace function cortex.handoff_events_no_delete() returns trigger
language plpgsql set search_path = '' as $$
begin
  -- The cascades of a tenant's deletion may reach handoffs before or after its contacts: either
  -- parent gone means erasure.
  if tg_op = 'DELETE'
     and (cortex.erasure_declared()
          or not exists (select from cortex.contacts c where c.tenant_id = old.tenant_id and c.id = old.contact_id)
          or not exists (select from cortex.tenants t where t.id = old.tenant_id)) then
    return old;
  end if;
  raise exception 'handoffs cannot be deleted: they and their audit trail are the record'
    using errcode = '55000',
          hint = 'reject or complete it instead; handoffs go only with their contact or tenant, or after cortex.begin_erasure';
end $$;
comment on function cortex.handoff_events_no_delete() is
  'Trigger: refuses DELETE and TRUNCATE of handoffs for every role, the owner included (SQLSTATE 55000), except the cascade of a deleted contact or tenant or a DELETE after cortex.begin_erasure, so the audit trail cannot be removed with its handoff.';
create trigger handoff_events_no_delete before delete on cortex.handoff_events
  for each row execute function cortex.handoff_events_no_delete();
create trigger handoff_events_no_truncate before truncate on cortex.handoff_events
  for each statement execute function cortex.handoff_events_no_delete();

-- Even the owner cannot rewrite history; rows go only when their handoff or tenant goes
-- (the cascades of a contact's or a tenant's deletion: handoffs go no other way).
create or replace function cortex.handoff_audit_append_only() returns trigger
language plpgsql set search_path = '' as $$
begin
  if tg_op = 'DELETE'
     and (not exists (select from cortex.handoff_events h where h.tenant_id = old.tenant_id and h.id = old.handoff_id)
          or not exists (select from cortex.tenants t where t.id = old.tenant_id)) then
    return old;
  end if;
  raise exception 'the handoff audit trail is append-only' using errcode = '55000',
    hint = 'audit rows are removed only with their handoff or tenant';
end $$;
comment on function cortex.handoff_audit_append_only() is
  'Trigger: rejects every update, and every delete except the cascade from a deleted handoff or tenant.';
create trigger handoff_audit_append_only before update or delete on cortex.handoff_audit
  for each row execute function cortex.handoff_audit_append_only();

create or replace function cortex.handoff_audit_no_truncate() returns trigger
language plpgsql set search_path = '' as $$
begin
  raise exception 'the handoff audit trail is append-only' using errcode = '55000';
end $$;
comment on function cortex.handoff_audit_no_truncate() is 'Trigger: rejects TRUNCATE of the handoff audit trail.';
create trigger handoff_audit_no_truncate before truncate on cortex.handoff_audit
  for each statement execute function cortex.handoff_audit_no_truncate();

-- RLS -------------------------------------------------------------------------------------------

alter table cortex.handoff_events enable row level security;
alter table cortex.handoff_audit enable row level security;
create policy "Handoffs are visible to agents of their tenant" on cortex.handoff_events
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
-- An agent creates handoffs only in its own name.
create policy "Writing agents create handoffs from themselves" on cortex.handoff_events
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and from_agent = (select cortex.current_agent())
              and (select cortex.agent_can_write()));
create policy "Writing agents move handoffs of their tenant" on cortex.handoff_events
  for update to authenticated
  using (tenant_id = (select cortex.current_tenant()))
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write()));
create policy "Handoff audit is visible to agents of their tenant" on cortex.handoff_audit
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
-- No delete on handoffs and no write of any kind on the audit for API roles.
grant select, insert, update on cortex.handoff_events to authenticated;
grant select on cortex.handoff_audit to authenticated;

-- Helpers ---------------------------------------------------------------------------------------

create or replace function cortex.handoff_json(h cortex.handoff_events) returns jsonb
language sql stable set search_path = '' as $$
  select jsonb_build_object(
    'id', h.id, 'contact_id', h.contact_id, 'from_agent', h.from_agent, 'to_agent', h.to_agent,
    'to_human_id', h.to_human_id, 'reason', h.reason, 'reason_detail', h.reason_detail,
    'context_summary', h.context_summary, 'suggested_action', h.suggested_action, 'urgency', h.urgency,
    'status', h.status, 'status_note', h.status_note, 'accepted_by', h.accepted_by,
    'accepted_at', h.accepted_at, 'completed_at', h.completed_at, 'rejected_at', h.rejected_at,
    'metadata', h.metadata, 'created_at', h.created_at, 'updated_at', h.updated_at)
$$;
comment on function cortex.handoff_json(cortex.handoff_events) is 'The API representation of a handoff.';

create or replace function cortex.handoff_contact_json(p_tenant_id uuid, p_contact_id uuid) returns jsonb
language sql stable set search_path = '' as $$
  select jsonb_build_object('id', c.id, 'name', c.name, 'email', c.email, 'company_name', c.company_name,
                            'stage', c.stage)
  from cortex.contacts c where c.tenant_id = p_tenant_id and c.id = p_contact_id
$$;
comment on function cortex.handoff_contact_json(uuid, uuid) is 'The contact as shown with a handoff (name, email, company, stage).';

create or replace function cortex.handoff_not_found(p_id uuid) returns void
language plpgsql set search_path = '' as $$
begin
  raise exception 'handoff % not found', p_id using errcode = 'P0002', column = 'handoff_id';
end $$;
comment on function cortex.handoff_not_found(uuid) is 'Raises the one "unknown handoff" error (SQLSTATE P0002 naming handoff_id).';

-- The briefing when the caller brings none and no model ran (a PostgREST caller): the last
-- working context and the newest interaction summaries, so the SQL path never needs a model.
create or replace function cortex.handoff_fallback_summary(
  p_tenant_id uuid, p_contact_id uuid, p_from text, p_to text, p_reason text, p_reason_detail text
) returns text
language sql stable set search_path = '' as $$
  select cortex.fit_words(concat_ws(' ',
    initcap(p_from) || ' is handing ' || coalesce(c.name, c.email) || coalesce(' (' || c.company_name || ')', '')
      || ' to ' || p_to || ' — ' || replace(p_reason, '_', ' ')
      || coalesce(': ' || cortex.fit_words(btrim(p_reason_detail), 300), '') || '.',
    'Stage: ' || c.stage || '; ' || c.interaction_count || ' interaction(s) logged.',
    (select 'Context: ' || cortex.fit_words(x.summary, 600) from cortex.contact_context x
     where x.tenant_id = p_tenant_id and x.contact_id = p_contact_id),
    (select 'Recent: ' || string_agg(to_char(i.occurred_at at time zone 'UTC', 'YYYY-MM-DD') || ' ' || i.agent || ' '
                                     || replace(i.type, '_', ' ') || coalesce(': ' || cortex.fit_words(i.summary, 200), ''),
                                     '; ' order by i.occurred_at desc) || '.'
     from (select * from cortex.interactions i where i.tenant_id = p_tenant_id and i.contact_id = p_contact_id
           order by i.occurred_at desc limit 3) i)), 2000)
  from cortex.contacts c where c.tenant_id = p_tenant_id and c.id = p_contact_id
$$;
comment on function cortex.handoff_fallback_summary(uuid, uuid, text, text, text, text) is
  'A handoff briefing assembled without a model: who hands whom to whom and why, the stage, the last working-context summary and the three newest interaction summaries.';

-- Definer: API roles cannot write contact_context; this records the handoff on it for the caller's tenant.
create or replace function cortex.record_handoff_on_context(
  p_tenant_id uuid, p_contact_id uuid, p_handoff_id uuid, p_summary text, p_last_handoff jsonb
) returns void
language plpgsql volatile security definer set search_path = '' as $$
begin
  -- The rule of create_handoff: a writing agent of the tenant.
  perform cortex.guard_writer(p_tenant_id);
  -- Lock order (docs/architecture.md): the contact row first, then its context row.
  perform from cortex.contacts c where c.tenant_id = p_tenant_id and c.id = p_contact_id for no key update;
  -- A contact whose context was never generated gets a stand-in row (stale at once), so the
  -- handoff is shown by get_context and survives the first generation (store_context keeps it).
  insert into cortex.contact_context as x (tenant_id, contact_id, summary, current_status,
    interaction_count_at_generation, stale_since, last_handoff_id, last_handoff_summary, last_handoff)
  select c.tenant_id, c.id,
         coalesce(c.name, c.email) || coalesce(' at ' || c.company_name, '') || ' (' || c.stage || '). '
           || c.interaction_count || ' interaction(s) logged.',
         'Working context is being generated', c.interaction_count, now(), p_handoff_id, p_summary, p_last_handoff
  from cortex.contacts c where c.tenant_id = p_tenant_id and c.id = p_contact_id
  on conflict (tenant_id, contact_id) do update set
    last_handoff_id = excluded.last_handoff_id, last_handoff_summary = excluded.last_handoff_summary,
    last_handoff = excluded.last_handoff;
end $$;
comment on function cortex.record_handoff_on_context(uuid, uuid, uuid, text, jsonb) is
  'Sets the contact''s last_handoff (id, summary and the {from, to, reason, date} shown by get_context), creating a stale stand-in context when none exists. An API caller must be a writing agent of p_tenant_id (cortex.guard_writer).';
revoke execute on function cortex.record_handoff_on_context(uuid, uuid, uuid, text, jsonb) from public, anon;

-- Names of the tenant's monitor agents (helios): who the 'monitor' notifications reach.
create or replace function cortex.monitor_names(p_tenant_id uuid) returns text[]
language sql stable set search_path = '' as $$
  select coalesce(array_agg(a.name order by a.name), array['monitor'])
  from cortex.agents a where a.tenant_id = p_tenant_id and a.role = 'monitor' and a.enabled
$$;
comment on function cortex.monitor_names(uuid) is 'Names of the tenant''s enabled monitor agents (role monitor), or {monitor} when it has none.';

-- Every check create_handoff makes before it writes, callable alone so that the HTTP edge can
-- refuse bad input before it spends a model call on the briefing.
create or replace function cortex.check_handoff_request(
  p_contact_id uuid, p_to_agent text, p_to_human_id text, p_reason text, p_urgency text,
  p_reason_detail text default null, p_context_summary text default null, p_suggested_action text default null,
  p_metadata jsonb default null, p_usage jsonb default null, p_from_agent text default null
) returns text
language plpgsql stable set search_path = '' as $$
declare
  v_tenant uuid := cortex.require_tenant();
  v_from text := cortex.require_writer();
  v_target cortex.agents;
begin
  if p_from_agent is not null and p_from_agent <> v_from then
    raise exception 'from_agent must be the calling agent ("%")', v_from
      using errcode = '22023', column = 'from_agent', detail = format('got "%s"', left(p_from_agent, 100));
  end if;
  if p_to_agent is not null and p_to_human_id is not null then
    raise exception 'give exactly one of to_agent or to_human_id, not both'
      using errcode = '22023', column = 'to_agent', hint = 'hand off to an agent (to_agent) or to a human (to_human_id)';
  end if;
  if p_to_agent is null and p_to_human_id is null then
    raise exception 'one of to_agent or to_human_id is required'
      using errcode = '22023', column = 'to_agent', hint = 'hand off to an agent (to_agent) or to a human (to_human_id)';
  end if;
  if p_contact_id is null then
    raise exception 'contact_id is required' using errcode = '22023', column = 'contact_id';
  end if;
  if p_reason is null then
    raise exception 'reason is required; one of: %', array_to_string(cortex.handoff_reasons(), ', ')
      using errcode = '22023', column = 'reason';
  end if;
  perform cortex.check_enum('reason', p_reason, cortex.handoff_reasons());
  perform cortex.check_enum('urgency', p_urgency, cortex.handoff_urgencies());
  if p_to_agent is not null then
    select * into v_target from cortex.agents a where a.tenant_id = v_tenant and a.name = p_to_agent;
    if not found then
      raise exception 'unknown agent "%"', left(p_to_agent, 100) using errcode = '22023', column = 'to_agent';
    end if;
    if v_target.name = v_from then
      raise exception 'an agent cannot hand a contact off to itself' using errcode = '22023', column = 'to_agent';
    end if;
    if v_target.read_only or not v_target.enabled then
      raise exception 'agent "%" is % and cannot take a handoff', v_target.name,
        case when v_target.enabled then 'read-only' else 'disabled' end
        using errcode = '22023', column = 'to_agent';
    end if;
  end if;
  if p_to_human_id is not null and length(btrim(p_to_human_id)) not between 1 and 200 then
    raise exception 'to_human_id must be 1 to 200 characters' using errcode = '22023', column = 'to_human_id';
  end if;
  if length(p_reason_detail) > 2000 then
    raise exception 'reason_detail must be at most 2000 characters' using errcode = '22023', column = 'reason_detail';
  end if;
  if length(p_context_summary) > 4000 then
    raise exception 'context_summary must be at most 4000 characters' using errcode = '22023', column = 'context_summary';
  end if;
  if length(p_suggested_action) > 1000 then
    raise exception 'suggested_action must be at most 1000 characters'
      using errcode = '22023', column = 'suggested_action';
  end if;
  if p_metadata is not null and jsonb_typeof(p_metadata) <> 'object' then
    raise exception 'metadata must be a JSON object' using errcode = '22023', column = 'metadata';
  end if;
  if p_usage is not null and (jsonb_typeof(p_usage) <> 'object' or p_usage ->> 'model' is null) then
    raise exception 'usage must be an object with model, input_tokens and output_tokens'
      using errcode = '22023', column = 'usage';
  end if;
  if not exists (select from cortex.contacts c where c.tenant_id = v_tenant and c.id = p_contact_id) then
    perform cortex.contact_not_found(p_contact_id);
  end if;
  return v_from;
end $$;
comment on function cortex.check_handoff_request(uuid, text, text, text, text, text, text, text, jsonb, jsonb, text) is
  'Validates a handoff request without writing (caller may write; exactly one of to_agent / to_human_id; known contact, agent, reason, urgency; sizes); returns the calling agent. SQLSTATE 22023 naming the field, P0002 for an unknown contact, 42501 for a read-only agent.';

grant execute on function cortex.handoff_move_error(text, text), cortex.handoff_json(cortex.handoff_events),
  cortex.check_handoff_actor(cortex.handoff_events, text),
  cortex.handoff_contact_json(uuid, uuid), cortex.handoff_not_found(uuid),
  cortex.handoff_fallback_summary(uuid, uuid, text, text, text, text), cortex.monitor_names(uuid),
  cortex.check_handoff_request(uuid, text, text, text, text, text, text, text, jsonb, jsonb, text)
  to authenticated, service_role;
grant execute on function cortex.record_handoff_on_context(uuid, uuid, uuid, text, jsonb) to authenticated;

-- API --------------------------------------------------------------------------------------------

create or replace function public.create_handoff(
  contact_id uuid,
  to_agent text default null,
  to_human_id text default null,
  reason text default null,
  reason_detail text default null,
  context_summary text default null,
  suggested_action text default null,
  urgency text default 'normal',
  metadata jsonb default null,
  usage jsonb default null,
  from_agent text default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_from text;
  v_urgency text := coalesce(create_handoff.urgency, 'normal');
  v_to_human text := btrim(create_handoff.to_human_id);
  v_to text;
  v_contact cortex.contacts;
  v_summary text := nullif(btrim(create_handoff.context_summary), '');
  v_row cortex.handoff_events;
  v_payload jsonb;
  v_monitors text[];
  v_recipient text;
begin
  v_from := cortex.check_handoff_request(create_handoff.contact_id, create_handoff.to_agent, create_handoff.to_human_id,
    create_handoff.reason, v_urgency, create_handoff.reason_detail, create_handoff.context_summary,
    create_handoff.suggested_action, create_handoff.metadata, create_handoff.usage, create_handoff.from_agent);
  v_to := coalesce(create_handoff.to_agent, v_to_human);

  -- Lock the contact: its owner changes with the handoff, and concurrent handoffs queue here.
  -- Lock order (docs/architecture.md): the contact row first, then the handoff, then the context.
  select * into v_contact from cortex.contacts c
  where c.tenant_id = v_tenant and c.id = create_handoff.contact_id for no key update;
  if not found then
    perform cortex.contact_not_found(create_handoff.contact_id);
  end if;

  insert into cortex.handoff_events as h (tenant_id, contact_id, from_agent, to_agent, to_human_id, reason,
    reason_detail, context_summary, suggested_action, urgency, previous_owner_agent, previous_owner_human_id, metadata)
  values (v_tenant, v_contact.id, v_from, create_handoff.to_agent, v_to_human, create_handoff.reason,
    nullif(btrim(create_handoff.reason_detail), ''),
    coalesce(v_summary, cortex.handoff_fallback_summary(v_tenant, v_contact.id, v_from, v_to, create_handoff.reason,
                                                        create_handoff.reason_detail)),
    nullif(btrim(create_handoff.suggested_action), ''), v_urgency, v_contact.owner_agent, v_contact.owner_human_id,
    coalesce(create_handoff.metadata, '{}'))
  returning h.* into v_row;

  -- The receiver owns the contact from now on (the other owner field is left as it was).
  if create_handoff.to_agent is not null then
    update cortex.contacts c set owner_agent = create_handoff.to_agent
    where c.tenant_id = v_tenant and c.id = v_contact.id;
  else
    update cortex.contacts c set owner_human_id = v_to_human
    where c.tenant_id = v_tenant and c.id = v_contact.id;
  end if;

  perform cortex.record_handoff_on_context(v_tenant, v_contact.id, v_row.id, v_row.context_summary,
    jsonb_strip_nulls(jsonb_build_object('id', v_row.id, 'from', v_from, 'to', v_to, 'reason', v_row.reason,
      'detail', cortex.fit_words(v_row.reason_detail, 160), 'date', cortex.iso(v_row.created_at))));
  perform cortex.request_context_refresh(v_tenant, v_contact.id, 'handoff');

  v_payload := cortex.handoff_json(v_row)
    || jsonb_build_object('contact', cortex.handoff_contact_json(v_tenant, v_contact.id));
  v_monitors := cortex.monitor_names(v_tenant);
  foreach v_recipient in array array[
      case when create_handoff.to_agent is not null then 'agent:' || create_handoff.to_agent
           else 'human:' || v_to_human end,
      'monitor'] loop
    perform cortex.notify(v_tenant, 'handoff.created', v_recipient, v_payload,
                          format('handoff.created:%s:%s', v_row.id, v_recipient));
  end loop;

  if create_handoff.usage is not null then
    perform cortex.record_token_usage(v_tenant, v_from, create_handoff.usage ->> 'model',
      coalesce(create_handoff.usage ->> 'operation', 'handoff_summary'), (create_handoff.usage ->> 'input_tokens')::int,
      (create_handoff.usage ->> 'output_tokens')::int, v_contact.id, null);
  end if;

  return jsonb_build_object(
    'id', v_row.id, 'contact_id', v_row.contact_id, 'context_summary', v_row.context_summary,
    'suggested_action', v_row.suggested_action, 'status', v_row.status, 'urgency', v_row.urgency,
    'from_agent', v_row.from_agent, 'to_agent', v_row.to_agent, 'to_human_id', v_row.to_human_id,
    'created_at', v_row.created_at,
    'notifications_sent', to_jsonb(array(select n from unnest(array[v_to] || v_monitors) with ordinality as u(n, o)
                                         group by n order by min(o))),
    'context_refreshed', true);
end $$;
comment on function public.create_handoff(uuid, text, text, text, text, text, text, text, jsonb, jsonb, text) is
  'Hands a contact from the calling agent to another agent (to_agent) or a human (to_human_id) in one transaction: writes the handoff, makes the receiver the contact''s owner, marks the working context for regeneration, records last_handoff, and queues handoff.created notifications for the receiver and the monitor. Without context_summary a briefing is assembled from the working context and recent interactions. Returns {id, contact_id, context_summary, status, notifications_sent, context_refreshed}.';
grant execute on function public.create_handoff(uuid, text, text, text, text, text, text, text, jsonb, jsonb, text) to authenticated;

create or replace function public.get_handoff(handoff_id uuid) returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_row cortex.handoff_events;
begin
  if get_handoff.handoff_id is null then
    raise exception 'handoff_id is required' using errcode = '22023', column = 'handoff_id';
  end if;
  select * into v_row from cortex.handoff_events h where h.tenant_id = v_tenant and h.id = get_handoff.handoff_id;
  if not found then
    perform cortex.handoff_not_found(get_handoff.handoff_id);
  end if;
  return cortex.handoff_json(v_row) || jsonb_build_object(
    'contact', cortex.handoff_contact_json(v_tenant, v_row.contact_id),
    'allowed_moves', to_jsonb(cortex.handoff_allowed_moves(v_row.status)),
    'history', coalesce((select jsonb_agg(jsonb_build_object('from_status', a.from_status, 'to_status', a.to_status,
                                                             'actor', a.actor, 'note', a.note, 'at', a.at)
                                          order by a.at, a.id)
                         from cortex.handoff_audit a where a.tenant_id = v_tenant and a.handoff_id = v_row.id), '[]'));
end $$;
comment on function public.get_handoff(uuid) is
  'One handoff of the caller''s tenant with its contact, the allowed next moves and its audit history; SQLSTATE P0002 when unknown.';
grant execute on function public.get_handoff(uuid) to authenticated;

create or replace function public.get_pending_handoffs(
  agent text default null,
  human_id text default null,
  urgency text default null,
  "limit" int default 20
) returns jsonb
language plpgsql stable set search_path = ''
-- The optional filters make a generic plan useless: plan each call with its real values.
set plan_cache_mode = force_custom_plan as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_items jsonb;
begin
  if get_pending_handoffs.agent is not null and get_pending_handoffs.human_id is not null then
    raise exception 'filter by agent or by human_id, not both' using errcode = '22023', column = 'agent';
  end if;
  perform cortex.check_agent(v_tenant, get_pending_handoffs.agent, 'agent');
  perform cortex.check_enum('urgency', get_pending_handoffs.urgency, cortex.handoff_urgencies());
  if get_pending_handoffs."limit" is null or get_pending_handoffs."limit" not between 1 and 100 then
    raise exception 'limit must be between 1 and 100' using errcode = '22023', column = 'limit';
  end if;
  -- The contact is joined once for the page (not a function call per row), and urgency is
  -- compared as its rank so that it is an index condition on every pending-queue index.
  select coalesce(jsonb_agg(cortex.handoff_json(r.h) || jsonb_build_object(
                              'contact', jsonb_build_object('id', c.id, 'name', c.name, 'email', c.email,
                                                            'company_name', c.company_name, 'stage', c.stage))
                            order by (r.h).urgency_rank desc, (r.h).created_at, (r.h).id), '[]')
  into v_items
  from (
    select h from cortex.handoff_events h
    where h.tenant_id = v_tenant and h.status = 'pending'
      and (get_pending_handoffs.agent is null or h.to_agent = get_pending_handoffs.agent)
      and (get_pending_handoffs.human_id is null or h.to_human_id = get_pending_handoffs.human_id)
      and (get_pending_handoffs.urgency is null
           or h.urgency_rank = array_position(cortex.handoff_urgencies(), get_pending_handoffs.urgency))
    order by h.urgency_rank desc, h.created_at, h.id
    limit get_pending_handoffs."limit"
  ) r
  join cortex.contacts c on c.tenant_id = v_tenant and c.id = (r.h).contact_id;
  return jsonb_build_object('items', v_items, 'limit', get_pending_handoffs."limit");
end $$;
comment on function public.get_pending_handoffs(text, text, text, int) is
  'Pending handoffs of the tenant, most urgent first then oldest; filtered by receiving agent or human_id and by urgency (no filter: all, for the monitor).';
grant execute on function public.get_pending_handoffs(text, text, text, int) to authenticated;

create or replace function public.list_handoffs(
  since timestamptz default null,
  status text default null,
  contact_id uuid default null,
  "limit" int default 20
) returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_items jsonb;
begin
  perform cortex.check_enum('status', list_handoffs.status, cortex.handoff_statuses());
  if list_handoffs."limit" is null or list_handoffs."limit" not between 1 and 100 then
    raise exception 'limit must be between 1 and 100' using errcode = '22023', column = 'limit';
  end if;
  if list_handoffs.contact_id is not null and not exists (
      select from cortex.contacts c where c.tenant_id = v_tenant and c.id = list_handoffs.contact_id) then
    perform cortex.contact_not_found(list_handoffs.contact_id);
  end if;
  select coalesce(jsonb_agg(cortex.handoff_json(r) || jsonb_build_object(
                              'contact', cortex.handoff_contact_json(v_tenant, r.contact_id))
                            order by r.updated_at desc, r.id), '[]')
  into v_items
  from (
    select * from cortex.handoff_events h
    where h.tenant_id = v_tenant
      and (list_handoffs.since is null or h.updated_at >= list_handoffs.since)
      and (list_handoffs.status is null or h.status = list_handoffs.status)
      and (list_handoffs.contact_id is null or h.contact_id = list_handoffs.contact_id)
    order by h.updated_at desc, h.id
    limit list_handoffs."limit"
  ) r;
  return jsonb_build_object('items', v_items, 'limit', list_handoffs."limit");
end $$;
comment on function public.list_handoffs(timestamptz, text, uuid, int) is
  'The tenant''s handoffs, most recently changed first, filtered by since (created or changed at or after), status and contact: the monitor''s stand-up view.';
grant execute on function public.list_handoffs(timestamptz, text, uuid, int) to authenticated;

create or replace function public.update_handoff_status(handoff_id uuid, status text, note text default null)
returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_agent text := cortex.require_writer();
  v_row cortex.handoff_events;
  v_payload jsonb;
  v_recipient text;
begin
  if update_handoff_status.handoff_id is null then
    raise exception 'handoff_id is required' using errcode = '22023', column = 'handoff_id';
  end if;
  if update_handoff_status.status is null then
    raise exception 'status is required; one of: accepted, completed, rejected' using errcode = '22023', column = 'status';
  end if;
  perform cortex.check_enum('status', update_handoff_status.status, cortex.handoff_statuses());
  if length(update_handoff_status.note) > 2000 then
    raise exception 'note must be at most 2000 characters' using errcode = '22023', column = 'note';
  end if;

  -- Lock order (docs/architecture.md): the handoff's contact row first (a rejection gives the
  -- contact back), then the handoff.
  perform from cortex.contacts c
  where c.tenant_id = v_tenant and c.id = (select h.contact_id from cortex.handoff_events h
                                           where h.tenant_id = v_tenant and h.id = update_handoff_status.handoff_id)
  for no key update;
  -- The row lock serialises concurrent moves: the second accept waits, then sees 'accepted'
  -- and gets the 409 below, so exactly one agent wins.
  select * into v_row from cortex.handoff_events h
  where h.tenant_id = v_tenant and h.id = update_handoff_status.handoff_id for update;
  if not found then
    perform cortex.handoff_not_found(update_handoff_status.handoff_id);
  end if;
  perform cortex.check_handoff_actor(v_row, update_handoff_status.status);
  if not (update_handoff_status.status = any (cortex.handoff_allowed_moves(v_row.status))) then
    perform cortex.handoff_move_error(v_row.status, update_handoff_status.status);
  end if;

  update cortex.handoff_events h set
    status = update_handoff_status.status,
    status_note = nullif(btrim(update_handoff_status.note), ''),
    accepted_by = case when update_handoff_status.status = 'accepted' then v_agent else h.accepted_by end
  where h.tenant_id = v_tenant and h.id = v_row.id
  returning h.* into v_row;

  -- A refused contact goes back to its previous owner, unless someone has taken it since.
  if v_row.status = 'rejected' then
    if v_row.to_agent is not null then
      update cortex.contacts c set owner_agent = v_row.previous_owner_agent
      where c.tenant_id = v_tenant and c.id = v_row.contact_id and c.owner_agent = v_row.to_agent;
    else
      update cortex.contacts c set owner_human_id = v_row.previous_owner_human_id
      where c.tenant_id = v_tenant and c.id = v_row.contact_id and c.owner_human_id = v_row.to_human_id;
    end if;
  end if;

  v_payload := cortex.handoff_json(v_row) || jsonb_build_object(
    'contact', cortex.handoff_contact_json(v_tenant, v_row.contact_id), 'actor', v_agent);
  foreach v_recipient in array array['agent:' || v_row.from_agent, 'monitor'] loop
    perform cortex.notify(v_tenant, 'handoff.' || v_row.status, v_recipient, v_payload,
                          format('handoff.%s:%s:%s', v_row.status, v_row.id, v_recipient));
  end loop;

  return cortex.handoff_json(v_row) || jsonb_build_object(
    'allowed_moves', to_jsonb(cortex.handoff_allowed_moves(v_row.status)),
    'notifications_sent', to_jsonb(array(select n from unnest(array[v_row.from_agent] || cortex.monitor_names(v_tenant))
                                                  with ordinality as u(n, o)
                                         group by n order by min(o))));
end $$;
comment on function public.update_handoff_status(uuid, text, text) is
  'Moves a handoff pending -> accepted -> completed, or pending/accepted -> rejected (a rejection gives the contact back to its previous owner); any other move is SQLSTATE 55000 listing the allowed ones. Only the addressee, an admin or the monitor may move it; a handoff to a human only the service key (agent system) or an admin (else 42501, cortex.check_handoff_actor). Concurrent moves are serialised on the row, so of two accepts exactly one wins. Notifies the sending agent and the monitor (handoff.<status>).';
grant execute on function public.update_handoff_status(uuid, text, text) to authenticated;
