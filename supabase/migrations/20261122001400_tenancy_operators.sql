-- Operator functions: what the `cortex` CLI and the demo loader read and change as the database
-- owner (tenants, agents, keys, counts), so Python calls functions by name and never writes SQL.
-- None of them is an API function: they see every tenant, so no API role may execute them.

create or replace function cortex.list_tenants(p_limit int default null)
returns table (id uuid, name text, slug text, time_zone text, created_at timestamptz, contacts bigint)
language sql stable set search_path = '' as $$
  select t.id, t.name, t.slug, t.time_zone, t.created_at,
         (select count(*) from cortex.contacts c where c.tenant_id = t.id)
  from cortex.tenants t
  order by t.slug
  limit p_limit
$$;
comment on function cortex.list_tenants(int) is
  'Every tenant (the first p_limit; all when null) by slug, with its number of contacts. Owner only (the CLI).';

create or replace function cortex.resolve_tenant(p_ref text default null)
returns uuid
language plpgsql stable set search_path = '' as $$
declare
  v_ref text := nullif(p_ref, '');
  v_id uuid;
  v_only uuid[];
begin
  if v_ref is not null then
    begin
      v_id := v_ref::uuid;
    exception when invalid_text_representation then
      v_id := null;
    end;
    return (select t.id from cortex.tenants t
            where t.id = v_id or t.slug = v_ref
            order by t.id = v_id desc nulls last
            limit 1);
  end if;
  -- No reference: the only tenant when there is exactly one (the usual development set-up).
  select pg_catalog.array_agg(t.id) into v_only from (select id from cortex.tenants limit 2) t;
  return case when pg_catalog.cardinality(v_only) = 1 then v_only[1] end;
end $$;
comment on function cortex.resolve_tenant(text) is
  'The id of the tenant p_ref names (a slug or a UUID); with no p_ref, the only tenant if there is exactly one; else null. Owner only (the CLI).';

create or replace function cortex.list_agents(p_tenant_id uuid, p_name text default null)
returns table (
  name text, display_name text, role text, read_only boolean, enabled boolean,
  max_input_tokens int, daily_token_budget int
)
language sql stable set search_path = '' as $$
  select a.name, a.display_name, a.role, a.read_only, a.enabled, c.max_input_tokens, c.daily_token_budget
  from cortex.agents a
  left join cortex.agent_config c on c.tenant_id = a.tenant_id and c.agent = a.name
  where a.tenant_id = p_tenant_id and (p_name is null or a.name = p_name)
  order by a.name
$$;
comment on function cortex.list_agents(uuid, text) is
  'The agents of a tenant (or the one named p_name) by name, with their token limits. Owner only (the CLI).';

create or replace function cortex.list_agent_keys(p_tenant_id uuid, p_prefix text default null)
returns table (
  prefix text, agent text, label text, created_at timestamptz, last_used_at timestamptz, revoked_at timestamptz
)
language sql stable set search_path = '' as $$
  select k.prefix, k.agent, k.label, k.created_at, k.last_used_at, k.revoked_at
  from cortex.agent_keys k
  where k.tenant_id = p_tenant_id and (p_prefix is null or k.prefix = p_prefix)
  order by k.agent, k.created_at
$$;
comment on function cortex.list_agent_keys(uuid, text) is
  'The API keys of a tenant (or the one with p_prefix) by agent and age: prefixes and dates only, never hashes. Owner only (the CLI).';

create or replace function cortex.delete_tenant(p_tenant_id uuid)
returns boolean
language sql volatile set search_path = '' as $$
  with d as (delete from cortex.tenants t where t.id = p_tenant_id returning 1)
  select exists (select from d)
$$;
comment on function cortex.delete_tenant(uuid) is
  'Deletes a tenant and everything it owns (contacts, interactions, keys, jobs, ...); true when it existed. Owner only (the demo reset).';

create or replace function cortex.tenant_config(p_tenant_id uuid)
returns jsonb
language sql stable set search_path = '' as $$
  select t.config from cortex.tenants t where t.id = p_tenant_id
$$;
comment on function cortex.tenant_config(uuid) is
  'The config object of a tenant (null when there is no such tenant). Owner only.';

create or replace function cortex.merge_tenant_config(p_tenant_id uuid, p_config jsonb)
returns jsonb
language sql volatile set search_path = '' as $$
  update cortex.tenants t set config = t.config || p_config where t.id = p_tenant_id returning t.config
$$;
comment on function cortex.merge_tenant_config(uuid, jsonb) is
  'Merges p_config''s top-level keys into a tenant''s config and returns the result (null when there is no such tenant). Owner only.';

create or replace function cortex.request_tenant_context_refresh(p_tenant_id uuid, p_reason text)
returns int
language plpgsql volatile set search_path = '' as $$
declare
  v_contact uuid;
  v_count int := 0;
begin
  for v_contact in
    select c.id from cortex.contacts c where c.tenant_id = p_tenant_id order by c.created_at
  loop
    perform cortex.request_context_refresh(p_tenant_id, v_contact, p_reason);
    v_count := v_count + 1;
  end loop;
  return v_count;
end $$;
comment on function cortex.request_tenant_context_refresh(uuid, text) is
  'Queues a context refresh (generate_context job) for every contact of a tenant, oldest first; returns how many. Owner only (the demo loader).';

create or replace function cortex.tenant_stats(p_tenant_id uuid)
returns jsonb
language sql stable set search_path = '' as $$
  select jsonb_build_object(
    'contacts', (select count(*) from cortex.contacts c where c.tenant_id = p_tenant_id),
    'interactions', (select count(*) from cortex.interactions i where i.tenant_id = p_tenant_id),
    'queued_jobs', (select count(*) from cortex.jobs j
                    where j.tenant_id = p_tenant_id and j.status in ('queued', 'running')))
$$;
comment on function cortex.tenant_stats(uuid) is
  'How much a tenant holds: {contacts, interactions, queued_jobs (queued or running)}. Owner only (the demo loader).';

revoke execute on function
  cortex.list_tenants(int),
  cortex.resolve_tenant(text),
  cortex.list_agents(uuid, text),
  cortex.list_agent_keys(uuid, text),
  cortex.delete_tenant(uuid),
  cortex.tenant_config(uuid),
  cortex.merge_tenant_config(uuid, jsonb),
  cortex.request_tenant_context_refresh(uuid, text),
  cortex.tenant_stats(uuid)
from public, anon, authenticated;
