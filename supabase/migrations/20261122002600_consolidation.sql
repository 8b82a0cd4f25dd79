-- Consolidation (issue 10, seed 003): the audit trail of the five consolidation agents (decay,
-- cluster, merge, promote, relations) that work on the memory graph, kept in Postgres.
--
--   consolidation_items      the seed's "beads" issues: a human-readable title, notes as JSON (with
--                            memory_ids and agent), labels consolidation:{agent} and urgency:{urgency},
--                            status open -> in_progress -> closed | blocked; unique per (tenant, agent,
--                            sorted set of memory ids), so the same set never gets two items.
--   consolidation_changes    every change an agent made, linked to its item (what changed, before and
--                            after): a person can see what changed and why, and undo a merge.
--   consolidation_runs       one run at a time per tenant (a partial unique index on the running row,
--                            with a lease so a killed run does not block the tenant forever).
--   consolidation_rate       operations per tenant and minute: the rate limit across processes.
--   consolidation_promotions one row per memory promoted to the vault (never two files for one memory).
--
-- Everything is tenant-isolated by RLS and reserved to admins (the system agent, the service key):
-- consolidation acts for the whole tenant. Nothing here deletes a memory: a merge supersedes its
-- originals (status, valid_to), gc archives, and an undo restores. Dry runs run in read-only
-- transactions; every writing function refuses them first (SQLSTATE 25006) so nothing is half-written.
--
-- The agents' scans and set work: 20261122002650_consolidation_agents.sql.

-- Vocabularies ---------------------------------------------------------------------------------

create or replace function cortex.consolidation_agents() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['decay', 'cluster', 'merge', 'promote', 'relations'];
end $$;
comment on function cortex.consolidation_agents() is 'The consolidation agents, in the order `run --all` runs them.';

create or replace function cortex.consolidation_statuses() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['open', 'in_progress', 'blocked', 'closed'];
end $$;
comment on function cortex.consolidation_statuses() is 'Statuses of a consolidation item (seed 003''s beads issues).';

create or replace function cortex.consolidation_urgencies() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['high', 'medium', 'low'];
end $$;
comment on function cortex.consolidation_urgencies() is 'Urgency of a consolidation item (seed 003; not the handoff urgency list).';

create or replace function cortex.consolidation_change_kinds() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['node_created', 'node_superseded', 'node_archived', 'node_restored', 'node_retired', 'node_promoted',
               'edge_added'];
end $$;
comment on function cortex.consolidation_change_kinds() is 'Kinds of change an agent records against its item.';

create or replace function cortex.consolidation_run_statuses() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['running', 'done', 'failed', 'abandoned'];
end $$;
comment on function cortex.consolidation_run_statuses() is
  'Statuses of a consolidation run: running (holds the tenant''s one run), done, failed, abandoned (its lease expired).';

grant execute on function cortex.consolidation_agents(), cortex.consolidation_statuses(),
  cortex.consolidation_urgencies(), cortex.consolidation_change_kinds(), cortex.consolidation_run_statuses()
  to authenticated, service_role;

-- Guards -------------------------------------------------------------------------------------------

create or replace function cortex.consolidation_require_admin() returns uuid
language plpgsql stable set search_path = '' as $$
declare v_tenant uuid := cortex.require_tenant();
begin
  if not cortex.caller_is_admin() then
    raise exception 'consolidation is for admins: agent "%" is not one', cortex.current_agent()
      using errcode = '42501', hint = 'act as the system agent (the service key) or another admin';
  end if;
  return v_tenant;
end $$;
comment on function cortex.consolidation_require_admin() is
  'The caller''s tenant when the caller is an enabled admin of it; 28000 without claims, 42501 for other agents.';

create or replace function cortex.consolidation_check_write() returns void
language plpgsql stable set search_path = '' as $$
begin
  if pg_catalog.current_setting('transaction_read_only') = 'on' then
    raise exception 'dry run: consolidation writes nothing in a dry run'
      using errcode = '25006', hint = 'run without --dry-run to apply the changes';
  end if;
end $$;
comment on function cortex.consolidation_check_write() is
  'Refuses a write in a read-only transaction (a dry run) with SQLSTATE 25006, before anything is written.';

create or replace function cortex.consolidation_check_agent(p_agent text, p_field text default 'agent') returns text
language plpgsql immutable set search_path = '' as $$
begin
  if p_agent is null then
    raise exception '% is required', p_field using errcode = '22023', column = p_field;
  end if;
  return cortex.check_enum(p_field, p_agent, cortex.consolidation_agents());
end $$;
comment on function cortex.consolidation_check_agent(text, text) is
  'p_agent if it names a consolidation agent; SQLSTATE 22023 naming the field (and the agents) otherwise.';

grant execute on function cortex.consolidation_require_admin(), cortex.consolidation_check_write(),
  cortex.consolidation_check_agent(text, text) to authenticated, service_role;

-- Items: the audit trail -----------------------------------------------------------------------------

create table cortex.consolidation_items (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  id uuid not null default gen_random_uuid(),
  agent text not null check (agent = any (cortex.consolidation_agents())),
  title text not null check (length(btrim(title)) between 1 and 500),
  -- Structured notes (seed: "notes as JSON with memory_ids and agent"), plus what the agent found.
  notes jsonb not null default '{}' check (jsonb_typeof(notes) = 'object' and octet_length(notes::text) <= 65536),
  labels text[] not null default '{}' check (cardinality(labels) <= 20),
  urgency text not null default 'medium' check (urgency = any (cortex.consolidation_urgencies())),
  action text not null check (length(action) between 1 and 40),
  confidence real check (confidence between 0 and 1),
  status text not null default 'open' check (status = any (cortex.consolidation_statuses())),
  -- Sorted and distinct (trigger): the key of "never two items for the same set".
  memory_ids uuid[] not null check (cardinality(memory_ids) between 1 and 100),
  run_id uuid,
  created_by text,
  claimed_by text,
  claimed_at timestamptz,
  close_reason text check (length(close_reason) <= 2000),
  closed_at timestamptz,
  error text check (length(error) <= 4000),
  blocked_at timestamptz,
  -- What processing produced (the agent's result model).
  result jsonb check (result is null or octet_length(result::text) <= 262144),
  created_at timestamptz not null default clock_timestamp(),
  updated_at timestamptz not null default clock_timestamp(),
  primary key (tenant_id, id)
);
comment on table cortex.consolidation_items is
  'The consolidation audit trail (seed 003''s beads issues): one work item per agent and set of memory ids, with title, notes (memory_ids, agent, findings), labels consolidation:{agent} and urgency:{urgency}, status, claim, close reason or blocking error, and the result.';
create unique index consolidation_items_set on cortex.consolidation_items (tenant_id, agent, memory_ids);
create index consolidation_items_status on cortex.consolidation_items (tenant_id, status, agent, created_at);
create index consolidation_items_members on cortex.consolidation_items using gin (tenant_id, memory_ids);
create index consolidation_items_labels on cortex.consolidation_items using gin (tenant_id, labels);

create or replace function cortex.consolidation_items_before_write() returns trigger
language plpgsql set search_path = '' as $$
begin
  if tg_op = 'INSERT' then
    new.memory_ids := array(select distinct m from unnest(new.memory_ids) m where m is not null order by m);
    new.labels := array(select distinct l from unnest(new.labels || array['consolidation:' || new.agent,
                                                                         'urgency:' || new.urgency]) l order by l);
    new.notes := new.notes || jsonb_build_object('memory_ids', to_jsonb(new.memory_ids), 'agent', new.agent);
  else
    if new.memory_ids is distinct from old.memory_ids or new.agent is distinct from old.agent then
      raise exception 'an item''s agent and memory ids never change' using errcode = '55000';
    end if;
    new.updated_at := clock_timestamp();
    if new.urgency is distinct from old.urgency then
      new.labels := array(select distinct l from unnest(array_remove(new.labels, 'urgency:' || old.urgency)
                                                        || array['urgency:' || new.urgency]) l order by l);
    end if;
  end if;
  return new;
end $$;
comment on function cortex.consolidation_items_before_write() is
  'Trigger: sorts and de-duplicates memory_ids (the uniqueness key), keeps the labels consolidation:{agent} and urgency:{urgency}, writes memory_ids and agent into notes; agent and memory ids never change.';
create trigger consolidation_items_before_write before insert or update on cortex.consolidation_items
  for each row execute function cortex.consolidation_items_before_write();

-- Changes: every change links to its item -----------------------------------------------------------

create table cortex.consolidation_changes (
  tenant_id uuid not null,
  id uuid not null default gen_random_uuid(),
  item_id uuid not null,
  run_id uuid,
  agent text not null check (agent = any (cortex.consolidation_agents())),
  change text not null check (change = any (cortex.consolidation_change_kinds())),
  -- The node changed (for an edge: its source). An erased node takes its change rows along.
  node_id uuid not null,
  relation text,
  target_id uuid,
  before jsonb,
  after jsonb,
  created_by text,
  created_at timestamptz not null default clock_timestamp(),
  primary key (tenant_id, id),
  foreign key (tenant_id, item_id) references cortex.consolidation_items (tenant_id, id) on delete cascade,
  foreign key (tenant_id, node_id) references cortex.memory_nodes (tenant_id, id) on delete cascade,
  check ((change = 'edge_added') = (relation is not null and target_id is not null))
);
comment on table cortex.consolidation_changes is
  'Every change a consolidation agent made to the graph (node created, superseded, archived, restored, retired, promoted; edge added), with before and after, linked to its item: what changed, why, and how to undo it.';
create index consolidation_changes_item on cortex.consolidation_changes (tenant_id, item_id, created_at);
create index consolidation_changes_node on cortex.consolidation_changes (tenant_id, node_id);

-- Runs: one at a time per tenant ---------------------------------------------------------------------

create table cortex.consolidation_runs (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  id uuid not null default gen_random_uuid(),
  agents text[] not null check (cardinality(agents) between 1 and 5 and agents <@ cortex.consolidation_agents()),
  status text not null default 'running' check (status = any (cortex.consolidation_run_statuses())),
  started_by text,
  started_at timestamptz not null default clock_timestamp(),
  lease_until timestamptz not null,
  finished_at timestamptz,
  report jsonb not null default '{}' check (jsonb_typeof(report) = 'object' and octet_length(report::text) <= 262144),
  primary key (tenant_id, id)
);
comment on table cortex.consolidation_runs is
  'Consolidation runs (not dry runs, which write nothing): at most one running per tenant (unique index), kept alive by a lease; a run whose lease expired is marked abandoned when the next one starts.';
create unique index consolidation_runs_one_running on cortex.consolidation_runs (tenant_id) where status = 'running';
create index consolidation_runs_recent on cortex.consolidation_runs (tenant_id, started_at desc);

-- Rate limit: operations per tenant and minute ------------------------------------------------------

create table cortex.consolidation_rate (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  minute timestamptz not null,
  ops int not null default 0 check (ops >= 0),
  primary key (tenant_id, minute)
);
comment on table cortex.consolidation_rate is
  'Consolidation operations per tenant and minute (the rate limit, across processes; `status` reports what is left this minute). Rows older than a day are removed by the nightly job (cortex.job_consolidation).';

-- Promotions: one vault file per memory ----------------------------------------------------------------

create table cortex.consolidation_promotions (
  tenant_id uuid not null,
  memory_id uuid not null,
  status text not null default 'promoted' check (status = 'promoted'),
  vault_path text not null check (length(vault_path) between 1 and 1000 and vault_path !~ '(^/|\.\./)'),
  item_id uuid not null,
  criteria_met text[] not null check (cardinality(criteria_met) >= 1),
  promoted_at timestamptz not null default clock_timestamp(),
  primary key (tenant_id, memory_id),
  foreign key (tenant_id, memory_id) references cortex.memory_nodes (tenant_id, id) on delete cascade,
  foreign key (tenant_id, item_id) references cortex.consolidation_items (tenant_id, id) on delete cascade
);
comment on table cortex.consolidation_promotions is
  'Memories promoted to long-term storage (the vault folder): status promoted and the vault path, relative to the tenant''s vault folder. One row, and so one file, per memory.';
create unique index consolidation_promotions_path on cortex.consolidation_promotions (tenant_id, vault_path);

-- RLS: the tenant's admins only -----------------------------------------------------------------------

alter table cortex.consolidation_items enable row level security;
alter table cortex.consolidation_changes enable row level security;
alter table cortex.consolidation_runs enable row level security;
alter table cortex.consolidation_rate enable row level security;
alter table cortex.consolidation_promotions enable row level security;

create policy "Admins read their tenant's consolidation items" on cortex.consolidation_items
  for select to authenticated using (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_is_admin()));
create policy "Admins add consolidation items to their tenant" on cortex.consolidation_items
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_is_admin())
              and (select cortex.agent_can_write()));
create policy "Admins move their tenant's consolidation items" on cortex.consolidation_items
  for update to authenticated
  using (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_is_admin()))
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write()));

create policy "Admins read their tenant's consolidation changes" on cortex.consolidation_changes
  for select to authenticated using (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_is_admin()));
create policy "Admins record consolidation changes in their tenant" on cortex.consolidation_changes
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_is_admin())
              and (select cortex.agent_can_write()));

create policy "Admins read their tenant's consolidation runs" on cortex.consolidation_runs
  for select to authenticated using (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_is_admin()));
create policy "Admins start consolidation runs in their tenant" on cortex.consolidation_runs
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_is_admin())
              and (select cortex.agent_can_write()));
create policy "Admins finish their tenant's consolidation runs" on cortex.consolidation_runs
  for update to authenticated
  using (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_is_admin()))
  with check (tenant_id = (select cortex.current_tenant()));

create policy "Admins read their tenant's consolidation rate" on cortex.consolidation_rate
  for select to authenticated using (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_is_admin()));
create policy "Admins count their tenant's consolidation operations" on cortex.consolidation_rate
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_is_admin()));
create policy "Admins update their tenant's consolidation rate" on cortex.consolidation_rate
  for update to authenticated
  using (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_is_admin()))
  with check (tenant_id = (select cortex.current_tenant()));

create policy "Admins read their tenant's promotions" on cortex.consolidation_promotions
  for select to authenticated using (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_is_admin()));
create policy "Admins record promotions in their tenant" on cortex.consolidation_promotions
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_is_admin())
              and (select cortex.agent_can_write()));

grant select, insert, update on cortex.consolidation_items, cortex.consolidation_runs, cortex.consolidation_rate
  to authenticated;
grant select, insert on cortex.consolidation_changes, cortex.consolidation_promotions to authenticated;

-- JSON ------------------------------------------------------------------------------------------------

create or replace function cortex.consolidation_item_json(i cortex.consolidation_items) returns jsonb
language sql stable set search_path = '' as $$
  select jsonb_build_object(
    'id', i.id, 'agent', i.agent, 'title', i.title, 'notes', i.notes, 'labels', to_jsonb(i.labels),
    'urgency', i.urgency, 'action', i.action, 'confidence', i.confidence, 'status', i.status,
    'memory_ids', to_jsonb(i.memory_ids), 'run_id', i.run_id, 'created_by', i.created_by,
    'claimed_by', i.claimed_by, 'claimed_at', i.claimed_at, 'close_reason', i.close_reason,
    'closed_at', i.closed_at, 'error', i.error, 'blocked_at', i.blocked_at, 'result', i.result,
    'created_at', i.created_at, 'updated_at', i.updated_at)
$$;
comment on function cortex.consolidation_item_json(cortex.consolidation_items) is 'The API representation of a consolidation item.';

create or replace function cortex.consolidation_change_json(c cortex.consolidation_changes) returns jsonb
language sql stable set search_path = '' as $$
  select jsonb_strip_nulls(jsonb_build_object(
    'id', c.id, 'item_id', c.item_id, 'run_id', c.run_id, 'agent', c.agent, 'change', c.change, 'node_id', c.node_id,
    'relation', c.relation, 'target_id', c.target_id, 'before', c.before, 'after', c.after,
    'created_by', c.created_by, 'created_at', c.created_at))
$$;
comment on function cortex.consolidation_change_json(cortex.consolidation_changes) is 'The API representation of a recorded change.';

grant execute on function cortex.consolidation_item_json(cortex.consolidation_items),
  cortex.consolidation_change_json(cortex.consolidation_changes) to authenticated, service_role;

create or replace function cortex.consolidation_item_not_found(p_id uuid) returns void
language plpgsql set search_path = '' as $$
begin
  raise exception 'consolidation item % not found', p_id
    using errcode = 'P0002', column = 'item_id', hint = 'list the items with `cortex consolidate status` or GET /api/v1/consolidation/items';
end $$;
comment on function cortex.consolidation_item_not_found(uuid) is 'Raises the one "unknown item" error (SQLSTATE P0002 naming item_id).';
grant execute on function cortex.consolidation_item_not_found(uuid) to authenticated, service_role;

-- Items: create, query, claim, close, block ---------------------------------------------------------

create or replace function cortex.consolidation_create_item(
  p_agent text, p_memory_ids uuid[], p_action text, p_urgency text default 'medium', p_title text default null,
  p_notes jsonb default null, p_confidence real default null, p_run_id uuid default null,
  p_labels text[] default null, p_status text default 'open'
) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_ids uuid[];
  v_missing int;
  v_row cortex.consolidation_items;
begin
  perform cortex.consolidation_check_write();
  perform cortex.consolidation_check_agent(p_agent);
  if p_urgency is null then
    raise exception 'urgency is required' using errcode = '22023', column = 'urgency';
  end if;
  perform cortex.check_enum('urgency', p_urgency, cortex.consolidation_urgencies());
  perform cortex.check_enum('status', p_status, array['open', 'closed']);
  if p_action is null or btrim(p_action) = '' or length(p_action) > 40 then
    raise exception 'action is required (at most 40 characters)' using errcode = '22023', column = 'action';
  end if;
  if p_title is not null and (btrim(p_title) = '' or length(p_title) > 500) then
    raise exception 'title must be 1 to 500 characters' using errcode = '22023', column = 'title';
  end if;
  if p_notes is not null and jsonb_typeof(p_notes) <> 'object' then
    raise exception 'notes must be a JSON object' using errcode = '22023', column = 'notes';
  end if;
  if p_confidence is not null and (p_confidence < 0 or p_confidence > 1 or p_confidence = 'NaN') then
    raise exception 'confidence must be between 0 and 1' using errcode = '22023', column = 'confidence';
  end if;
  v_ids := array(select distinct m from unnest(p_memory_ids) m where m is not null order by m);
  if coalesce(cardinality(v_ids), 0) = 0 or cardinality(v_ids) > 100 then
    raise exception 'memory_ids must hold 1 to 100 memory ids' using errcode = '22023', column = 'memory_ids';
  end if;
  -- Every memory must be one the caller sees in its tenant (RLS: another tenant's is not there).
  select count(*) into v_missing from unnest(v_ids) m
  where not exists (select from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = m);
  if v_missing > 0 then
    perform cortex.memory_not_found((select m from unnest(v_ids) m
                                     where not exists (select from cortex.memory_nodes n
                                                       where n.tenant_id = v_tenant and n.id = m) limit 1),
                                    'memory_ids');
  end if;
  insert into cortex.consolidation_items as i (tenant_id, agent, title, notes, labels, urgency, action, confidence,
                                               status, memory_ids, run_id, created_by, closed_at, close_reason)
  values (v_tenant, p_agent,
          coalesce(btrim(p_title), format('%s: %s %s memor%s', p_agent, p_action, cardinality(v_ids),
                                          case when cardinality(v_ids) = 1 then 'y' else 'ies' end)),
          coalesce(p_notes, '{}') || jsonb_build_object('action', p_action), coalesce(p_labels, '{}'), p_urgency,
          p_action, p_confidence, p_status, v_ids, p_run_id, cortex.current_agent(),
          case when p_status = 'closed' then clock_timestamp() end,
          case when p_status = 'closed' then 'recorded closed by the agent' end)
  on conflict (tenant_id, agent, memory_ids) do nothing
  returning i.* into v_row;
  if v_row.id is not null then
    return jsonb_build_object('item', cortex.consolidation_item_json(v_row), 'created', true);
  end if;
  select * into v_row from cortex.consolidation_items i
  where i.tenant_id = v_tenant and i.agent = p_agent and i.memory_ids = v_ids;
  return jsonb_build_object('item', cortex.consolidation_item_json(v_row), 'created', false);
end $$;
comment on function cortex.consolidation_create_item(text, uuid[], text, text, text, jsonb, real, uuid, text[], text) is
  'Seed 003''s create_consolidation_issue: an item for p_agent over a set of memories (sorted, distinct, 1-100, each visible to the caller: P0002 naming memory_ids otherwise), with a title (default: agent, action, count), notes (+ memory_ids, agent, action), labels consolidation:{agent} and urgency:{urgency} (+ p_labels). '
  'Never two items for the same agent and set: the existing one is returned with created false. Admins only; refused in a dry run (25006). Returns {item, created}.';
grant execute on function cortex.consolidation_create_item(text, uuid[], text, text, text, jsonb, real, uuid, text[], text)
  to authenticated, service_role;

create or replace function cortex.consolidation_record_change(
  p_item_id uuid, p_agent text, p_change text, p_node_id uuid, p_before jsonb default null, p_after jsonb default null,
  p_relation text default null, p_target_id uuid default null, p_run_id uuid default null
) returns uuid
language sql volatile set search_path = '' as $$
  insert into cortex.consolidation_changes (tenant_id, item_id, run_id, agent, change, node_id, relation, target_id,
                                            before, after, created_by)
  values (cortex.require_tenant(), p_item_id, p_run_id, p_agent, p_change, p_node_id, p_relation, p_target_id,
          p_before, p_after, cortex.current_agent())
  returning id
$$;
comment on function cortex.consolidation_record_change(uuid, text, text, uuid, jsonb, jsonb, text, uuid, uuid) is
  'Records one change against its item (RLS: admins of the tenant). Returns the change id.';
grant execute on function cortex.consolidation_record_change(uuid, text, text, uuid, jsonb, jsonb, text, uuid, uuid)
  to authenticated, service_role;

create or replace function public.create_consolidation_item(
  agent text, memory_ids uuid[], action text, urgency text default 'medium', title text default null,
  extra jsonb default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
begin
  perform cortex.consolidation_require_admin();
  perform cortex.require_writer();
  return cortex.consolidation_create_item(create_consolidation_item.agent, create_consolidation_item.memory_ids,
                                          create_consolidation_item.action, create_consolidation_item.urgency,
                                          create_consolidation_item.title, create_consolidation_item.extra);
end $$;
comment on function public.create_consolidation_item(text, uuid[], text, text, text, jsonb) is
  'Files a consolidation item (seed 003''s create_consolidation_issue) for a human or an outside agent: agent (decay, cluster, merge, promote, relations), memory_ids, action, urgency (high, medium, low), title, extra notes. '
  'The same agent and set of memories is one item: the existing one comes back with created false. Admins only (42501). Returns {item, created}.';
grant execute on function public.create_consolidation_item(text, uuid[], text, text, text, jsonb) to authenticated;

create or replace function public.list_consolidation_items(
  agent text default null, status text default 'open', urgency text default null, "limit" int default 50
) returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_variable
declare v_tenant uuid := cortex.consolidation_require_admin();
begin
  perform cortex.check_enum('agent', agent, cortex.consolidation_agents());
  perform cortex.check_enum('status', status, cortex.consolidation_statuses());
  perform cortex.check_enum('urgency', urgency, cortex.consolidation_urgencies());
  if "limit" is null or "limit" not between 1 and 500 then
    raise exception 'limit must be between 1 and 500' using errcode = '22023', column = 'limit';
  end if;
  return jsonb_build_object('items', coalesce((
    select jsonb_agg(cortex.consolidation_item_json(x) order by x.created_at, x.id)
    from (select i.* from cortex.consolidation_items i
          where i.tenant_id = v_tenant
            and (agent is null or i.agent = agent)
            and (status is null or i.status = status)
            and (urgency is null or i.urgency = urgency)
          order by i.created_at, i.id
          limit "limit") x), '[]'));
end $$;
comment on function public.list_consolidation_items(text, text, text, int) is
  'Seed 003''s query_consolidation_issues: the tenant''s items matching every filter given (AND): agent, status (default open; null for any), urgency; oldest first, at most limit (1..500). An empty list when none match. Admins only. Returns {items}.';
grant execute on function public.list_consolidation_items(text, text, text, int) to authenticated;

create or replace function public.get_consolidation_item(item_id uuid) returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_row cortex.consolidation_items;
begin
  select * into v_row from cortex.consolidation_items i where i.tenant_id = v_tenant and i.id = item_id;
  if not found then
    perform cortex.consolidation_item_not_found(item_id);
  end if;
  return cortex.consolidation_item_json(v_row) || jsonb_build_object('changes', coalesce((
    select jsonb_agg(cortex.consolidation_change_json(c) order by c.created_at, c.id)
    from cortex.consolidation_changes c where c.tenant_id = v_tenant and c.item_id = v_row.id), '[]'));
end $$;
comment on function public.get_consolidation_item(uuid) is
  'One consolidation item with the changes recorded against it (what changed, before and after). 404 (P0002) for an unknown item. Admins only.';
grant execute on function public.get_consolidation_item(uuid) to authenticated;

create or replace function public.claim_consolidation_item(item_id uuid) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_agent text;
  v_row cortex.consolidation_items;
begin
  perform cortex.consolidation_check_write();
  v_agent := cortex.require_writer();
  -- Atomic: the row lock makes a concurrent claimer wait, then re-check the status and find it taken.
  update cortex.consolidation_items i
  set status = 'in_progress', claimed_by = v_agent, claimed_at = clock_timestamp()
  where i.tenant_id = v_tenant and i.id = item_id and i.status = 'open'
  returning i.* into v_row;
  if found then
    return jsonb_build_object('claimed', true, 'item', cortex.consolidation_item_json(v_row));
  end if;
  select * into v_row from cortex.consolidation_items i where i.tenant_id = v_tenant and i.id = item_id;
  if not found then
    perform cortex.consolidation_item_not_found(item_id);
  end if;
  return jsonb_build_object('claimed', false, 'item', cortex.consolidation_item_json(v_row));
end $$;
comment on function public.claim_consolidation_item(uuid) is
  'Seed 003''s claim_issue: moves an open item to in_progress for the caller, atomically (of two concurrent claimers one wins). An item already in progress, blocked or closed is not claimed: claimed false. 404 for an unknown item. Returns {claimed, item}.';
grant execute on function public.claim_consolidation_item(uuid) to authenticated;

create or replace function public.close_consolidation_item(item_id uuid, reason text, result jsonb default null)
returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_row cortex.consolidation_items;
begin
  perform cortex.consolidation_check_write();
  perform cortex.require_writer();
  if reason is null or btrim(reason) = '' or length(reason) > 2000 then
    raise exception 'reason is required (at most 2000 characters)' using errcode = '22023', column = 'reason';
  end if;
  if result is not null and jsonb_typeof(result) <> 'object' then
    raise exception 'result must be a JSON object' using errcode = '22023', column = 'result';
  end if;
  select * into v_row from cortex.consolidation_items i where i.tenant_id = v_tenant and i.id = item_id for update;
  if not found then
    perform cortex.consolidation_item_not_found(item_id);
  end if;
  if v_row.status = 'closed' then
    raise exception 'item % is closed already', item_id using errcode = '55000', column = 'item_id',
      detail = format('closed at %s: %s', v_row.closed_at, left(v_row.close_reason, 200));
  end if;
  update cortex.consolidation_items i
  set status = 'closed', close_reason = btrim(reason), closed_at = clock_timestamp(),
      result = coalesce(result, i.result),
      notes = i.notes || jsonb_build_object('close_reason', btrim(reason))
  where i.tenant_id = v_tenant and i.id = v_row.id
  returning i.* into v_row;
  return cortex.consolidation_item_json(v_row);
end $$;
comment on function public.close_consolidation_item(uuid, text, jsonb) is
  'Seed 003''s close_issue: status closed with the reason (also in notes) and optionally the result. 409 (55000) when closed already, 404 for an unknown item.';
grant execute on function public.close_consolidation_item(uuid, text, jsonb) to authenticated;

create or replace function public.block_consolidation_item(item_id uuid, error text) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_row cortex.consolidation_items;
begin
  perform cortex.consolidation_check_write();
  perform cortex.require_writer();
  if error is null or btrim(error) = '' then
    raise exception 'error is required' using errcode = '22023', column = 'error';
  end if;
  select * into v_row from cortex.consolidation_items i where i.tenant_id = v_tenant and i.id = item_id for update;
  if not found then
    perform cortex.consolidation_item_not_found(item_id);
  end if;
  if v_row.status = 'closed' then
    raise exception 'item % is closed: it cannot be blocked', item_id using errcode = '55000', column = 'item_id';
  end if;
  update cortex.consolidation_items i
  set status = 'blocked', error = left(btrim(error), 4000), blocked_at = clock_timestamp(),
      notes = i.notes || jsonb_build_object('error', left(btrim(error), 4000))
  where i.tenant_id = v_tenant and i.id = v_row.id
  returning i.* into v_row;
  return cortex.consolidation_item_json(v_row);
end $$;
comment on function public.block_consolidation_item(uuid, text) is
  'Seed 003''s block_issue: status blocked with the error (also in notes). A blocked item is never claimed again until a person reopens it (`process` does). 409 when closed, 404 for an unknown item.';
grant execute on function public.block_consolidation_item(uuid, text) to authenticated;

create or replace function cortex.consolidation_reopen_item(p_item_id uuid) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_row cortex.consolidation_items;
begin
  perform cortex.consolidation_check_write();
  update cortex.consolidation_items i set status = 'open', error = null, blocked_at = null
  where i.tenant_id = v_tenant and i.id = p_item_id and i.status = 'blocked'
  returning i.* into v_row;
  if not found then
    select * into v_row from cortex.consolidation_items i where i.tenant_id = v_tenant and i.id = p_item_id;
    if not found then
      perform cortex.consolidation_item_not_found(p_item_id);
    end if;
  end if;
  return cortex.consolidation_item_json(v_row);
end $$;
comment on function cortex.consolidation_reopen_item(uuid) is
  'A person processing a blocked item (`cortex consolidate process`) opens it again (the error stays in notes). Other statuses are left as they are. Returns the item.';
grant execute on function cortex.consolidation_reopen_item(uuid) to authenticated, service_role;

-- Runs and the rate limit -----------------------------------------------------------------------------

create or replace function cortex.consolidation_start_run(p_agents text[], p_lease_seconds int default 600)
returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_agent text;
  v_running cortex.consolidation_runs;
  v_row cortex.consolidation_runs;
begin
  perform cortex.consolidation_check_write();
  if coalesce(cardinality(p_agents), 0) = 0 then
    raise exception 'agents is required' using errcode = '22023', column = 'agents';
  end if;
  foreach v_agent in array p_agents loop
    perform cortex.consolidation_check_agent(v_agent, 'agents');
  end loop;
  select * into v_running from cortex.consolidation_runs r
  where r.tenant_id = v_tenant and r.status = 'running' for update;
  if found then
    if v_running.lease_until > clock_timestamp() then
      raise exception 'a consolidation run is in progress for this tenant' using errcode = '55000', column = 'run',
        detail = format('run %s (%s) started by %s at %s', v_running.id, array_to_string(v_running.agents, ', '),
                        v_running.started_by, v_running.started_at),
        hint = 'wait for it to finish (--wait SECONDS), or try again later';
    end if;
    update cortex.consolidation_runs r set status = 'abandoned', finished_at = clock_timestamp(),
      report = r.report || jsonb_build_object('abandoned', 'its lease expired')
    where r.tenant_id = v_tenant and r.id = v_running.id;
  end if;
  begin
    insert into cortex.consolidation_runs as r (tenant_id, agents, started_by, lease_until)
    values (v_tenant, p_agents, cortex.current_agent(), clock_timestamp() + make_interval(secs => p_lease_seconds))
    returning r.* into v_row;
  exception when unique_violation then
    -- Two starts at once: the other one won.
    raise exception 'a consolidation run is in progress for this tenant' using errcode = '55000', column = 'run',
      hint = 'wait for it to finish (--wait SECONDS), or try again later';
  end;
  return to_jsonb(v_row);
end $$;
comment on function cortex.consolidation_start_run(text[], int) is
  'Starts a consolidation run of these agents for the caller''s tenant: refused (55000, 409) while another run holds its lease; a run whose lease expired is marked abandoned. Returns the run row.';
grant execute on function cortex.consolidation_start_run(text[], int) to authenticated, service_role;

create or replace function cortex.consolidation_heartbeat(p_run_id uuid, p_lease_seconds int default 600) returns boolean
language sql volatile set search_path = '' as $$
  update cortex.consolidation_runs r set lease_until = clock_timestamp() + make_interval(secs => p_lease_seconds)
  where r.tenant_id = cortex.consolidation_require_admin() and r.id = p_run_id and r.status = 'running'
  returning true
$$;
comment on function cortex.consolidation_heartbeat(uuid, int) is 'Extends a running run''s lease; null when the run is no longer running (abandoned by another).';
grant execute on function cortex.consolidation_heartbeat(uuid, int) to authenticated, service_role;

create or replace function cortex.consolidation_finish_run(p_run_id uuid, p_status text, p_report jsonb)
returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_row cortex.consolidation_runs;
begin
  perform cortex.check_enum('status', p_status, array['done', 'failed']);
  update cortex.consolidation_runs r
  set status = p_status, finished_at = clock_timestamp(), report = coalesce(p_report, '{}')
  where r.tenant_id = v_tenant and r.id = p_run_id and r.status = 'running'
  returning r.* into v_row;
  return to_jsonb(v_row);
end $$;
comment on function cortex.consolidation_finish_run(uuid, text, jsonb) is
  'Ends a run (done or failed) with its report. Returns the run row (null when it was not running).';
grant execute on function cortex.consolidation_finish_run(uuid, text, jsonb) to authenticated, service_role;

create or replace function cortex.consolidation_take_ops(p_limit int, p_ops int default 1,
                                                         p_at timestamptz default clock_timestamp())
returns int
language plpgsql volatile set search_path = '' as $$
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_minute timestamptz := date_trunc('minute', p_at);
  v_used int;
  v_granted int;
begin
  perform cortex.consolidation_check_write();
  if p_limit is null or p_limit < 1 then
    raise exception 'rate_limit must be at least 1 operation per minute' using errcode = '22023', column = 'rate_limit';
  end if;
  insert into cortex.consolidation_rate (tenant_id, minute) values (v_tenant, v_minute) on conflict do nothing;
  -- The row lock serialises concurrent takers of one minute.
  select x.ops into v_used from cortex.consolidation_rate x
  where x.tenant_id = v_tenant and x.minute = v_minute for update;
  v_granted := least(greatest(coalesce(p_ops, 1), 0), greatest(p_limit - v_used, 0));
  if v_granted > 0 then
    update cortex.consolidation_rate x set ops = x.ops + v_granted where x.tenant_id = v_tenant and x.minute = v_minute;
  end if;
  return v_granted;
end $$;
comment on function cortex.consolidation_take_ops(int, int, timestamptz) is
  'Takes up to p_ops operations from the tenant''s budget of p_limit per minute (the minute of p_at); returns how many were granted (0: wait for the next minute). Concurrent takers serialise on the minute''s row.';
grant execute on function cortex.consolidation_take_ops(int, int, timestamptz) to authenticated, service_role;

create or replace function public.consolidation_status(agent text default null, rate_limit int default 100)
returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_agents jsonb;
  v_used int;
  v_run jsonb;
begin
  perform cortex.check_enum('agent', agent, cortex.consolidation_agents());
  if rate_limit is null or rate_limit < 1 then
    raise exception 'rate_limit must be at least 1' using errcode = '22023', column = 'rate_limit';
  end if;
  select jsonb_object_agg(q.name, jsonb_build_object('pending', q.pending, 'in_progress', q.in_progress,
                                                      'blocked', q.blocked) order by q.ord)
  into v_agents
  from (
    select a.name, a.ord,
           count(i.id) filter (where i.status = 'open') as pending,
           count(i.id) filter (where i.status = 'in_progress') as in_progress,
           count(i.id) filter (where i.status = 'blocked') as blocked
    from unnest(cortex.consolidation_agents()) with ordinality a(name, ord)
    left join cortex.consolidation_items i
      on i.tenant_id = v_tenant and i.agent = a.name and i.status in ('open', 'in_progress', 'blocked')
    where agent is null or a.name = agent
    group by a.name, a.ord
  ) q;
  select coalesce(sum(x.ops), 0) into v_used from cortex.consolidation_rate x
  where x.tenant_id = v_tenant and x.minute = date_trunc('minute', clock_timestamp());
  select to_jsonb(r) - 'tenant_id' into v_run from cortex.consolidation_runs r
  where r.tenant_id = v_tenant order by r.started_at desc limit 1;
  return jsonb_build_object(
    'agents', coalesce(v_agents, '{}'),
    'total_pending', (select coalesce(sum((v.value ->> 'pending')::int), 0) from jsonb_each(v_agents) v),
    'rate_limit_remaining', greatest(rate_limit - v_used, 0),
    'last_run', v_run);
end $$;
comment on function public.consolidation_status(text, int) is
  'Seed 003''s status: {agents: {decay: {pending, in_progress, blocked}, ...} (one agent when given), total_pending, rate_limit_remaining (rate_limit minus this minute''s operations), last_run}. Admins only.';
grant execute on function public.consolidation_status(text, int) to authenticated;
