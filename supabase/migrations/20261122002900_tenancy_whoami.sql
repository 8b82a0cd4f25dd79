-- Who am I (issue 12): the caller's tenant and agent, as the API sees them.
-- A client holding only a key (the MCP server, an SDK user, a dashboard) learns which agent the
-- key acts as, its role and whether it may write, without being told separately; the answer is
-- what RLS and every guard will apply to its next call.

create or replace function public.whoami() returns jsonb
language plpgsql stable set search_path = '' as $$
declare
  v_tenant uuid := cortex.require_tenant();  -- 28000 without claims or for an unknown agent
  v_me jsonb;
begin
  -- Invoker: the caller reads its own tenant and agent rows through their RLS policies.
  select jsonb_build_object(
           'tenant_id', t.id, 'tenant', t.slug, 'tenant_name', t.name, 'time_zone', t.time_zone,
           'agent', a.name, 'display_name', a.display_name, 'role', a.role, 'read_only', a.read_only,
           'can_write', not a.read_only, 'is_admin', a.role = 'admin')
    into v_me
  from cortex.tenants t
  join cortex.agents a on a.tenant_id = t.id
  where t.id = v_tenant and a.name = cortex.current_agent();
  return v_me;
end $$;
comment on function public.whoami() is
  'The caller as the API sees it: {tenant_id, tenant (slug), tenant_name, time_zone, agent, display_name, role, read_only, can_write, is_admin}. '
  'SQLSTATE 28000 without claims or for an unknown or disabled agent. Read with the caller''s own rights (RLS on tenants and agents).';
revoke execute on function public.whoami() from public, anon;
grant execute on function public.whoami() to authenticated;
