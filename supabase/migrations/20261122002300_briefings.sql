-- Briefings (issue 8, seed 001): a per-agent context document synthesised from the memory graph,
-- in seven sections (Identity, Active Context, Key Relationships, Patterns & Lessons, Goals,
-- Unresolved, Recent Events), rendered in SQL as markdown or compact text within a character
-- budget (at most 8,000 characters = 2,000 tokens at ceil(chars / 4)), cached in a table keyed on
-- the graph version, and pre-computed by the worker for the agents configured for it.
-- docs/briefings.md describes every section's algorithm; the summary:
--
--   Identity            the agent's entity node, then the preferences and facts that applies_to it.
--   Active Context      pending handoffs to the agent and the contacts it owns that need attention
--                       (seed 000's tables), then public.search_memories anchored on the agent's own
--                       decisions, events and facts of the recent window (text: their title words;
--                       vector: the centroid of their embeddings; graph: anchor depth 3; weight_vector
--                       = weight_text, the seed's "vector weight 0.5").
--   Key Relationships   entity nodes within two steps of the agent node and its anchors, by decayed
--                       path weight x recency.
--   Patterns & Lessons  weighted walk, depth 2, incoming applies_to / instance_of from the agent node,
--                       patterns ranked importance x path weight x recency, with up to two 1-hop
--                       observations as evidence.
--   Goals               active goals within two steps of the agent node and its anchors, and the
--                       agent's own goals, by importance.
--   Unresolved          contradicts edges touching the agent's neighbourhood (depth 3; both sides),
--                       nodes flagged needs_review and low-confidence facts (< 0.5) there or the agent's.
--   Recent Events       events of the recent window the agent logged or that are in its neighbourhood.
-- Items are de-duplicated across sections (first section wins; a contradiction is keyed by its
-- pair, so its sides may also appear earlier), nodes below min_importance (entities exempt) or
-- reached only over edges below min_weight are left out, then the per-section and total limits.
--
-- Visibility: everything runs as the caller (invoker functions, RLS). An agent's own briefing sees
-- the shared memories and its private ones ("agent" scope). An admin or monitor may read another
-- agent's briefing: it is built from shared memories only ("shared" scope), so no agent's private
-- memory ever reaches another agent, and the two scopes are cached apart.

-- Vocabularies ---------------------------------------------------------------------------------

create or replace function cortex.briefing_formats() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['markdown', 'compact'];
end $$;
comment on function cortex.briefing_formats() is
  'Briefing renderings: markdown (seed 001''s layout, bullets with bodies) and compact (titles only, grouped by section, 4x the items).';

create or replace function cortex.briefing_sections() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['Identity', 'Active Context', 'Key Relationships', 'Patterns & Lessons', 'Goals', 'Unresolved',
               'Recent Events'];
end $$;
comment on function cortex.briefing_sections() is 'The sections of a briefing, in seed 001''s order.';

create or replace function cortex.briefing_scopes() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['agent', 'shared'];
end $$;
comment on function cortex.briefing_scopes() is
  'Whose view a briefing was built from: agent (the agent''s own: shared memories and its private ones), shared (shared memories only: what an admin or monitor reads of another agent).';

grant execute on function cortex.briefing_formats(), cortex.briefing_sections(), cortex.briefing_scopes()
  to authenticated, service_role;

-- Settings: a tenant default row (agent '') and optional per-agent overrides ---------------------

create table cortex.briefing_settings (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  -- '' is the tenant's default row (every column set); an agent's row overrides the columns it sets
  -- (null = the tenant's value).
  agent text not null check (agent = '' or agent ~ '^[a-z][a-z0-9_-]{0,62}$'),
  max_items_per_section int check (max_items_per_section between 1 and 50),
  max_total_items int check (max_total_items between 1 and 200),
  -- At most 8,000 characters: a briefing is always at most 2,000 tokens (ceil(chars / 4)).
  max_chars int check (max_chars between 500 and 8000),
  recent_window_hours int check (recent_window_hours between 1 and 720),
  cache_ttl_seconds int check (cache_ttl_seconds between 0 and 86400),
  include_contradictions boolean,
  min_importance real check (min_importance between 0 and 1),
  min_weight real check (min_weight between 0 and 1),
  -- Pre-computation: the scheduled job keeps this agent's briefings rendered.
  precompute boolean,
  updated_at timestamptz not null default now(),
  primary key (tenant_id, agent),
  constraint briefing_settings_tenant_row_complete check (agent <> '' or num_nulls(
    max_items_per_section, max_total_items, max_chars, recent_window_hours, cache_ttl_seconds,
    include_contradictions, min_importance, min_weight, precompute) = 0)
);
comment on table cortex.briefing_settings is
  'Briefing parameters (seed 001''s BriefingConfig plus the precompute flag): the tenant''s row (agent = '''', every column set, made with the tenant) and per-agent rows whose non-null columns override it. Set by operators (cortex.set_briefing_settings).';
create trigger briefing_settings_updated_at before update on cortex.briefing_settings
  for each row execute function cortex.touch_updated_at();

alter table cortex.briefing_settings enable row level security;
create policy "Briefing settings are visible to agents of their tenant" on cortex.briefing_settings
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
grant select on cortex.briefing_settings to authenticated;

create or replace function cortex.tenants_briefing_settings() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  insert into cortex.briefing_settings (tenant_id, agent, max_items_per_section, max_total_items, max_chars,
    recent_window_hours, cache_ttl_seconds, include_contradictions, min_importance, min_weight, precompute)
  select n.id, '', 10, 50, 8000, 48, 300, true, 0.3, 0.2, false from new_rows n
  on conflict do nothing;
  return null;
end $$;
comment on function cortex.tenants_briefing_settings() is
  'Trigger: every new tenant gets its default briefing settings (seed 001: 10 items per section, 50 in all, 8,000 characters, 48 h window, 5 min cache, contradictions included, min importance 0.3, min weight 0.2; no pre-computation).';
revoke execute on function cortex.tenants_briefing_settings() from public, anon, authenticated, service_role;
create trigger tenants_briefing_settings after insert on cortex.tenants
  referencing new table as new_rows for each statement execute function cortex.tenants_briefing_settings();
insert into cortex.briefing_settings (tenant_id, agent, max_items_per_section, max_total_items, max_chars,
  recent_window_hours, cache_ttl_seconds, include_contradictions, min_importance, min_weight, precompute)
select id, '', 10, 50, 8000, 48, 300, true, 0.3, 0.2, false from cortex.tenants
on conflict do nothing;

create or replace function cortex.briefing_config(p_tenant_id uuid, p_agent text) returns cortex.briefing_settings
language sql stable set search_path = '' as $$
  select t.tenant_id, coalesce(p_agent, ''),
         coalesce(a.max_items_per_section, t.max_items_per_section), coalesce(a.max_total_items, t.max_total_items),
         coalesce(a.max_chars, t.max_chars), coalesce(a.recent_window_hours, t.recent_window_hours),
         coalesce(a.cache_ttl_seconds, t.cache_ttl_seconds), coalesce(a.include_contradictions, t.include_contradictions),
         coalesce(a.min_importance, t.min_importance), coalesce(a.min_weight, t.min_weight),
         coalesce(a.precompute, t.precompute), greatest(t.updated_at, a.updated_at)
  from cortex.briefing_settings t
  left join cortex.briefing_settings a on a.tenant_id = t.tenant_id and a.agent = p_agent and p_agent <> ''
  where t.tenant_id = p_tenant_id and t.agent = ''
$$;
comment on function cortex.briefing_config(uuid, text) is
  'The effective briefing settings of an agent: its own row''s non-null columns over the tenant''s row (RLS: an API caller sees only its tenant''s).';
grant execute on function cortex.briefing_config(uuid, text) to authenticated, service_role;

create or replace function cortex.set_briefing_settings(p_tenant_id uuid, p_agent text, p_settings jsonb)
returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_agent text := coalesce(p_agent, '');
  v_allowed text[] := array['max_items_per_section', 'max_total_items', 'max_chars', 'recent_window_hours',
                            'cache_ttl_seconds', 'include_contradictions', 'min_importance', 'min_weight', 'precompute'];
  v_key text;
  v_constraint text;
  v_row cortex.briefing_settings;
begin
  if p_settings is null or jsonb_typeof(p_settings) <> 'object' then
    raise exception 'settings must be a JSON object' using errcode = '22023', column = 'settings';
  end if;
  for v_key in select jsonb_object_keys(p_settings) loop
    if not (v_key = any (v_allowed)) then
      raise exception 'unknown setting "%"; settings are: %', left(v_key, 100), array_to_string(v_allowed, ', ')
        using errcode = '22023', column = v_key;
    end if;
    -- null clears an agent's override (back to the tenant's value); the tenant's row needs values.
    if jsonb_typeof(p_settings -> v_key) = 'null' and v_agent = '' then
      raise exception '% cannot be null for the tenant', v_key using errcode = '22023', column = v_key;
    end if;
    begin
      perform jsonb_populate_record(null::cortex.briefing_settings, jsonb_build_object(v_key, p_settings -> v_key));
    exception when data_exception then
      raise exception '% is not a valid value: %', v_key, sqlerrm using errcode = '22023', column = v_key;
    end;
  end loop;
  if not exists (select from cortex.briefing_settings s where s.tenant_id = p_tenant_id and s.agent = '') then
    raise exception 'tenant % not found', p_tenant_id using errcode = 'P0002', column = 'tenant_id';
  end if;
  if v_agent <> '' and not exists (select from cortex.agents a where a.tenant_id = p_tenant_id and a.name = v_agent) then
    raise exception 'agent "%" not found', left(v_agent, 100) using errcode = 'P0002', column = 'agent';
  end if;

  if v_agent <> '' then
    insert into cortex.briefing_settings (tenant_id, agent) values (p_tenant_id, v_agent) on conflict do nothing;
  end if;
  begin
    execute format(
      'update cortex.briefing_settings s set (%s) = (select %s from pg_catalog.jsonb_populate_record(s, $1) r) '
      'where s.tenant_id = $2 and s.agent = $3 returning s.*',
      (select string_agg(format('%I', c), ', ') from unnest(v_allowed) c),
      (select string_agg(format('r.%I', c), ', ') from unnest(v_allowed) c))
    into v_row using p_settings, p_tenant_id, v_agent;
  exception when check_violation then
    get stacked diagnostics v_constraint = constraint_name;
    v_key := regexp_replace(v_constraint, '^briefing_settings_(.*)_check$', '\1');
    raise exception '% is out of range', v_key using errcode = '22023', column = v_key,
      detail = format('constraint %s', v_constraint);
  end;
  return jsonb_build_object('agent', nullif(v_agent, ''), 'override', to_jsonb(v_row) - 'tenant_id' - 'agent',
                            'effective', to_jsonb(cortex.briefing_config(p_tenant_id, v_agent)) - 'tenant_id' - 'agent');
end $$;
comment on function cortex.set_briefing_settings(uuid, text, jsonb) is
  'Operators: sets briefing settings of a tenant (p_agent null: its default row) or overrides them for one agent ({"max_chars": 6000, "precompute": true}); '
  'for an agent, null clears an override. Unknown keys, wrong types and out-of-range values are SQLSTATE 22023 naming the key; an unknown tenant or agent is P0002. '
  'Returns {agent, override (the row), effective (what the agent gets)}.';
revoke execute on function cortex.set_briefing_settings(uuid, text, jsonb) from public, anon, authenticated, service_role;

-- Who may read whose briefing ---------------------------------------------------------------------

create or replace function cortex.caller_reads_all_briefings() returns boolean
language sql stable set search_path = '' as $$
  select coalesce((select a.role in ('admin', 'monitor') and a.enabled from cortex.agents a
                   where a.tenant_id = (select cortex.current_tenant()) and a.name = (select cortex.current_agent())), false)
$$;
comment on function cortex.caller_reads_all_briefings() is
  'True when the calling agent is an enabled admin or monitor of its tenant: it may read any agent''s briefing (built from shared memories only).';
grant execute on function cortex.caller_reads_all_briefings() to authenticated, service_role;

-- The cache ------------------------------------------------------------------------------------

create table cortex.briefings (
  tenant_id uuid not null,
  agent text not null,
  format text not null check (format = any (cortex.briefing_formats())),
  max_chars int not null check (max_chars between 500 and 8000),
  -- agent: as the agent sees the graph (its private memories included); shared: shared memories
  -- only (what an admin or monitor reads of another agent).
  scope text not null check (scope = any (cortex.briefing_scopes())),
  graph_version bigint not null,
  generated_at timestamptz not null,
  text text not null check (char_length(text) <= max_chars),
  -- json, not jsonb: a cached read copies it into its answer as it is stored, with no re-encoding
  -- (the output conversion of a 20 KB jsonb was a third of a cached read's time).
  sections json not null check (json_typeof(sections) = 'array'),
  -- Every node shown (items, their evidence and the other sides of contradictions): access tracking.
  node_ids uuid[] not null,
  nodes_consulted int not null check (nodes_consulted >= 0),
  primary key (tenant_id, agent, format, max_chars, scope),
  foreign key (tenant_id, agent) references cortex.agents (tenant_id, name) on delete cascade
);
comment on table cortex.briefings is
  'Rendered briefings, one per tenant, agent, format, character budget and scope: served while younger than the cache TTL and while the tenant''s graph version is the one it was built at; else rebuilt and replaced.';

alter table cortex.briefings enable row level security;
create policy "Agents read their own briefings, admins and monitors any agent's shared briefing" on cortex.briefings
  for select to authenticated
  using (tenant_id = (select cortex.current_tenant())
         and ((scope = 'agent' and agent = (select cortex.current_agent()))
              or (scope = 'shared' and (select cortex.caller_reads_all_briefings()))));
create policy "Agents cache their own briefings, admins and monitors any agent's shared briefing" on cortex.briefings
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant())
              and ((scope = 'agent' and agent = (select cortex.current_agent()))
                   or (scope = 'shared' and (select cortex.caller_reads_all_briefings()))));
create policy "Agents refresh the briefings they may cache" on cortex.briefings
  for update to authenticated
  using (tenant_id = (select cortex.current_tenant())
         and ((scope = 'agent' and agent = (select cortex.current_agent()))
              or (scope = 'shared' and (select cortex.caller_reads_all_briefings()))))
  with check (tenant_id = (select cortex.current_tenant())
              and ((scope = 'agent' and agent = (select cortex.current_agent()))
                   or (scope = 'shared' and (select cortex.caller_reads_all_briefings()))));
grant select, insert, update on cortex.briefings to authenticated;

-- Text helpers -----------------------------------------------------------------------------------

create or replace function cortex.briefing_cut(p_text text, p_max int) returns text
language plpgsql immutable parallel safe set search_path = '' as $$
declare
  v text := btrim(regexp_replace(coalesce(p_text, ''), '\s+', ' ', 'g'));
  v_cut text;
begin
  if char_length(v) <= p_max then
    return v;
  end if;
  -- Room for the ellipsis; back to the last whole word (a single giant word is cut inside it).
  v_cut := left(v, p_max - 1);
  if substr(v, p_max, 1) <> ' ' then
    v_cut := coalesce(nullif(regexp_replace(v_cut, '\s+\S*$', ''), v_cut), v_cut);
  end if;
  v_cut := rtrim(v_cut, ' ,;:-');
  return case when v_cut = '' then left(v, p_max - 1) else v_cut end || '…';
end $$;
comment on function cortex.briefing_cut(text, int) is
  'Text on one line (whitespace runs made one space), cut to at most p_max characters on a word boundary, ending with an ellipsis when cut.';

create or replace function cortex.briefing_bullet(p_item jsonb) returns text
language sql immutable parallel safe set search_path = '' as $$
  select '- **' || replace(cortex.briefing_cut(p_item ->> 'title', 500), '*', '\*') || '** (' || (p_item ->> 'kind') || ')'
         || case when coalesce(btrim(p_item ->> 'body'), '') <> ''
                 then ': ' || cortex.briefing_cut(p_item ->> 'body', 200) else '' end
         || E'\n'
         || coalesce((select string_agg('  - evidence: ' || cortex.briefing_cut(e ->> 'title', 150) || ' ('
                                        || (e ->> 'kind') || E')\n', '' order by o)
                      from jsonb_array_elements(case when jsonb_typeof(p_item -> 'evidence') = 'array' then p_item -> 'evidence'
                                                  else '[]' end) with ordinality x (e, o)), '')
$$;
comment on function cortex.briefing_bullet(jsonb) is
  'A markdown bullet: "- **title** (kind): body" with the body cut at 200 characters on a word boundary, then one sub-bullet per piece of evidence.';

grant execute on function cortex.briefing_cut(text, int), cortex.briefing_bullet(jsonb) to authenticated, service_role;

-- Rendering ------------------------------------------------------------------------------------

create or replace function cortex.briefing_render(
  p_agent text, p_format text, p_generated_at timestamptz, p_nodes_consulted int, p_sections jsonb, p_max_chars int
) returns jsonb
language plpgsql stable set search_path = '' as $$
declare
  v_compact boolean := p_format = 'compact';
  v_header text := format(E'# Cortex Briefing — %s\n_Generated: %s UTC | %s nodes consulted_\n\n', p_agent,
                          to_char(p_generated_at at time zone 'UTC', 'YYYY-MM-DD HH24:MI'), p_nodes_consulted);
  v_note text := E'_[Briefing truncated — increase max_chars for full context]_\n';
  v_result jsonb;
begin
  -- Each item is a unit: its bullet (markdown) or its title (compact), plus its section's heading
  -- when it is the section's first. Whole units are kept in reading order while they fit, so what
  -- goes is whole bullets from the end of the lowest sections, and nothing is cut mid-word.
  with sec as (
    select x.si, x.s ->> 'title' as title, coalesce(x.s -> 'items', '[]') as items,
           case when v_compact then '**' || (x.s ->> 'title') || '**: ' else '## ' || (x.s ->> 'title') || E'\n' end as head
    from jsonb_array_elements(p_sections) with ordinality x (s, si)
  ), unit as (
    select sec.si, it.ii, it.item,
           case when v_compact then case when it.ii = 1 then '' else '; ' end || cortex.briefing_cut(it.item ->> 'title', 80)
                else cortex.briefing_bullet(it.item) end as line
    from sec cross join lateral jsonb_array_elements(sec.items) with ordinality it (item, ii)
  ), costed as (
    select u.*, sum(char_length(u.line) + case when u.ii = 1 then char_length(s.head) + 1 else 0 end)
                  over (order by u.si, u.ii) as run
    from unit u join sec s on s.si = u.si
  ), full_length as (
    -- Markdown prints every section's heading (seed 001's layout); compact only sections with items.
    select char_length(v_header)
           + coalesce((select sum(char_length(s.head) + 1) from sec s
                       where not v_compact or jsonb_array_length(s.items) > 0), 0)
           + coalesce((select sum(char_length(u.line)) from unit u), 0) as n
  ), mode as (
    select f.n > p_max_chars as truncated,
           case when f.n > p_max_chars then p_max_chars - char_length(v_header) - char_length(v_note)
                else 2147483647 end as budget
    from full_length f
  ), kept as (
    select s.si, s.title, s.head, s.items,
           (select string_agg(c.line, '' order by c.ii) from costed c, mode m where c.si = s.si and c.run <= m.budget) as lines,
           (select coalesce(jsonb_agg(c.item order by c.ii), '[]') from costed c, mode m
            where c.si = s.si and c.run <= m.budget) as kept_items
    from sec s
  )
  select jsonb_build_object(
    'text', v_header
            || coalesce((select string_agg(k.head || coalesce(k.lines, '') || E'\n', '' order by k.si) from kept k, mode m
                         where case when m.truncated then k.lines is not null
                                    else not v_compact or jsonb_array_length(k.items) > 0 end), '')
            || case when m.truncated then v_note else '' end,
    'truncated', m.truncated,
    'sections', (select jsonb_agg(jsonb_build_object('title', k.title, 'items', k.kept_items) order by k.si) from kept k),
    'node_ids', (select coalesce(jsonb_agg(distinct x.id), '[]') from (
                   select it ->> 'id' as id from kept k, jsonb_array_elements(k.kept_items) it
                   union all
                   select ev ->> 'id' from kept k, jsonb_array_elements(k.kept_items) it,
                          jsonb_array_elements(case when jsonb_typeof(it -> 'evidence') = 'array' then it -> 'evidence'
                                               else '[]' end) ev
                   union all
                   select it -> 'contradicts' ->> 'id' from kept k, jsonb_array_elements(k.kept_items) it
                   where it ? 'contradicts') x))
  into v_result
  from mode m;
  return v_result;
end $$;
comment on function cortex.briefing_render(text, text, timestamptz, int, jsonb, int) is
  'Renders built sections as markdown ("# Cortex Briefing — agent", "_Generated: … UTC | N nodes consulted_", "## Section", "- **title** (kind): body" bullets, bodies cut at 200 characters on a word boundary) '
  'or compact ("**Section**: title; title", titles cut at 80). Over p_max_chars, whole items are dropped from the end of the lowest sections and seed 001''s truncation note is added within the limit. '
  'Returns {text, truncated, sections (the items kept), node_ids (items, evidence, contradictions'' other sides)}.';
grant execute on function cortex.briefing_render(text, text, timestamptz, int, jsonb, int) to authenticated, service_role;

-- Building: the seven generators -------------------------------------------------------------------

-- An agent's own goals, flagged nodes and unsure facts: a few per agent, so three small partial
-- indexes let a briefing find them without testing every goal or fact of a big tenant.
create index memory_nodes_agent_goals on cortex.memory_nodes (tenant_id, source_agent, importance desc)
  where kind = 'goal' and status = 'active';
create index memory_nodes_agent_review on cortex.memory_nodes (tenant_id, source_agent)
  where needs_review and status = 'active';
create index memory_nodes_agent_unsure on cortex.memory_nodes (tenant_id, source_agent)
  where kind = 'fact' and confidence < 0.5 and status = 'active';
-- What applies to a node, strongest first: Identity reads an agent's edges in weight order and stops
-- once no unread edge can outrank its top items (an agent with 5,000 of them read them all).
create index memory_edges_applies_to on cortex.memory_edges (tenant_id, target_id, weight desc, source_id)
  where relation = 'applies_to';

create or replace function cortex.briefing_build(
  p_tenant_id uuid, p_agent text, p_shared_only boolean, p_cfg cortex.briefing_settings, p_factor int,
  p_at timestamptz default now()
) returns jsonb
-- jit off: the sections' statement is planned above jit_above_cost in a big tenant, and compiling
-- it took 320 ms of a 1 s build at 1M nodes (docs/benchmarks.md); it runs once per build.
language plpgsql volatile set search_path = '' set jit = off as $$
declare
  v_per int := p_cfg.max_items_per_section * p_factor;
  v_total int := p_cfg.max_total_items * p_factor;
  v_since timestamptz := p_at - make_interval(hours => p_cfg.recent_window_hours);
  v_mem cortex.memory_settings;
  v_entities text[] := cortex.entity_kinds();
  v_agent_node uuid;
  v_anchors uuid[];
  v_query text;
  v_vector extensions.vector;
  v_search jsonb := '[]';
  v_w_ids uuid[] := '{}';
  v_w_score real[] := '{}';
  v_w_depth int[] := '{}';
  v_p_ids uuid[] := '{}';
  v_p_score real[] := '{}';
  v_hood uuid[];
  v_i_ids uuid[] := '{}';
  v_i_score float8[] := '{}';
  v_i_read uuid[] := '{}';
  v_i_batch int := greatest(v_per * 8, 80);
  v_i_edges bigint;
  v_i_floor real;
  v_result jsonb;
begin
  select s.* into v_mem from cortex.memory_settings s where s.tenant_id = p_tenant_id;
  select n.id into v_agent_node from cortex.memory_nodes n
  where n.tenant_id = p_tenant_id and n.ref_kind = 'agent' and n.ref_id = p_agent;

  -- Anchors: the agent's own decisions, events and facts of the recent window (newest 25: each
  -- anchor widens both walks, and the newest say what the agent is doing now).
  select coalesce(array_agg(a.id order by a.created_at desc, a.id), '{}') into v_anchors
  from (select n.id, n.created_at from cortex.memory_nodes n
        where n.tenant_id = p_tenant_id and n.source_agent = p_agent and n.created_at >= v_since
          and n.kind in ('decision', 'event', 'fact') and n.status = 'active'
          and (not p_shared_only or n.visibility = 'shared')
        order by n.created_at desc, n.id limit 25) a;

  if cardinality(v_anchors) > 0 then
    -- The query: the anchors' title words as alternatives (websearch "or"; a plain join of the
    -- titles would demand every word at once), newest first, at most 24 of them: every word is
    -- compared with every candidate's positions by ts_rank_cd, and 100 anchors' titles made a
    -- query of a hundred words and a 400 ms ranking.
    select string_agg(w.word, ' or ' order by w.ord) into v_query
    from (select d.word, d.ord, sum(char_length(d.word) + 4) over (order by d.ord) as run,
                 row_number() over (order by d.ord) as pos
          from (select distinct on (t.word) t.word, a.ai * 1000 + t.wi as ord
                from unnest(v_anchors) with ordinality a (id, ai)
                join cortex.memory_nodes n on n.tenant_id = p_tenant_id and n.id = a.id
                cross join lateral regexp_split_to_table(lower(n.title), '[^[:alnum:]]+') with ordinality t (word, wi)
                where char_length(t.word) >= 3 and t.word not in ('and', 'not', 'the', 'for', 'with')
                order by t.word, a.ai * 1000 + t.wi) d) w
    where w.run <= 1000 and w.pos <= 24;
    -- The vector: the centroid of the anchors' embeddings (none when the provider is off).
    select extensions.avg(n.embedding) into v_vector from cortex.memory_nodes n
    where n.tenant_id = p_tenant_id and n.id = any (v_anchors) and n.embedding is not null;
    -- The briefing records access for what it serves, once: the search itself records none.
    v_search := coalesce(public.search_memories(
      query => v_query, query_vector => v_vector, kinds => array['decision', 'fact', 'event'],
      anchors => v_anchors, anchor_depth => 3, "limit" => least(100, v_per),
      weight_text => v_mem.weight_text, weight_vector => v_mem.weight_text,
      record_access => false) -> 'results', '[]');
  end if;

  -- The neighbourhood: three steps from the agent node and its anchors (level by level).
  if v_agent_node is not null or cardinality(v_anchors) > 0 then
    select coalesce(array_agg(w.node_id), '{}'), coalesce(array_agg(w.score), '{}'), coalesce(array_agg(w.depth), '{}')
    into v_w_ids, v_w_score, v_w_depth
    from cortex.graph_walk(p_tenant_id, array_remove(array[v_agent_node], null) || v_anchors, 3, 'both', null, null,
                           p_cfg.min_weight, 'breadth_first', 500, p_at) w;
  end if;
  v_hood := v_w_ids || v_anchors || array_remove(array[v_agent_node], null);

  -- Patterns: weighted walk, depth 2, incoming applies_to / instance_of (seed 001).
  if v_agent_node is not null then
    select coalesce(array_agg(w.node_id), '{}'), coalesce(array_agg(w.score), '{}') into v_p_ids, v_p_score
    from cortex.graph_walk(p_tenant_id, array[v_agent_node], 2, 'in', array['applies_to', 'instance_of'], null,
                           p_cfg.min_weight, 'weighted', least(500, v_per * 4), p_at) w;
  end if;

  -- 1. Identity: the preferences and facts that applies_to the agent node, by importance x weight.
  -- The agent node is permanent, so an edge's weight is its stored one, and a score is at most its
  -- edge's weight: edges are read strongest first, in batches, until the v_per-th best score beats
  -- every unread edge's weight (or none is left). Nothing ranks before this section, so these items
  -- are final; all it read is "consulted".
  if v_agent_node is not null then
    loop
      select coalesce(array_agg(x.id order by x.pos) filter (where x.ok and x.pos <= v_per), '{}'),
             coalesce(array_agg(x.score order by x.pos) filter (where x.ok and x.pos <= v_per), '{}'),
             coalesce(array_agg(x.id) filter (where x.id is not null), '{}'), count(*), min(x.weight)
      into v_i_ids, v_i_score, v_i_read, v_i_edges, v_i_floor
      from (
        select n.id, s.score, s.ok, e.weight,
               row_number() over (partition by s.ok order by s.score desc, n.id) as pos
        from (select e.source_id, e.weight from cortex.memory_edges e
              where e.tenant_id = p_tenant_id and e.target_id = v_agent_node and e.relation = 'applies_to'
                and e.weight >= p_cfg.min_weight
              order by e.weight desc, e.source_id
              limit v_i_batch) e
        left join cortex.memory_nodes n on n.tenant_id = p_tenant_id and n.id = e.source_id
          and n.kind in ('preference', 'fact')
        cross join lateral (
          select (n.importance * e.weight)::float8 as score,
                 n.status = 'active' and (not p_shared_only or n.visibility = 'shared')
                 and n.importance >= p_cfg.min_importance as ok) s
      ) x;
      exit when v_i_edges < v_i_batch or (cardinality(v_i_score) >= v_per and v_i_score[v_per] > v_i_floor);
      v_i_batch := v_i_batch * 4;
    end loop;
  end if;

  with walk as (
    select w.id, w.score, w.depth from unnest(v_w_ids, v_w_score, v_w_depth) w (id, score, depth)
  ), cand as (
    -- 1. Identity: the agent node, then its preferences and facts (above).
    select 1 as section, 1e9::float8 as score, v_agent_node as id, null::text as body, null::jsonb as extra,
           v_agent_node::text as dkey
    where v_agent_node is not null
    union all
    select 1, i.score, i.id, null, null, i.id::text from unnest(v_i_ids, v_i_score) i (id, score)
    union all
    -- 2. Active Context: pending handoffs to the agent, owned contacts needing attention, the search.
    -- A row's node is found by its key (ref_id, text), computed in a subquery kept apart by
    -- `offset 0`: a cast in the join condition is not leakproof, so under RLS it could not be an
    -- index condition and every handoff or contact node of the tenant was read (30,000 contacts).
    select 2, 3e6 + h.urgency_rank * 1e4 - extract(epoch from p_at - h.created_at) / 1e6, hn.id,
           format('Pending handoff from %s (%s, %s urgency): %s', h.from_agent, replace(h.reason, '_', ' '), h.urgency,
                  h.context_summary),
           null, hn.id::text
    from (select h.*, h.id::text as ref from cortex.handoff_events h
          where h.tenant_id = p_tenant_id and h.to_agent = p_agent and h.status = 'pending' offset 0) h
    join cortex.memory_nodes hn on hn.tenant_id = p_tenant_id and hn.ref_kind = 'handoff' and hn.ref_id = h.ref
    union all
    select 2, a.score, cn.id, 'Needs attention: ' || array_to_string(a.reasons, '; '), null, cn.id::text
    from (
     -- Only the section's places can show, so only the best contacts are looked up (twice as many,
     -- for one whose node is missing or inactive): not every owned contact that needs attention.
     select a.*, 2e6 + cardinality(a.reasons) * 1e4 + extract(epoch from coalesce(a.last_touch_at, a.created_at)) / 1e6
                 as score
     from (
      select c.id, c.id::text as ref, c.last_touch_at, c.created_at,
             array_remove(array[
               case when c.stage = 'churning' then 'churn risk (stage churning)'
                    when li.intent = 'churn_risk' then 'churn risk (latest interaction)' end,
               case when li.sentiment = 'escalation' then 'escalation in the latest interaction' end,
               case when x.stale_since is not null then 'stale context' end,
               case when li.thread_id is not null and li.direction = 'inbound'
                    then 'open thread' || coalesce(' "' || left(li.subject, 80) || '"', '') end], null) as reasons
      from cortex.contacts c
      left join cortex.contact_context x on x.tenant_id = c.tenant_id and x.contact_id = c.id
      left join lateral (
        select i.intent, i.sentiment, i.thread_id, i.direction, i.subject from cortex.interactions i
        where i.tenant_id = c.tenant_id and i.contact_id = c.id order by i.occurred_at desc limit 1) li on true
      where c.tenant_id = p_tenant_id and c.owner_agent = p_agent
      -- (The fence also keeps the reasons filter before the node lookups.)
      offset 0
     ) a
     where cardinality(a.reasons) > 0
     order by score desc, a.id
     limit v_per * 2
    ) a
    cross join lateral (
      select cn.id from cortex.memory_nodes cn
      where cn.tenant_id = p_tenant_id and cn.ref_kind = 'contact' and cn.ref_id = a.ref) cn
    union all
    -- (Unsettled knowledge, flagged for review or a low-confidence fact, is left to Unresolved.)
    select 2, 1e6 - r.ord, (r.r -> 'memory' ->> 'id')::uuid, null, null, r.r -> 'memory' ->> 'id'
    from jsonb_array_elements(v_search) with ordinality r (r, ord)
    where not (r.r -> 'memory' ->> 'needs_review')::boolean
      and not (r.r -> 'memory' ->> 'kind' = 'fact' and (r.r -> 'memory' ->> 'confidence')::real < 0.5)
    union all
    -- 3. Key Relationships: entities within two steps, by path weight x recency.
    select 3, (w.score / (1 + extract(epoch from p_at - greatest(n.updated_at, n.last_accessed_at)) / 604800))::float8,
           n.id, null, null, n.id::text
    from walk w join cortex.memory_nodes n on n.tenant_id = p_tenant_id and n.id = w.id
    where w.depth <= 2 and n.kind = any (v_entities) and n.id is distinct from v_agent_node
    union all
    -- 4. Patterns & Lessons: importance x path weight x recency (the tenant's half-life).
    select 4, (n.importance * p.score * power(0.5::float8, extract(epoch from p_at - greatest(n.created_at, n.last_accessed_at))
                                                        / (v_mem.half_life_days * 86400)))::float8,
           n.id, null, null, n.id::text
    from unnest(v_p_ids, v_p_score) p (id, score)
    join cortex.memory_nodes n on n.tenant_id = p_tenant_id and n.id = p.id
    where n.kind = 'pattern'
    union all
    -- 5. Goals: near the agent or its work (two steps), or its own most important ones (an index
    -- of active goals, not every goal of the tenant); by importance, then closeness.
    select 5, (g.importance + 0.001 * coalesce(max(w.score), 1))::float8, g.id, null, null, g.id::text
    from (
      select n.id, n.importance
      from walk w2 join cortex.memory_nodes n on n.tenant_id = p_tenant_id and n.id = w2.id
      where w2.depth <= 2 and n.kind = 'goal' and n.status = 'active'
      union
      (select n.id, n.importance from cortex.memory_nodes n
       where n.tenant_id = p_tenant_id and n.source_agent = p_agent and n.kind = 'goal' and n.status = 'active'
         and (not p_shared_only or n.visibility = 'shared') and n.importance >= p_cfg.min_importance
       order by n.importance desc, n.id
       limit v_per)
    ) g
    left join walk w on w.id = g.id and w.depth <= 2
    group by g.id, g.importance
    union all
    -- 6. Unresolved: contradictions (both sides), review flags, low-confidence facts.
    select 6, 3e6 + d.w, a.id, format('contradicts "%s" (%s)%s', b.title, b.kind, coalesce(': ' || nullif(b.body, ''), '')),
           jsonb_build_object('contradicts', jsonb_build_object('id', b.id, 'title', b.title, 'kind', b.kind, 'body', b.body)),
           'contradicts:' || a.id || ':' || b.id
    from cortex.memory_edges e
    join cortex.memory_nodes a on a.tenant_id = e.tenant_id and a.id = e.source_id
    join cortex.memory_nodes b on b.tenant_id = e.tenant_id and b.id = e.target_id
    cross join lateral (select cortex.decayed_weight(e.weight, e.last_reinforced_at, v_mem.half_life_days,
                                                     a.permanent or b.permanent, p_at)::float8 as w) d
    where p_cfg.include_contradictions and e.tenant_id = p_tenant_id and e.relation = 'contradicts'
      and (e.source_id = any (v_hood) or e.target_id = any (v_hood))
      and d.w >= p_cfg.min_weight and b.status = 'active' and (not p_shared_only or b.visibility = 'shared')
    union all
    -- Flagged or unsure nodes of the neighbourhood (looked up by id) or the agent's own (two small
    -- partial indexes): not every flagged node or fact of the tenant tested against the neighbourhood.
    select 6, 2e6 + n.importance, n.id, 'Needs review' || coalesce(': ' || nullif(n.review_reason, ''), '')
           || coalesce('. ' || nullif(n.body, ''), ''), null, n.id::text
    from cortex.memory_nodes n
    where p_cfg.include_contradictions and n.tenant_id = p_tenant_id and n.needs_review and n.status = 'active'
      and n.id in (select h.id from unnest(v_hood) h (id)
                   union
                   select o.id from cortex.memory_nodes o
                   where o.tenant_id = p_tenant_id and o.source_agent = p_agent and o.needs_review
                     and o.status = 'active')
    union all
    select 6, 1e6 + n.importance - n.confidence, n.id,
           format('Low confidence (%s)', round(n.confidence::numeric, 2)) || coalesce(': ' || nullif(n.body, ''), ''),
           null, n.id::text
    from cortex.memory_nodes n
    where p_cfg.include_contradictions and n.tenant_id = p_tenant_id and n.kind = 'fact' and n.confidence < 0.5
      and n.status = 'active'
      and n.id in (select h.id from unnest(v_hood) h (id)
                   union
                   select o.id from cortex.memory_nodes o
                   where o.tenant_id = p_tenant_id and o.source_agent = p_agent and o.kind = 'fact'
                     and o.confidence < 0.5 and o.status = 'active')
    union all
    -- 7. Recent Events: the window's events the agent logged or in its neighbourhood, newest first.
    select 7, extract(epoch from n.created_at)::float8, n.id, null, null, n.id::text
    from cortex.memory_nodes n
    where n.tenant_id = p_tenant_id and n.kind = 'event' and n.status = 'active'
      and n.created_at >= v_since
      and (n.source_agent = p_agent or n.id = any (v_hood))
  ), consulted as (
    select c.id from cand c
    union select unnest(v_i_read) union select unnest(v_w_ids) union select unnest(v_p_ids) union select unnest(v_anchors)
    union select (c.extra -> 'contradicts' ->> 'id')::uuid from cand c where c.extra is not null
  ), filtered as (
    -- The thresholds, once for every section: active, visible in this scope, important enough.
    select c.*, n.title, n.kind, coalesce(c.body, n.body) as text_body,
           -- The first section that names the node outside a contradiction (the de-duplication
           -- below; a window, not a lookup per row: that was quadratic, 15 s for 8,000 candidates).
           min(c.section) filter (where c.dkey not like 'contradicts:%') over (partition by c.id) as first_section
    from cand c join cortex.memory_nodes n on n.tenant_id = p_tenant_id and n.id = c.id
    where n.status = 'active' and (not p_shared_only or n.visibility = 'shared')
      and (n.kind = any (v_entities) or n.importance >= p_cfg.min_importance)
  ), first_seen as (
    select distinct on (f.dkey) f.* from filtered f order by f.dkey, f.section, f.score desc
  ), deduped as (
    -- First section wins (contradictions are keyed by their pair).
    select f.* from first_seen f
    where f.dkey like 'contradicts:%' or f.first_section is null or f.section <= f.first_section
  ), per_section as (
    select d.*, row_number() over (partition by d.section order by d.score desc, d.id) as pos from deduped d
  ), limited as (
    select p.*, row_number() over (order by p.section, p.pos) as overall from per_section p where p.pos <= v_per
  ), kept as (
    select l.* from limited l where l.overall <= v_total
  ), evidence as (
    -- Up to two observations one edge from each kept pattern (either direction), strongest first.
    select k.id as pattern_id,
           jsonb_agg(jsonb_build_object('id', o.id, 'title', o.title, 'kind', o.kind) order by o.w desc, o.id) as items
    from kept k
    cross join lateral (
      select x.id, x.title, x.kind, max(x.w) as w from (
        select n.id, n.title, n.kind,
               cortex.decayed_weight(e.weight, e.last_reinforced_at, v_mem.half_life_days, n.permanent, p_at) as w
        from cortex.memory_edges e join cortex.memory_nodes n on n.tenant_id = e.tenant_id and n.id = e.source_id
        where e.tenant_id = p_tenant_id and e.target_id = k.id
        union all
        select n.id, n.title, n.kind,
               cortex.decayed_weight(e.weight, e.last_reinforced_at, v_mem.half_life_days, n.permanent, p_at)
        from cortex.memory_edges e join cortex.memory_nodes n on n.tenant_id = e.tenant_id and n.id = e.target_id
        where e.tenant_id = p_tenant_id and e.source_id = k.id
      ) x
      join cortex.memory_nodes n2 on n2.tenant_id = p_tenant_id and n2.id = x.id
      where x.kind = 'observation' and x.w >= p_cfg.min_weight and n2.status = 'active'
        and (not p_shared_only or n2.visibility = 'shared')
      group by x.id, x.title, x.kind
      order by max(x.w) desc, x.id
      limit 2
    ) o
    where k.section = 4
    group by k.id
  )
  select jsonb_build_object(
    'sections', (
      select jsonb_agg(jsonb_build_object('title', s.title, 'items', coalesce((
               select jsonb_agg(jsonb_build_object('id', k.id, 'title', k.title, 'kind', k.kind, 'body', k.text_body)
                                || coalesce(k.extra, '{}')
                                || case when ev.items is not null then jsonb_build_object('evidence', ev.items) else '{}' end
                                order by k.pos)
               from kept k left join evidence ev on ev.pattern_id = k.id
               where k.section = s.i), '[]')) order by s.i)
      from unnest(cortex.briefing_sections()) with ordinality s (title, i)
      where s.i <> 6 or p_cfg.include_contradictions),
    'nodes_consulted', (select count(*) from (
                          select c.id from consulted c
                          union select (jsonb_array_elements(ev.items) ->> 'id')::uuid from evidence ev
                          union select v_agent_node) z where z.id is not null))
  into v_result;
  return v_result;
end $$;
comment on function cortex.briefing_build(uuid, text, boolean, cortex.briefing_settings, int, timestamptz) is
  'The seven section generators of an agent''s briefing (docs/briefings.md): a few indexed queries, two graph walks and one hybrid search, de-duplicated across sections (first section wins), '
  'thresholds and limits applied (p_factor multiplies the item limits: 4 for compact). p_shared_only: shared memories only (another agent''s view). '
  'Returns {sections: [{title, items: [{id, title, kind, body, evidence?, contradicts?}]}], nodes_consulted (distinct nodes the generators read)}.';
grant execute on function cortex.briefing_build(uuid, text, boolean, cortex.briefing_settings, int, timestamptz)
  to authenticated, service_role;

-- Serving ----------------------------------------------------------------------------------------

create or replace function cortex.briefing_get(
  p_agent text default null, p_format text default 'markdown', p_max_chars int default null,
  p_serve boolean default true, p_force boolean default false
) returns json
language plpgsql volatile set search_path = '' as $$
declare
  v_tenant uuid := cortex.require_tenant();
  v_caller text := cortex.current_agent();
  v_agent text := coalesce(p_agent, v_caller);
  v_cfg cortex.briefing_settings;
  v_max int;
  v_scope text;
  v_version bigint;
  v_now timestamptz := now();
  v_row cortex.briefings;
  v_built jsonb;
  v_render jsonb;
  v_cached boolean := false;
begin
  if p_format is null then
    raise exception 'format is required' using errcode = '22023', column = 'format';
  end if;
  perform cortex.check_enum('format', p_format, cortex.briefing_formats());
  if v_agent !~ '^[a-z][a-z0-9_-]{0,62}$'
     or not exists (select from cortex.agents a where a.tenant_id = v_tenant and a.name = v_agent) then
    raise exception 'agent "%" is not an agent of this tenant', left(v_agent, 100)
      using errcode = '22023', column = 'agent';
  end if;
  if v_agent <> v_caller and not cortex.caller_reads_all_briefings() then
    raise exception 'agent "%" cannot read the briefing of agent "%"', v_caller, v_agent
      using errcode = '42501', column = 'agent',
            hint = 'an agent reads its own briefing; admins and monitors may read any agent''s';
  end if;
  if p_max_chars is not null and p_max_chars not between 500 and 8000 then
    raise exception 'max_chars must be between 500 and 8000' using errcode = '22023', column = 'max_chars';
  end if;

  v_cfg := cortex.briefing_config(v_tenant, v_agent);
  v_max := coalesce(p_max_chars, v_cfg.max_chars);
  v_scope := case when v_agent = v_caller then 'agent' else 'shared' end;
  v_version := cortex.graph_version(v_tenant);

  if not p_force then
    select b.* into v_row from cortex.briefings b
    where b.tenant_id = v_tenant and b.agent = v_agent and b.format = p_format and b.max_chars = v_max
      and b.scope = v_scope and b.graph_version = v_version
      and b.generated_at > v_now - make_interval(secs => v_cfg.cache_ttl_seconds)
      -- Settings changed since: rebuilt with the new ones.
      and b.generated_at >= v_cfg.updated_at;
    v_cached := found;
  end if;
  if not v_cached then
    v_built := cortex.briefing_build(v_tenant, v_agent, v_scope = 'shared', v_cfg,
                                     case when p_format = 'compact' then 4 else 1 end, v_now);
    v_render := cortex.briefing_render(v_agent, p_format, v_now, (v_built ->> 'nodes_consulted')::int,
                                       v_built -> 'sections', v_max);
    v_row := row(v_tenant, v_agent, p_format, v_max, v_scope, v_version, v_now, v_render ->> 'text',
                 (v_render -> 'sections')::json, array(select jsonb_array_elements_text(v_render -> 'node_ids')::uuid),
                 (v_built ->> 'nodes_consulted')::int)::cortex.briefings;
    -- A read-only transaction (a PostgREST GET) serves the fresh briefing without caching it.
    if pg_catalog.current_setting('transaction_read_only') = 'off' then
      insert into cortex.briefings as b select v_row.*
      on conflict (tenant_id, agent, format, max_chars, scope) do update
      set graph_version = excluded.graph_version, generated_at = excluded.generated_at, text = excluded.text,
          sections = excluded.sections, node_ids = excluded.node_ids, nodes_consulted = excluded.nodes_consulted;
    end if;
  end if;
  if p_serve then
    -- One statement for every node shown, cached or not; the minute fold reinforces their edges.
    perform cortex.record_access(v_tenant, v_row.node_ids);
  end if;
  return json_build_object(
    'agent', v_agent, 'format', p_format, 'text', v_row.text, 'generated_at', v_row.generated_at,
    'graph_version', v_row.graph_version, 'nodes_consulted', v_row.nodes_consulted, 'cached', v_cached,
    'scope', v_scope, 'max_chars', v_max, 'chars', char_length(v_row.text),
    'tokens', ceil(char_length(v_row.text) / 4.0)::int, 'sections', v_row.sections);
end $$;
comment on function cortex.briefing_get(text, text, int, boolean, boolean) is
  'The briefing of p_agent (null: the caller) in p_format: the cached one when it is younger than the TTL, was built at the current graph version and after the last settings change, else built, rendered and cached. '
  'p_serve records the access of every node shown (one statement); p_force rebuilds (the pre-computation). An agent reads its own (scope agent); an admin or monitor any agent''s (scope shared: shared memories only). '
  'Returns json (not jsonb): the cached sections are copied into the answer as stored.';
grant execute on function cortex.briefing_get(text, text, int, boolean, boolean) to authenticated;

create or replace function public.get_briefing(agent text default null, format text default 'markdown', max_chars int default null)
returns json
language plpgsql volatile set search_path = '' as $$
begin
  perform cortex.require_tenant();
  -- A read whose only writes are the access log and the cache, both rebuilt if lost: its commit
  -- need not wait for the WAL flush (in a caller's own transaction, this holds for all of it).
  perform pg_catalog.set_config('synchronous_commit', 'off', true);
  return cortex.briefing_get(get_briefing.agent, get_briefing.format, get_briefing.max_chars, true, false);
end $$;
comment on function public.get_briefing(text, text, int) is
  'An agent''s briefing (seed 001): {agent, format, text, generated_at, graph_version, nodes_consulted, cached, scope, max_chars, chars, tokens, sections: [{title, items: [{id, title, kind, body}]}]}. '
  'agent defaults to the caller (admins and monitors may name another: shared memories only); format markdown | compact; max_chars 500..8000 (default: the settings, 8,000). '
  'Bad format, agent or max_chars is SQLSTATE 22023 naming the field; another agent''s briefing without the role is 42501. Served from the cache while the graph version is unchanged and within the TTL; records the access of every node shown. '
  'Commits without waiting for the WAL flush (synchronous_commit off for the transaction: its writes are the access log and the cache).';
grant execute on function public.get_briefing(text, text, int) to authenticated;

-- Pre-computation -------------------------------------------------------------------------------

create or replace function cortex.job_precompute_briefings(p_now timestamptz default now()) returns jsonb
language sql volatile set search_path = '' as $$
  -- Stale: no cached markdown or compact briefing at the agent's budget, or one built at another
  -- graph version, or one that will have outlived its TTL before the next run (every 5 minutes),
  -- so that a read between two runs never waits.
  with due as (
    select a.tenant_id, a.name
    from cortex.briefing_settings t
    join cortex.agents a on a.tenant_id = t.tenant_id
    left join cortex.briefing_settings o on o.tenant_id = a.tenant_id and o.agent = a.name
    where t.agent = '' and a.enabled and coalesce(o.precompute, t.precompute)
      and exists (
        select from unnest(cortex.briefing_formats()) f (format)
        where not exists (
          select from cortex.briefings b
          where b.tenant_id = a.tenant_id and b.agent = a.name and b.format = f.format and b.scope = 'agent'
            and b.max_chars = coalesce(o.max_chars, t.max_chars)
            and b.graph_version = cortex.graph_version(a.tenant_id)
            and b.generated_at > p_now - make_interval(secs => coalesce(o.cache_ttl_seconds, t.cache_ttl_seconds))
                                 + interval '5 minutes'
            and b.generated_at >= greatest(t.updated_at, o.updated_at)))
  )
  select jsonb_build_object('queued', count(cortex.enqueue_job(d.tenant_id, 'render_briefing',
                                                               jsonb_build_object('agent', d.name),
                                                               'briefing:' || d.name)))
  from due d
$$;
comment on function cortex.job_precompute_briefings(timestamptz) is
  'Scheduled (every 5 minutes): queues a render_briefing job (once per agent while queued) for every enabled agent with precompute on whose cached briefing is stale: missing, built at another graph version, or expiring before the next run. Returns {queued}.';
revoke execute on function cortex.job_precompute_briefings(timestamptz) from public, anon, authenticated, service_role;

do $$
begin
  if to_regnamespace('cron') is not null and to_regprocedure('cron.schedule(text, text, text)') is not null then
    perform cron.schedule('cortex-precompute-briefings', '*/5 * * * *', 'select cortex.job_precompute_briefings()');
  end if;
end $$;
