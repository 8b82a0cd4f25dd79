-- Tenancy and identity: tenants, their agents, agents' API keys and per-agent configuration.
-- Tables live in the private schema `cortex`, which PostgREST does not expose; agents reach
-- them only through the functions in `public`. Every key includes tenant_id so each table can
-- be distributed by tenant_id (Citus) without a schema change.

create schema if not exists cortex;
comment on schema cortex is 'Cortex tables and internal functions; not exposed through PostgREST.';

-- Nothing is executable by PUBLIC unless granted explicitly (Supabase grants public functions
-- to anon by default; we revoke and grant each API function by name).
alter default privileges revoke execute on functions from public;
alter default privileges in schema public revoke execute on functions from anon, authenticated, service_role;
alter default privileges in schema public revoke all on tables from anon, authenticated, service_role;
alter default privileges in schema cortex revoke execute on functions from public;
revoke all on schema cortex from public;
grant usage on schema cortex to authenticated, service_role;

-- Shared trigger: updated_at follows every update.
create or replace function cortex.touch_updated_at() returns trigger
language plpgsql set search_path = '' as $$
begin
  new.updated_at := now();
  return new;
end $$;
comment on function cortex.touch_updated_at() is 'Trigger: keeps updated_at current on every update.';

create table cortex.tenants (
  id uuid primary key default gen_random_uuid(),
  name text not null check (length(btrim(name)) between 1 and 200),
  slug text not null unique check (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
  time_zone text not null default 'UTC',
  config jsonb not null default '{}' check (jsonb_typeof(config) = 'object'),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
comment on table cortex.tenants is 'One row per client organisation; every other row belongs to exactly one tenant.';
create trigger tenants_updated_at before update on cortex.tenants
  for each row execute function cortex.touch_updated_at();

-- A tenant's time zone must be one Postgres knows (budgets and schedules use it).
create or replace function cortex.check_time_zone() returns trigger
language plpgsql set search_path = '' as $$
begin
  if not exists (select from pg_catalog.pg_timezone_names where name = new.time_zone) then
    raise exception 'unknown time zone "%"', new.time_zone
      using errcode = '22023', column = 'time_zone', hint = 'use an IANA name such as Europe/Berlin';
  end if;
  return new;
end $$;
comment on function cortex.check_time_zone() is 'Trigger: rejects a tenant time zone Postgres does not know.';
create trigger tenants_time_zone before insert or update of time_zone on cortex.tenants
  for each row execute function cortex.check_time_zone();

create table cortex.agents (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  name text not null check (name ~ '^[a-z][a-z0-9_-]{0,62}$'),
  display_name text,
  role text not null default 'agent' check (role in ('agent', 'monitor', 'admin')),
  read_only boolean not null default false,
  enabled boolean not null default true,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant_id, name)
);
comment on table cortex.agents is 'The agents of a tenant (luna, mia, ...); read_only agents (a monitor such as helios) cannot write.';
create trigger agents_updated_at before update on cortex.agents
  for each row execute function cortex.touch_updated_at();

create table cortex.agent_keys (
  tenant_id uuid not null,
  id uuid not null default gen_random_uuid(),
  agent text not null,
  prefix text not null,
  key_hash bytea not null,
  label text,
  created_at timestamptz not null default now(),
  last_used_at timestamptz,
  revoked_at timestamptz,
  primary key (tenant_id, id),
  -- Keys are looked up by hash across tenants (the key names its tenant); 192 random bits make a
  -- collision impossible in practice, so uniqueness is per tenant and the lookup index is global.
  unique (tenant_id, prefix),
  unique (tenant_id, key_hash),
  foreign key (tenant_id, agent) references cortex.agents (tenant_id, name) on delete cascade
);
create index agent_keys_hash on cortex.agent_keys (key_hash);
create index agent_keys_prefix on cortex.agent_keys (prefix);
comment on table cortex.agent_keys is 'API keys of agents, stored as SHA-256 hashes; the key itself is shown once at creation.';
create index agent_keys_agent on cortex.agent_keys (tenant_id, agent);

create table cortex.agent_config (
  tenant_id uuid not null,
  agent text not null,
  max_input_tokens int not null default 2000 check (max_input_tokens between 100 and 1000000),
  max_output_tokens int not null default 500 check (max_output_tokens between 1 and 1000000),
  daily_token_budget int not null default 100000 check (daily_token_budget >= 0),
  default_model text not null default 'haiku',
  complex_task_model text not null default 'sonnet',
  config jsonb not null default '{}' check (jsonb_typeof(config) = 'object'),
  enabled boolean not null default true,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant_id, agent),
  foreign key (tenant_id, agent) references cortex.agents (tenant_id, name) on delete cascade
);
comment on table cortex.agent_config is 'Per-agent token budgets and model preferences (seed 000).';
create trigger agent_config_updated_at before update on cortex.agent_config
  for each row execute function cortex.touch_updated_at();

-- Claims ------------------------------------------------------------------------------------
-- PostgREST puts the verified JWT's claims in request.jwt.claims; the HTTP API sets the same
-- GUC in the same way, so both call paths resolve tenant and agent identically.

-- jwt_claims, current_tenant and current_agent are plpgsql, not sql: with their SET clause a sql
-- function cannot be inlined and is parsed and planned again in every transaction (half of a
-- get_context read); plpgsql keeps its plans for the session.
create or replace function cortex.jwt_claims() returns jsonb
language plpgsql stable set search_path = '' as $$
begin
  return coalesce(nullif(current_setting('request.jwt.claims', true), ''), '{}')::jsonb;
end $$;
comment on function cortex.jwt_claims() is 'The request''s JWT claims (PostgREST''s request.jwt.claims), {} when none.';

create or replace function cortex.current_tenant() returns uuid
language plpgsql stable set search_path = '' as $$
declare c jsonb := cortex.jwt_claims();
begin
  return nullif(coalesce(c ->> 'tenant_id', c -> 'app_metadata' ->> 'tenant_id'), '')::uuid;
end $$;
comment on function cortex.current_tenant() is 'Tenant of the caller, from the tenant_id claim (top level or app_metadata).';

create or replace function cortex.current_agent() returns text
language plpgsql stable set search_path = '' as $$
declare c jsonb := cortex.jwt_claims();
begin
  return nullif(coalesce(c ->> 'agent', c -> 'app_metadata' ->> 'agent'), '');
end $$;
comment on function cortex.current_agent() is 'Agent name of the caller, from the agent claim (top level or app_metadata).';

create or replace function cortex.require_tenant() returns uuid
language plpgsql stable set search_path = '' as $$
declare t uuid := cortex.current_tenant();
begin
  if t is null then
    raise exception 'no tenant in the request claims'
      using errcode = '28000', hint = 'authenticate with an agent key or a JWT carrying tenant_id and agent';
  end if;
  return t;
end $$;
comment on function cortex.require_tenant() is 'Tenant of the caller, or SQLSTATE 28000 when the request carries none.';

-- Security definer so that RLS-restricted callers can ask about their own agent row;
-- it answers only for the caller's own tenant and agent.
create or replace function cortex.agent_can_write() returns boolean
language sql stable security definer set search_path = '' as $$
  select coalesce((select not a.read_only and a.enabled from cortex.agents a
                   where a.tenant_id = cortex.current_tenant() and a.name = cortex.current_agent()), false)
$$;
comment on function cortex.agent_can_write() is 'True when the calling agent exists, is enabled and is not read-only (used by write policies).';

create or replace function cortex.require_writer() returns text
language plpgsql stable security definer set search_path = '' as $$
declare
  t uuid := cortex.require_tenant();
  a text := cortex.current_agent();
  ro boolean;
begin
  if a is null then
    raise exception 'no agent in the request claims' using errcode = '28000';
  end if;
  select ag.read_only or not ag.enabled into ro from cortex.agents ag where ag.tenant_id = t and ag.name = a;
  if ro is null then
    raise exception 'unknown agent "%"', a using errcode = '28000', column = 'agent';
  end if;
  if ro then
    raise exception 'agent "%" is read-only', a
      using errcode = '42501', hint = 'this agent may read but not write';
  end if;
  return a;
end $$;
comment on function cortex.require_writer() is 'Name of the calling agent if it may write; SQLSTATE 42501 for a read-only or disabled agent.';
revoke execute on function cortex.require_writer(), cortex.agent_can_write() from public, anon;
grant execute on function cortex.jwt_claims(), cortex.current_tenant(), cortex.current_agent(),
  cortex.require_tenant(), cortex.require_writer(), cortex.agent_can_write() to authenticated, service_role;

-- RLS ----------------------------------------------------------------------------------------
alter table cortex.tenants enable row level security;
alter table cortex.agents enable row level security;
alter table cortex.agent_keys enable row level security;
alter table cortex.agent_config enable row level security;

create policy "Tenants see their own tenant row" on cortex.tenants
  for select to authenticated using (id = (select cortex.current_tenant()));
create policy "Agents are visible to agents of their tenant" on cortex.agents
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
create policy "Agent config is visible to agents of their tenant" on cortex.agent_config
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
-- agent_keys: no policy for API roles at all; only the owner (key management) reads it.

grant select on cortex.tenants, cortex.agents, cortex.agent_config to authenticated;

-- Key management (operators, through the CLI as the database owner) -------------------------

create or replace function cortex.hash_key(p_key text) returns bytea
language sql immutable strict set search_path = '' as $$
  select pg_catalog.sha256(pg_catalog.convert_to(p_key, 'UTF8'))
$$;
comment on function cortex.hash_key(text) is 'SHA-256 of an API key; keys are stored only as this hash.';

create or replace function cortex.create_agent_key(p_tenant_id uuid, p_agent text, p_label text default null)
returns text
language plpgsql volatile set search_path = '' as $$
declare
  v_prefix text := pg_catalog.encode(extensions.gen_random_bytes(6), 'hex');
  v_secret text := pg_catalog.translate(pg_catalog.encode(extensions.gen_random_bytes(24), 'base64'), '+/=', '-_');
  v_key text;
begin
  if not exists (select from cortex.agents a where a.tenant_id = p_tenant_id and a.name = p_agent) then
    raise exception 'unknown agent "%"', p_agent using errcode = 'P0002', column = 'agent';
  end if;
  v_key := 'ctx_' || v_prefix || '_' || v_secret;
  insert into cortex.agent_keys (tenant_id, agent, prefix, key_hash, label)
  values (p_tenant_id, p_agent, v_prefix, cortex.hash_key(v_key), p_label);
  return v_key;
end $$;
comment on function cortex.create_agent_key(uuid, text, text) is 'Creates an API key for an agent and returns it; only its hash is stored, so it is shown once.';

create or replace function cortex.revoke_agent_key(p_prefix text) returns boolean
language sql volatile set search_path = '' as $$
  with r as (
    update cortex.agent_keys set revoked_at = now()
    where prefix = p_prefix and revoked_at is null returning 1)
  select exists (select from r)
$$;
comment on function cortex.revoke_agent_key(text) is 'Revokes the key with this prefix; true when a live key was revoked.';

-- Used by the HTTP edge before it switches role: maps a presented key to its claims.
create or replace function cortex.authenticate_key(p_key text) returns jsonb
language sql volatile set search_path = '' as $$
  with k as (
    update cortex.agent_keys ak set last_used_at = now()
    where ak.key_hash = cortex.hash_key(p_key) and ak.revoked_at is null
      and (ak.last_used_at is null or ak.last_used_at < now() - interval '1 minute')
    returning ak.tenant_id, ak.agent
  ), found as (
    select tenant_id, agent from k
    union all
    select ak.tenant_id, ak.agent from cortex.agent_keys ak
    where ak.key_hash = cortex.hash_key(p_key) and ak.revoked_at is null
      and not exists (select from k)
  )
  select jsonb_build_object('role', 'authenticated', 'tenant_id', f.tenant_id, 'agent', f.agent,
                            'read_only', a.read_only)
  from found f join cortex.agents a on a.tenant_id = f.tenant_id and a.name = f.agent and a.enabled
  limit 1
$$;
comment on function cortex.authenticate_key(text) is 'Claims (tenant_id, agent) for a live API key of an enabled agent, or null.';
