-- Notifications: an outbox written in the same transaction as the event that causes it.
-- The worker delivers each message as a signed webhook (retries, dead letters); local LISTEN
-- subscribers get pg_notify at commit. Nothing is sent from inside a transaction that may roll back.

create table cortex.webhook_endpoints (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  -- 'agent:<name>', 'monitor', 'admin' or 'human:<id>': who this URL delivers to.
  recipient text not null check (recipient ~ '^(agent:[a-z][a-z0-9_-]{0,62}|human:.{1,200}|monitor|admin)$'),
  url text not null check (url ~ '^https?://'),
  -- HMAC-SHA256 key for the signature header; generated when not given.
  secret text not null default encode(extensions.gen_random_bytes(32), 'hex'),
  enabled boolean not null default true,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant_id, recipient)
);
comment on table cortex.webhook_endpoints is 'Where each recipient''s notifications are delivered (per agent, the monitor, the tenant admin, humans).';
create trigger webhook_endpoints_updated_at before update on cortex.webhook_endpoints
  for each row execute function cortex.touch_updated_at();

create or replace function cortex.outbox_statuses() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['pending', 'delivering', 'delivered', 'dead', 'skipped'];
end $$;
comment on function cortex.outbox_statuses() is
  'Allowed outbox statuses: pending -> delivering -> delivered, or dead after the last attempt, or skipped when the recipient has no endpoint.';

create table cortex.outbox (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  id bigint generated always as identity,
  event text not null check (event ~ '^[a-z_.]+$'),
  recipient text not null,
  payload jsonb not null default '{}' check (jsonb_typeof(payload) = 'object'),
  -- Receivers deduplicate on this; the same event for the same recipient is one message.
  idempotency_key text not null default gen_random_uuid()::text,
  status text not null default 'pending' check (status = any (cortex.outbox_statuses())),
  attempts int not null default 0,
  max_attempts int not null default 8,
  next_attempt_at timestamptz not null default now(),
  locked_by text,
  locked_until timestamptz,
  last_error text,
  last_status_code int,
  delivered_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant_id, id),
  unique (tenant_id, idempotency_key)
);
comment on table cortex.outbox is 'Notifications to deliver, written with the event that caused them; delivered by the worker, dead-lettered after the last try.';
create index outbox_due on cortex.outbox (next_attempt_at) where status in ('pending', 'delivering');
create index outbox_dead on cortex.outbox (tenant_id, created_at) where status = 'dead';
create trigger outbox_updated_at before update on cortex.outbox
  for each row execute function cortex.touch_updated_at();

alter table cortex.webhook_endpoints enable row level security;
alter table cortex.outbox enable row level security;
create policy "Outbox is visible to agents of their tenant" on cortex.outbox
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
-- webhook_endpoints hold secrets: no policy for API roles; operators manage them as the owner.
grant select on cortex.outbox to authenticated;

-- Definer: the event functions (create_handoff, update_handoff_status, record_usage's refusal), running
-- as the caller, queue notifications for their tenant. An API caller must be a writing agent of that
-- tenant (the rule of every public function that notifies); a read-only agent notifies no one.
create or replace function cortex.notify(
  p_tenant_id uuid, p_event text, p_recipient text, p_payload jsonb, p_idempotency_key text default null
) returns bigint
language plpgsql volatile security definer set search_path = '' as $$
declare v_id bigint;
begin
  perform cortex.guard_writer(p_tenant_id);
  insert into cortex.outbox (tenant_id, event, recipient, payload, idempotency_key)
  values (p_tenant_id, p_event, p_recipient, coalesce(p_payload, '{}'),
          coalesce(p_idempotency_key, gen_random_uuid()::text))
  on conflict (tenant_id, idempotency_key) do nothing
  returning id into v_id;
  -- At commit only, like the outbox row itself. Any role can LISTEN (Postgres has no per-role
  -- LISTEN privilege), so the signal is a bare wake-up: no tenant, recipient or event in it.
  -- Subscribers read the outbox (RLS-filtered) or subscribe through Supabase Realtime.
  perform pg_notify('cortex_outbox', '');
  return v_id;
end $$;
comment on function cortex.notify(uuid, text, text, jsonb, text) is
  'Queues a notification (event, recipient such as agent:jasper / monitor / admin / human:<id>) in the outbox, once per idempotency key, and wakes LISTENers on cortex_outbox at commit with an empty payload. '
  'An API caller must be a writing agent of p_tenant_id (cortex.guard_writer); the owner and worker notify for any tenant.';
revoke execute on function cortex.notify(uuid, text, text, jsonb, text) from public, anon;
grant execute on function cortex.notify(uuid, text, text, jsonb, text) to authenticated;
