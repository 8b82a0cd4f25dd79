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

-- Vocabularies are defined once, as immutable functions: the CHECK constraints, the functions'
-- validation (cortex.check_enum) and the Python Literals' parity test (tests/test_vocabularies.py)
-- all read the same list.
-- Vocabularies are plpgsql, not sql: CHECK constraints call them for every row written, and a sql
-- function there is parsed and planned again for every statement (16-24 us a call); plpgsql keeps its
-- plan for the session, and a query still folds an immutable one to a constant when it is planned.
create or replace function cortex.agent_roles() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['agent', 'monitor', 'admin'];
end $$;
comment on function cortex.agent_roles() is
  'Allowed agent roles: agent, monitor (receives the tenant''s alerts; helios), admin (may act for other agents; the system agent).';

create table cortex.agents (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  name text not null check (name ~ '^[a-z][a-z0-9_-]{0,62}$'),
  display_name text,
  role text not null default 'agent' check (role = any (cortex.agent_roles())),
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

-- The guard every API function calls first. One definer, so the agent lookup skips the agents
-- table's RLS policy, and the claims are parsed once: it used to call current_tenant and a definer
-- that parsed them twice more, and each plpgsql call with a SET clause costs a GUC save and
-- restore (measured: 33 us a call before, about half now; every API call pays it once). It
-- answers only about the caller's own claims, so it tells nothing about other tenants.
create or replace function cortex.require_tenant() returns uuid
language plpgsql stable security definer set search_path = '' as $$
declare
  c jsonb := coalesce(nullif(pg_catalog.current_setting('request.jwt.claims', true), ''), '{}')::jsonb;
  t uuid := nullif(coalesce(c ->> 'tenant_id', c -> 'app_metadata' ->> 'tenant_id'), '')::uuid;
  a text := nullif(coalesce(c ->> 'agent', c -> 'app_metadata' ->> 'agent'), '');
begin
  if t is null then
    raise exception 'no tenant in the request claims'
      using errcode = '28000', hint = 'authenticate with an agent key or a JWT carrying tenant_id and agent';
  end if;
  -- The agent claim must name a known, enabled agent of the tenant (a signed JWT may name anyone).
  if not exists (select from cortex.agents ag where ag.tenant_id = t and ag.name = a and ag.enabled) then
    raise exception 'unknown or disabled agent "%"', left(coalesce(a, ''), 100)
      using errcode = '28000', column = 'agent',
            hint = 'the agent claim must name an enabled agent of the tenant';
  end if;
  return t;
end $$;
comment on function cortex.require_tenant() is
  'Tenant of the caller, or SQLSTATE 28000 when the request carries none, or no agent, or an agent claim that is not an enabled agent of the tenant (one primary-key lookup; security definer, so RLS on agents is not applied to it).';

-- Security definer so that RLS-restricted callers can ask about their own agent row;
-- it answers only for the caller's own tenant and agent.
-- plpgsql: a definer is never inlined, and as sql it was planned again for every row a write policy
-- checked; plpgsql keeps its plan for the session.
create or replace function cortex.agent_can_write() returns boolean
language plpgsql stable security definer set search_path = '' as $$
begin
  return coalesce((select not a.read_only and a.enabled from cortex.agents a
                   where a.tenant_id = cortex.current_tenant() and a.name = cortex.current_agent()), false);
end $$;
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

-- Validation shared by every function ---------------------------------------------------------

create or replace function cortex.check_enum(p_field text, p_value text, p_allowed text[]) returns text
language plpgsql immutable set search_path = '' as $$
begin
  if p_value is not null and not (p_value = any (p_allowed)) then
    raise exception '% must be one of: %', p_field, array_to_string(p_allowed, ', ')
      using errcode = '22023', column = p_field, detail = format('got "%s"', left(p_value, 100));
  end if;
  return p_value;
end $$;
comment on function cortex.check_enum(text, text, text[]) is 'Returns p_value if allowed (or null), else SQLSTATE 22023 naming the field and the allowed values.';

grant execute on function cortex.check_enum(text, text, text[]) to authenticated, service_role;

-- The one tenant guard ------------------------------------------------------------------------
-- Functions that take a tenant id (the security definer helpers, the worker's functions) are
-- called both by API callers (inside a public function, as authenticated) and by the worker or an
-- operator (the owner, no claims). SECURITY DEFINER changes current_user but not the `role`
-- setting: SET ROLE (PostgREST's set_config('role', ..., true), and our HTTP edge's) stays visible
-- inside definer functions, so the role a request runs as is `role`, or the session user when no
-- SET ROLE was done. The API roles are Supabase's anon, authenticated and service_role, and the
-- login role PostgREST connects as (authenticator), which must never count as the owner.

-- caller_role and is_api_caller have no SET clause, so that the planner inlines them: every guard
-- asks, several times per write, and as functions with a SET clause they were planned and called
-- each time (14 us a call; a remember asked 6 times). Every name in them is schema-qualified.
create or replace function cortex.caller_role() returns text
language sql stable as $$
  select coalesce(nullif(pg_catalog.current_setting('role', true), 'none'), session_user::pg_catalog.text)
$$;
comment on function cortex.caller_role() is
  'The role the request runs as before any SECURITY DEFINER switch: the SET ROLE target, else the session user. Inlined into its callers (no SET clause; every name schema-qualified).';

create or replace function cortex.is_api_caller() returns boolean
language sql stable as $$
  select cortex.caller_role() operator(pg_catalog.=) any (array['anon', 'authenticated', 'service_role', 'authenticator']::pg_catalog.text[])
$$;
comment on function cortex.is_api_caller() is
  'True when the request runs as an API role (anon, authenticated, service_role, or authenticator itself): its claims decide what it may do. False for the owner and the worker. Inlined into its callers (no SET clause; every name schema-qualified).';

create or replace function cortex.guard_tenant(p_tenant_id uuid) returns boolean
language plpgsql stable set search_path = '' as $$
declare v_claim uuid := cortex.current_tenant();
begin
  if v_claim is null then
    if cortex.is_api_caller() then
      raise exception 'no tenant in the request claims'
        using errcode = '28000',
              hint = 'authenticate with an agent key or a JWT carrying tenant_id and agent';
    end if;
    return false;
  end if;
  if p_tenant_id is distinct from v_claim then
    raise exception 'the request''s tenant cannot act on another tenant'
      using errcode = '42501', column = 'tenant_id',
            hint = 'an API caller only ever works on the tenant of its claims';
  end if;
  perform cortex.require_tenant();  -- and a known, enabled agent
  return cortex.is_api_caller();
end $$;
comment on function cortex.guard_tenant(uuid) is
  'The one tenant guard of every function that takes a tenant id. An API caller (cortex.is_api_caller) needs a tenant claim (else SQLSTATE 28000) equal to p_tenant_id (else 42501) and an agent claim naming an enabled agent of it (cortex.require_tenant, else 28000); a caller with a tenant claim is held to it whatever its role; the owner or worker without claims passes. Returns true when the caller is an API caller, so the function applies the public functions'' rules too (cortex.guard_writer, cortex.guard_acting_agent).';

create or replace function cortex.guard_writer(p_tenant_id uuid) returns boolean
language plpgsql stable set search_path = '' as $$
begin
  if cortex.guard_tenant(p_tenant_id) then
    perform cortex.require_writer();
    return true;
  end if;
  return false;
end $$;
comment on function cortex.guard_writer(uuid) is
  'cortex.guard_tenant, and for an API caller also cortex.require_writer (SQLSTATE 42501 for a read-only or disabled agent, 28000 without an agent). Returns true when the caller is an API caller.';

create or replace function cortex.caller_is_admin() returns boolean
language sql stable set search_path = '' as $$
  select coalesce((select a.role = 'admin' and a.enabled from cortex.agents a
                   where a.tenant_id = (select cortex.current_tenant()) and a.name = (select cortex.current_agent())), false)
$$;
comment on function cortex.caller_is_admin() is
  'True when the calling agent (claims) is an enabled admin of its tenant (the system agent, what the service key acts as).';

create or replace function cortex.guard_acting_agent(p_tenant_id uuid, p_agent text, p_field text default 'agent')
returns void
language plpgsql stable set search_path = '' as $$
begin
  if cortex.guard_tenant(p_tenant_id) and p_agent is distinct from cortex.current_agent()
     and not cortex.caller_is_admin() then
    raise exception 'agent "%" cannot act for agent "%"', cortex.current_agent(), left(p_agent, 100)
      using errcode = '42501', column = p_field,
            hint = 'an agent records its own work; only an admin agent may act for another';
  end if;
end $$;
comment on function cortex.guard_acting_agent(uuid, text, text) is
  'cortex.guard_tenant, and for an API caller: p_agent must be the calling agent unless the caller is an admin (SQLSTATE 42501 naming p_field).';

grant execute on function cortex.jwt_claims(), cortex.current_tenant(), cortex.current_agent(),
  cortex.require_tenant(), cortex.require_writer(), cortex.agent_can_write(), cortex.caller_role(),
  cortex.is_api_caller(), cortex.guard_tenant(uuid), cortex.guard_writer(uuid), cortex.caller_is_admin(),
  cortex.guard_acting_agent(uuid, text, text) to authenticated, service_role;

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

-- Tenants and agents (operators, as the owner) -----------------------------------------------
-- A tenant starts with a 'system' agent (role admin): what the service key and the worker act as.
-- Its model prices are seeded by a trigger of the usage migration (cortex.seed_model_prices).

create or replace function cortex.create_tenant(p_name text, p_slug text, p_time_zone text default 'UTC')
returns uuid
language plpgsql volatile set search_path = '' as $$
declare v_id uuid;
begin
  insert into cortex.tenants (name, slug, time_zone) values (p_name, p_slug, coalesce(p_time_zone, 'UTC'))
  returning id into v_id;
  insert into cortex.agents (tenant_id, name, display_name, role) values (v_id, 'system', 'Cortex system', 'admin');
  insert into cortex.agent_config (tenant_id, agent) values (v_id, 'system');
  return v_id;
end $$;
comment on function cortex.create_tenant(text, text, text) is
  'Creates a tenant with its system agent (role admin); default model prices come with it (trigger of the usage migration). Returns its id.';

create or replace function cortex.create_agent(
  p_tenant_id uuid, p_name text, p_display_name text default null, p_role text default 'agent',
  p_read_only boolean default false, p_max_input_tokens int default 2000, p_daily_token_budget int default 100000
) returns text
language plpgsql volatile set search_path = '' as $$
begin
  perform cortex.check_enum('role', coalesce(p_role, 'agent'), cortex.agent_roles());
  insert into cortex.agents (tenant_id, name, display_name, role, read_only)
  values (p_tenant_id, p_name, p_display_name, coalesce(p_role, 'agent'), coalesce(p_read_only, false))
  on conflict (tenant_id, name) do update
    set display_name = excluded.display_name, role = excluded.role, read_only = excluded.read_only;
  insert into cortex.agent_config (tenant_id, agent, max_input_tokens, daily_token_budget)
  values (p_tenant_id, p_name, p_max_input_tokens, p_daily_token_budget)
  on conflict (tenant_id, agent) do update
    set max_input_tokens = excluded.max_input_tokens, daily_token_budget = excluded.daily_token_budget;
  return p_name;
end $$;
comment on function cortex.create_agent(uuid, text, text, text, boolean, int, int) is
  'Creates or updates an agent and its budget configuration (idempotent); SQLSTATE 22023 naming role for an unknown role.';

-- Timeouts of the API roles ------------------------------------------------------------------
-- Our slowest API call is ~25 ms at p95 (docs/benchmarks.md); worker jobs run as the owner and are
-- not limited here. Supabase's defaults are statement_timeout 3 s for anon and 8 s for
-- authenticated (service_role: none, so authenticator's 8 s), no lock_timeout and no
-- idle_in_transaction_session_timeout; these replace them:
--   authenticated  statement 5 s (200x the p95: a cold cache or a level-3 context still fits; a
--                  runaway query cannot pin a pooled connection for long), lock 2 s (our locks, the
--                  contact row and the per-agent budget lock, are held for milliseconds; a longer
--                  wait means a stuck holder, so fail with 55P03 instead of queueing behind it), idle
--                  in transaction 10 s (a request's transaction holds no model call: the HTTP edge
--                  calls models with no connection held, PostgREST never idles).
--   anon           statement 1 s, lock 1 s, idle 5 s: anon may execute nothing of ours.
--   service_role   statement 30 s, lock 5 s, idle 30 s: operators' scripts through PostgREST (bulk
--                  work belongs to the worker, as the owner).
-- ALTER ROLE settings apply when a session logs in as the role; anon, authenticated and service_role
-- never log in. PostgREST applies the impersonated role's settings (SET LOCAL) on each request;
-- the HTTP edge does the same with cortex.apply_role_settings. Role settings are cluster-wide
-- (roles are), as on Supabase.
alter role authenticated set statement_timeout = '5s';
alter role authenticated set lock_timeout = '2s';
alter role authenticated set idle_in_transaction_session_timeout = '10s';
alter role anon set statement_timeout = '1s';
alter role anon set lock_timeout = '1s';
alter role anon set idle_in_transaction_session_timeout = '5s';
alter role service_role set statement_timeout = '30s';
alter role service_role set lock_timeout = '5s';
alter role service_role set idle_in_transaction_session_timeout = '30s';

create or replace function cortex.apply_role_settings(p_role text default null, p_local boolean default true) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_role text := coalesce(p_role, cortex.caller_role());
  v_settings jsonb := '{}';
  v_item text;
begin
  -- As PostgREST does for the role it impersonates: the role's settings for any database, then
  -- those for this database, each SET LOCAL (they end with the transaction).
  for v_item in
    select unnest(s.setconfig)
    from pg_catalog.pg_db_role_setting s join pg_catalog.pg_roles r on r.oid = s.setrole
    where r.rolname = v_role
      and s.setdatabase in (0, (select d.oid from pg_catalog.pg_database d where d.datname = pg_catalog.current_database()))
    order by s.setdatabase
  loop
    if split_part(v_item, '=', 1) in ('statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout') then
      perform pg_catalog.set_config(split_part(v_item, '=', 1), substr(v_item, strpos(v_item, '=') + 1), p_local);
      v_settings := v_settings || jsonb_build_object(split_part(v_item, '=', 1), substr(v_item, strpos(v_item, '=') + 1));
    end if;
  end loop;
  return v_settings;
end $$;
comment on function cortex.apply_role_settings(text, boolean) is
  'Applies a role''s timeouts (statement_timeout, lock_timeout, idle_in_transaction_session_timeout from ALTER ROLE ... SET) to the current transaction (p_local, as PostgREST does for the role it impersonates) or to the session (the HTTP edge sets them once per pooled connection); p_role defaults to the role the request runs as. Returns the settings applied.';
grant execute on function cortex.apply_role_settings(text, boolean) to authenticated, service_role;

-- Erasure --------------------------------------------------------------------------------------
-- The interaction log and the handoffs (with their audit trail) are append-only for every role,
-- the owner included (triggers in their migrations). They go with their contact or tenant (the
-- cascades of `delete from cortex.contacts` / `cortex.tenants`: the erasure of a person or a
-- client), or, for maintenance such as resetting a benchmark data set, inside a transaction that
-- declared its erasure first with cortex.begin_erasure. API roles have no DELETE grant on these
-- tables at all, and the declaration is refused to them.
create or replace function cortex.begin_erasure(p_reason text) returns void
language plpgsql volatile set search_path = '' as $$
begin
  if cortex.is_api_caller() then
    raise exception 'only the owner may erase records' using errcode = '42501';
  end if;
  if nullif(btrim(p_reason), '') is null then
    raise exception 'say why records are erased' using errcode = '22023', column = 'reason',
      hint = 'for example: select cortex.begin_erasure(''benchmark reset'')';
  end if;
  perform pg_catalog.set_config('cortex.erasure', left(p_reason, 200), true);
  raise log 'cortex: erasure declared by % for this transaction: %', session_user, p_reason;
end $$;
comment on function cortex.begin_erasure(text) is
  'Owner only: allows DELETE of interactions and handoffs (with their audit rows) until the end of the current transaction, for a stated reason (logged). The documented maintenance path around the append-only triggers; erasing a contact or tenant needs no declaration.';

create or replace function cortex.erasure_declared() returns boolean
language sql stable set search_path = '' as $$
  select coalesce(pg_catalog.current_setting('cortex.erasure', true), '') <> '' and not cortex.is_api_caller()
$$;
comment on function cortex.erasure_declared() is
  'True inside a transaction of the owner that called cortex.begin_erasure (read by the append-only triggers).';
