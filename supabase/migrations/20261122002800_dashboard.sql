-- Dashboard (issue 12): the live pages for the people who run a tenant (/dashboard).
--   * Who may look: an admin or monitor agent of the tenant (public.dashboard_session), signed in
--     with its key. A browser's EventSource cannot send an Authorization header, so sign-in
--     exchanges the key for a session: a random token kept by the browser in an HttpOnly,
--     SameSite=Strict cookie and stored here as its SHA-256 only, with an expiry. Every request
--     looks the token up again (cortex.dashboard_session_claims), so a disabled agent, a demoted
--     one or a closed session is refused at its next request, and any server process can serve it.
--   * What changed: the outbox already gets a row for every handoff, alert and budget event, and
--     NOTIFYs cortex_outbox at commit with an empty payload (any role can LISTEN). One listener per
--     server process reads the rows after its cursor as the owner (cortex.dashboard_events) and
--     hands each tenant's events to that tenant's pages only.
--   * The 30-day usage chart: public.dashboard_usage (usage_summary answers one period, not a series).

create table cortex.dashboard_sessions (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  -- SHA-256 of the cookie's token: the token itself is never stored.
  token_hash bytea not null,
  agent text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  primary key (tenant_id, token_hash),
  foreign key (tenant_id, agent) references cortex.agents (tenant_id, name) on delete cascade,
  check (expires_at > created_at)
);
comment on table cortex.dashboard_sessions is
  'Dashboard sign-ins of admin and monitor agents: the SHA-256 of each session cookie''s token and its expiry. Owner only (no API role reads it).';
-- The cookie names no tenant: sessions are found by hash across tenants (192 random bits).
create index dashboard_sessions_hash on cortex.dashboard_sessions (token_hash);
create index dashboard_sessions_expiry on cortex.dashboard_sessions (expires_at);
alter table cortex.dashboard_sessions enable row level security;
-- No policy and no grant: sessions are opened, read and closed by the server as the owner.

-- The listener reads the outbox after its cursor: without this index, a scan of every tenant's rows.
create index if not exists outbox_id on cortex.outbox (id);

-- Who may use the dashboard ---------------------------------------------------------------------

create or replace function public.dashboard_session() returns jsonb
language plpgsql stable set search_path = '' as $$
declare
  v_tenant uuid := cortex.require_tenant();
  v_agent cortex.agents;
  v_tenant_row cortex.tenants;
begin
  select * into v_agent from cortex.agents a where a.tenant_id = v_tenant and a.name = cortex.current_agent();
  if v_agent.role is null or v_agent.role not in ('admin', 'monitor') then
    raise exception 'agent "%" (role %) may not use the dashboard', left(coalesce(cortex.current_agent(), ''), 100),
                    coalesce(v_agent.role, 'none')
      using errcode = '42501', column = 'key',
            hint = 'sign in with the key of an admin or monitor agent of the tenant';
  end if;
  select * into v_tenant_row from cortex.tenants t where t.id = v_tenant;
  return jsonb_build_object('tenant_id', v_tenant, 'tenant_name', v_tenant_row.name, 'tenant_slug', v_tenant_row.slug,
                            'time_zone', v_tenant_row.time_zone, 'agent', v_agent.name, 'role', v_agent.role,
                            'read_only', v_agent.read_only);
end $$;
comment on function public.dashboard_session() is
  'The dashboard''s caller: {tenant_id, tenant_name, tenant_slug, time_zone, agent, role, read_only}. Only admin and monitor agents may use the dashboard: '
  'any other agent is SQLSTATE 42501 naming key; no tenant or agent claim is 28000.';
revoke execute on function public.dashboard_session() from public, anon;
grant execute on function public.dashboard_session() to authenticated;

create or replace function public.dashboard_usage(days int default 30) returns jsonb
language plpgsql stable set search_path = '' as $$
declare
  v_tenant uuid := cortex.require_tenant();
  v_tz text := cortex.tenant_time_zone(v_tenant);
  v_today date := (now() at time zone v_tz)::date;
  v_days int := dashboard_usage.days;
  v_agents jsonb;
begin
  perform public.dashboard_session();
  if v_days is null or v_days not between 1 and 90 then
    raise exception 'days must be between 1 and 90' using errcode = '22023', column = 'days';
  end if;
  -- One pass over the rollup for all agents and days; days without usage are zeros, so every
  -- series has exactly v_days points, oldest first.
  with used as (
    select d.agent, d.day, sum(d.total_tokens) as total_tokens, sum(d.refused) as refused
    from cortex.usage_daily d
    where d.tenant_id = v_tenant and d.day > v_today - v_days and d.day <= v_today
    group by d.agent, d.day
  ), span as (
    select v_today - (v_days - 1) + i as day from generate_series(0, v_days - 1) i
  )
  select coalesce(jsonb_agg(jsonb_build_object(
           'agent', a.name, 'role', a.role, 'daily_budget', coalesce(c.daily_token_budget, 0),
           'series', (select jsonb_agg(jsonb_build_object('day', s.day, 'total_tokens', coalesce(u.total_tokens, 0),
                                                          'refused', coalesce(u.refused, 0)) order by s.day)
                      from span s left join used u on u.agent = a.name and u.day = s.day))
           order by a.name), '[]')
  into v_agents
  from cortex.agents a
  left join cortex.agent_config c on c.tenant_id = a.tenant_id and c.agent = a.name
  where a.tenant_id = v_tenant and a.enabled;
  return jsonb_build_object('days', v_days, 'time_zone', v_tz, 'from', v_today - (v_days - 1), 'to', v_today,
                            'agents', v_agents);
end $$;
comment on function public.dashboard_usage(int) is
  'The dashboard''s usage chart: tokens per agent per day for the last `days` days (1-90, default 30) to today in the tenant''s time zone, '
  'from the daily rollup: {days, time_zone, from, to, agents: [{agent, daily_budget, series: [{day, total_tokens, refused}]}]}. '
  'Admins and monitors only (42501 naming key); 22023 naming days.';
revoke execute on function public.dashboard_usage(int) from public, anon;
grant execute on function public.dashboard_usage(int) to authenticated;

-- Sessions (owner only) -------------------------------------------------------------------------

create or replace function cortex.open_dashboard_session(p_tenant_id uuid, p_agent text, p_ttl_seconds int)
returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_token text := 'dsh_' || encode(extensions.gen_random_bytes(24), 'hex');
  v_expires timestamptz;
begin
  if p_ttl_seconds is null or p_ttl_seconds not between 60 and 7 * 86400 then
    raise exception 'ttl_seconds must be between 60 and 604800' using errcode = '22023', column = 'ttl_seconds';
  end if;
  if not exists (select from cortex.agents a where a.tenant_id = p_tenant_id and a.name = p_agent and a.enabled
                 and a.role in ('admin', 'monitor')) then
    raise exception 'agent "%" may not use the dashboard', left(coalesce(p_agent, ''), 100)
      using errcode = '42501', column = 'key', hint = 'sign in with the key of an admin or monitor agent of the tenant';
  end if;
  -- Expired sessions go as new ones come: the table stays the size of the live sessions.
  delete from cortex.dashboard_sessions s where s.expires_at < now();
  insert into cortex.dashboard_sessions (tenant_id, token_hash, agent, expires_at)
  values (p_tenant_id, pg_catalog.sha256(pg_catalog.convert_to(v_token, 'UTF8')), p_agent, now() + make_interval(secs => p_ttl_seconds))
  returning expires_at into v_expires;
  return jsonb_build_object('token', v_token, 'expires_at', v_expires);
end $$;
comment on function cortex.open_dashboard_session(uuid, text, int) is
  'Owner only: opens a dashboard session for an enabled admin or monitor agent (else 42501 naming key) for p_ttl_seconds (60 s to 7 days); '
  'returns {token, expires_at}. Only the token''s SHA-256 is stored. Also deletes expired sessions.';
revoke execute on function cortex.open_dashboard_session(uuid, text, int) from public, anon, authenticated;

create or replace function cortex.dashboard_session_claims(p_token text) returns jsonb
language sql stable set search_path = '' as $$
  select jsonb_build_object('tenant_id', s.tenant_id, 'agent', s.agent, 'expires_at', s.expires_at)
  from cortex.dashboard_sessions s
  join cortex.agents a on a.tenant_id = s.tenant_id and a.name = s.agent
  where s.token_hash = pg_catalog.sha256(pg_catalog.convert_to(p_token, 'UTF8')) and s.expires_at > now()
    and a.enabled and a.role in ('admin', 'monitor')
$$;
comment on function cortex.dashboard_session_claims(text) is
  'Owner only: {tenant_id, agent, expires_at} of a live session token whose agent is still an enabled admin or monitor, else null.';
revoke execute on function cortex.dashboard_session_claims(text) from public, anon, authenticated;

create or replace function cortex.close_dashboard_session(p_token text) returns boolean
language sql volatile set search_path = '' as $$
  with gone as (delete from cortex.dashboard_sessions s where s.token_hash = pg_catalog.sha256(pg_catalog.convert_to(p_token, 'UTF8'))
                returning 1)
  select exists (select from gone)
$$;
comment on function cortex.close_dashboard_session(text) is 'Owner only: ends a dashboard session (sign-out); true when there was one.';
revoke execute on function cortex.close_dashboard_session(text) from public, anon, authenticated;

create or replace function cortex.close_dashboard_sessions(p_tenant_id uuid, p_agent text default null) returns int
language sql volatile set search_path = '' as $$
  with gone as (delete from cortex.dashboard_sessions s
                where s.tenant_id = p_tenant_id and (p_agent is null or s.agent = p_agent) returning 1)
  select count(*)::int from gone
$$;
comment on function cortex.close_dashboard_sessions(uuid, text) is
  'Owner only (cortex dashboard sign-out): ends every dashboard session of the tenant, or of one agent; the number ended.';
revoke execute on function cortex.close_dashboard_sessions(uuid, text) from public, anon, authenticated;

-- What changed (owner only: it reads every tenant's outbox) ---------------------------------------

create or replace function cortex.dashboard_cursor() returns bigint
language sql stable set search_path = '' as $$
  select coalesce(max(o.id), 0) from cortex.outbox o
$$;
comment on function cortex.dashboard_cursor() is 'Owner only: the newest outbox id, where a dashboard listener starts reading.';
revoke execute on function cortex.dashboard_cursor() from public, anon, authenticated;

create or replace function cortex.dashboard_events(p_after bigint, p_limit int default 500)
returns table (id bigint, tenant_id uuid, event text, subject text, created_at timestamptz)
language sql stable set search_path = '' as $$
  -- One row per outbox message (an event has one per recipient): the listener folds them.
  select o.id, o.tenant_id, o.event, o.payload ->> 'id', o.created_at
  from cortex.outbox o
  where o.id > p_after
  order by o.id
  limit greatest(least(coalesce(p_limit, 500), 5000), 1)
$$;
comment on function cortex.dashboard_events(bigint, int) is
  'Owner only: outbox messages after id p_after, oldest first (at most p_limit, 1-5000): {id, tenant_id, event, subject (the payload''s id), created_at}. '
  'The dashboard''s listener hands each to its tenant''s pages.';
revoke execute on function cortex.dashboard_events(bigint, int) from public, anon, authenticated;
