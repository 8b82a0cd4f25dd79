-- Alerts that reach people (issue 7; seed 000: "alert Helios/admin").
--
-- Three things write a cortex.alerts row: a parked job (cortex.fail_job), a webhook dead letter
-- (cortex.claim_outbox, cortex.mark_failed) and a budget refusal (below: the budget.exceeded
-- notification that cortex.refuse_usage queues once per agent, day and budget raises the alert, so
-- the alert is exactly as frequent as that notification, on every path that refuses). Every alert
-- row queues, in the same transaction, an `alert.raised` outbox message to the people who act on it:
--
--   'monitor'        the monitor channel: its webhook endpoint, else HELIOS_WEBHOOK_URL (as for
--                    handoffs, budget refusals and the daily usage report);
--   'admin'          the tenant's admin channel (its endpoint; without one the message is marked
--                    skipped at delivery, and LISTEN subscribers have seen it);
--   'agent:<name>'   each enabled monitor or admin agent with an enabled webhook endpoint of its own.
--
-- So the `system` agent (role admin: what the service key and the worker act as) is addressed only if
-- someone gave it an endpoint. No loops: a dead letter whose message was itself an alert.raised is
-- recorded as an alert row but raises no message; otherwise an unreachable monitor endpoint would
-- dead-letter the alert about its own dead letter, forever.
--
-- Any agent of the tenant reads alerts (public.list_alerts); monitors and admins that may write
-- acknowledge them (public.ack_alert), once. A direct UPDATE through RLS can do no more than that.

alter table cortex.alerts
  add column acknowledged_by text,
  add column ack_note text check (ack_note is null or length(ack_note) <= 2000),
  add column notified text[] not null default '{}';
comment on column cortex.alerts.acknowledged_by is 'The agent that acknowledged the alert (null while open).';
comment on column cortex.alerts.ack_note is 'What the acknowledging agent wrote (what was done, why it can wait).';
comment on column cortex.alerts.notified is 'The recipients an alert.raised message was queued for (empty: none, e.g. the loop guard).';
create index alerts_open on cortex.alerts (tenant_id, created_at desc) where acknowledged_at is null;
create index alerts_kind on cortex.alerts (tenant_id, kind, created_at desc);

-- Helpers ---------------------------------------------------------------------------------------

create or replace function cortex.alert_json(p_alert cortex.alerts) returns jsonb
language sql stable set search_path = '' as $$
  select jsonb_build_object(
    'id', p_alert.id, 'kind', p_alert.kind, 'severity', p_alert.severity, 'message', p_alert.message,
    'details', p_alert.details, 'created_at', p_alert.created_at,
    'status', case when p_alert.acknowledged_at is null then 'open' else 'acknowledged' end,
    'acknowledged_at', p_alert.acknowledged_at, 'acknowledged_by', p_alert.acknowledged_by,
    'ack_note', p_alert.ack_note, 'notified', to_jsonb(p_alert.notified))
$$;
comment on function cortex.alert_json(cortex.alerts) is
  'An alert as the API returns it: {id, kind, severity, message, details, created_at, status (open | acknowledged), acknowledged_at, acknowledged_by, ack_note, notified}.';

create or replace function cortex.alert_recipients(p_tenant_id uuid) returns text[]
language sql stable set search_path = '' as $$
  select array['monitor', 'admin'] || array(
    select 'agent:' || a.name
    from cortex.agents a
    join cortex.webhook_endpoints e on e.tenant_id = a.tenant_id and e.recipient = 'agent:' || a.name and e.enabled
    where a.tenant_id = p_tenant_id and a.enabled and a.role in ('monitor', 'admin')
    order by a.name)
$$;
comment on function cortex.alert_recipients(uuid) is
  'Who receives a tenant''s alert.raised messages: the monitor and admin channels, plus each enabled monitor or admin agent with an enabled webhook endpoint of its own (never an agent without one, such as system).';

create or replace function cortex.require_role(p_roles text[], p_action text) returns text
language plpgsql stable set search_path = '' as $$
declare
  v_agent text := cortex.require_writer();
  v_role text;
begin
  select a.role into v_role from cortex.agents a
  where a.tenant_id = (select cortex.current_tenant()) and a.name = v_agent;
  if v_role is null or not (v_role = any (p_roles)) then
    raise exception 'agent "%" may not %', v_agent, p_action
      using errcode = '42501',
            hint = format('only agents with role %s may; "%s" has role %s (the service key acts as the admin agent system)',
                          array_to_string(p_roles, ' or '), v_agent, coalesce(v_role, 'none'));
  end if;
  return v_agent;
end $$;
comment on function cortex.require_role(text[], text) is
  'Name of the calling agent if it may write and has one of p_roles; SQLSTATE 42501 naming the action otherwise.';

create or replace function cortex.caller_has_role(p_roles text[]) returns boolean
language sql stable set search_path = '' as $$
  select exists (select from cortex.agents a
                 where a.tenant_id = (select cortex.current_tenant()) and a.name = (select cortex.current_agent())
                   and a.enabled and a.role = any (p_roles))
$$;
comment on function cortex.caller_has_role(text[]) is
  'True when the calling agent exists, is enabled and has one of p_roles (used by policies).';

revoke execute on function cortex.require_role(text[], text), cortex.caller_has_role(text[]) from public, anon;
grant execute on function cortex.alert_json(cortex.alerts), cortex.require_role(text[], text),
  cortex.caller_has_role(text[]) to authenticated, service_role;

-- Raising -----------------------------------------------------------------------------------------

-- Before insert, so the row records whom it notified; the identity id is already assigned here, and a
-- failed insert takes its messages with it (same statement, same transaction).
create or replace function cortex.alert_raise_messages() returns trigger
language plpgsql volatile set search_path = '' as $$
declare v_recipient text;
begin
  if new.kind = 'webhook_dead_letter' and coalesce(new.details ->> 'event', '') like 'alert.%' then
    -- The loop guard: the dead message was an alert itself. The row stays for list_alerts.
    new.notified := '{}';
    return new;
  end if;
  new.notified := cortex.alert_recipients(new.tenant_id);
  foreach v_recipient in array new.notified loop
    perform cortex.notify(new.tenant_id, 'alert.raised', v_recipient, cortex.alert_json(new),
                          format('alert.raised:%s:%s', new.id, v_recipient));
  end loop;
  return new;
end $$;
comment on function cortex.alert_raise_messages() is
  'Trigger: queues an alert.raised outbox message per recipient (cortex.alert_recipients) for each new alert and records them in notified; none for a dead letter that was itself an alert (no loops).';
create trigger alerts_raise_messages before insert on cortex.alerts
  for each row execute function cortex.alert_raise_messages();

create or replace function cortex.alert_on_budget_refusal() returns trigger
language plpgsql volatile set search_path = '' as $$
begin
  insert into cortex.alerts (tenant_id, kind, severity, message, details)
  values (new.tenant_id, 'budget_exceeded', 'warning',
          format('agent %s exceeded its daily budget of %s tokens on %s (used %s, asked for %s more for %s)',
                 new.payload ->> 'agent', new.payload ->> 'daily_budget', new.payload ->> 'day',
                 new.payload ->> 'used_today', new.payload ->> 'requested_tokens', new.payload ->> 'operation'),
          new.payload || jsonb_build_object('outbox_id', new.id));
  return null;
end $$;
comment on function cortex.alert_on_budget_refusal() is
  'Trigger: a budget.exceeded notification (queued once per agent, day and budget by cortex.refuse_usage) raises a budget_exceeded alert.';
create trigger outbox_budget_alert after insert on cortex.outbox
  for each row when (new.event = 'budget.exceeded') execute function cortex.alert_on_budget_refusal();

-- Acknowledging -----------------------------------------------------------------------------------

-- Whatever an API caller writes, an acknowledgement is "now, by me", once; the owner (operators'
-- maintenance, no claims) is trusted as it is everywhere.
create or replace function cortex.alert_acknowledge_guard() returns trigger
language plpgsql volatile set search_path = '' as $$
begin
  if cortex.current_tenant() is null then
    return new;
  end if;
  if old.acknowledged_at is not null then
    raise exception 'alert % is already acknowledged', old.id using errcode = '55000';
  end if;
  new.acknowledged_at := now();
  new.acknowledged_by := cortex.current_agent();
  return new;
end $$;
comment on function cortex.alert_acknowledge_guard() is
  'Trigger: an API caller''s update of an alert is an acknowledgement now, by the calling agent, at most once.';
create trigger alerts_acknowledge_guard before update on cortex.alerts
  for each row execute function cortex.alert_acknowledge_guard();

create policy "Alerts are acknowledged by the monitors and admins of their tenant" on cortex.alerts
  for update to authenticated
  using (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write())
         and (select cortex.caller_has_role(array['monitor', 'admin'])))
  with check (tenant_id = (select cortex.current_tenant()));
grant update (acknowledged_at, acknowledged_by, ack_note) on cortex.alerts to authenticated;

-- API ------------------------------------------------------------------------------------------------

create or replace function public.list_alerts(status text default null, kind text default null, "limit" int default 20)
returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_items jsonb;
  v_open bigint;
begin
  perform cortex.check_enum('status', list_alerts.status, array['open', 'acknowledged']);
  if length(list_alerts.kind) > 100 then
    raise exception 'kind must be at most 100 characters' using errcode = '22023', column = 'kind';
  end if;
  if list_alerts."limit" is null or list_alerts."limit" not between 1 and 100 then
    raise exception 'limit must be between 1 and 100' using errcode = '22023', column = 'limit';
  end if;
  select coalesce(jsonb_agg(cortex.alert_json(r) order by r.created_at desc, r.id desc), '[]') into v_items
  from (
    select * from cortex.alerts a
    where a.tenant_id = v_tenant
      and (list_alerts.status is null
           or (list_alerts.status = 'open') = (a.acknowledged_at is null))
      and (list_alerts.kind is null or a.kind = list_alerts.kind)
    order by a.created_at desc, a.id desc
    limit list_alerts."limit"
  ) r;
  select count(*) into v_open from cortex.alerts a where a.tenant_id = v_tenant and a.acknowledged_at is null;
  return jsonb_build_object('items', v_items, 'limit', list_alerts."limit", 'open', v_open);
end $$;
comment on function public.list_alerts(text, text, int) is
  'The tenant''s alerts, newest first, filtered by status (open | acknowledged) and kind (job_parked, webhook_dead_letter, budget_exceeded, ...): {items, limit, open (how many are open)}. Any agent of the tenant.';
grant execute on function public.list_alerts(text, text, int) to authenticated;

create or replace function public.ack_alert(alert_id bigint, note text default null)
returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_row cortex.alerts;
begin
  perform cortex.require_role(array['monitor', 'admin'], 'acknowledge alerts');
  if ack_alert.alert_id is null then
    raise exception 'alert_id is required' using errcode = '22023', column = 'alert_id';
  end if;
  if length(ack_alert.note) > 2000 then
    raise exception 'note must be at most 2000 characters' using errcode = '22023', column = 'note';
  end if;
  select * into v_row from cortex.alerts a where a.tenant_id = v_tenant and a.id = ack_alert.alert_id for update;
  if not found then
    raise exception 'alert % not found', ack_alert.alert_id
      using errcode = 'P0002', column = 'alert_id', hint = 'list the alerts with GET /api/v1/alerts (list_alerts)';
  end if;
  -- Acknowledging twice is harmless (a retried request): the first acknowledgement stands.
  if v_row.acknowledged_at is null then
    update cortex.alerts a set acknowledged_at = now(), acknowledged_by = cortex.current_agent(),
                               ack_note = nullif(btrim(ack_alert.note), '')
    where a.tenant_id = v_tenant and a.id = ack_alert.alert_id
    returning * into v_row;
  end if;
  return cortex.alert_json(v_row);
end $$;
comment on function public.ack_alert(bigint, text) is
  'Acknowledges an alert of the tenant (now, by the calling agent, with an optional note); monitors and admins that may write only (42501 otherwise), 404 for an unknown id; acknowledging again returns the first acknowledgement.';
grant execute on function public.ack_alert(bigint, text) to authenticated;
