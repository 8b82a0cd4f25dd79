-- The memory graph: one model for every agent's knowledge (seeds 001, 003, 004) and seed 000's
-- records. Memory nodes (fact ... observation) and entity nodes (agent, contact, person, system)
-- joined by typed, weighted, directed edges. Edge weights decay with time (one rule,
-- cortex.decayed_weight) and are reinforced when a node is served (an append-only access log,
-- folded in bulk). Every writing transaction advances its tenant's graph version without a hot
-- row (cortex.graph_changes). Agents, contacts, interactions and handoffs enter the graph by
-- trigger, never by the caller; cortex.backfill_graph covers rows that predate this migration.
--
-- Lock order (writers that touch the same rows): contacts -> interactions / handoff_events ->
-- memory_nodes -> memory_edges -> graph_changes. The fold jobs take memory_nodes before
-- memory_edges too, and graph_changes / memory_access rows are append-only, so no cycle exists.

-- Vocabularies ---------------------------------------------------------------------------------

-- The vocabularies are plpgsql, as everywhere: CHECK constraints call them for every row written
-- (docs/architecture.md, "Tenancy and security").
create or replace function cortex.memory_kinds() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['fact', 'decision', 'event', 'preference', 'pattern', 'goal', 'observation'];
end $$;
comment on function cortex.memory_kinds() is 'Kinds of memory node (knowledge an agent remembers).';

create or replace function cortex.entity_kinds() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['agent', 'contact', 'person', 'system'];
end $$;
comment on function cortex.entity_kinds() is 'Kinds of entity node (who or what memories are about).';

create or replace function cortex.node_kinds() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return cortex.memory_kinds() || cortex.entity_kinds();
end $$;
comment on function cortex.node_kinds() is 'Every node kind: the memory kinds, then the entity kinds.';

create or replace function cortex.edge_relations() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['applies_to', 'instance_of', 'relates_to', 'contradicts', 'supersedes', 'caused_by', 'part_of',
               'mentions', 'consolidated_from'];
end $$;
comment on function cortex.edge_relations() is 'Relations an edge may have (directed: source <relation> target).';

create or replace function cortex.memory_statuses() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['active', 'superseded', 'archived'];
end $$;
comment on function cortex.memory_statuses() is 'Node statuses: active; superseded by a newer node (valid_to set); archived (forgotten, never deleted).';

create or replace function cortex.memory_visibilities() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['shared', 'private'];
end $$;
comment on function cortex.memory_visibilities() is 'shared: every agent of the tenant; private: only its source agent (RLS).';

create or replace function cortex.index_statuses() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['pending', 'done', 'skipped', 'failed'];
end $$;
comment on function cortex.index_statuses() is
  'Per-node status of the worker''s embedding and linking: pending, done, skipped (provider off or nothing to do), failed (parked with its error).';

create or replace function cortex.node_ref_kinds() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['agent', 'contact', 'interaction', 'handoff'];
end $$;
comment on function cortex.node_ref_kinds() is 'Seed 000 records mirrored as nodes (by trigger): the ref_kind of such a node.';

grant execute on function cortex.memory_kinds(), cortex.entity_kinds(), cortex.node_kinds(), cortex.edge_relations(),
  cortex.memory_statuses(), cortex.memory_visibilities(), cortex.index_statuses(), cortex.node_ref_kinds()
  to authenticated, service_role;

-- Settings per tenant ---------------------------------------------------------------------------

create table cortex.memory_settings (
  tenant_id uuid primary key references cortex.tenants (id) on delete cascade,
  -- Decay: an edge loses half its weight every half_life_days without use (permanent nodes exempt).
  half_life_days real not null default 30 check (half_life_days > 0),
  -- Seed 001's thresholds: below them a node drops out of briefings and search ranking.
  min_weight real not null default 0.2 check (min_weight between 0 and 1),
  min_importance real not null default 0.3 check (min_importance between 0 and 1),
  -- Each served access adds this to an edge's (decayed) weight, capped at 1.
  reinforce_step real not null default 0.05 check (reinforce_step between 0 and 1),
  -- Full-text search language (a text search configuration).
  text_config regconfig not null default 'pg_catalog.english',
  -- Reciprocal rank fusion: score = sum(weight_r / (rrf_k + rank_r)). k 5 and text 0.5 (vector 1): tuned on
  -- scripts/eval over three seeds (docs/benchmarks.md); the any-word text ranking finds more, the vector orders better.
  rrf_k int not null default 5 check (rrf_k between 1 and 1000),
  weight_text real not null default 0.5 check (weight_text >= 0),
  weight_vector real not null default 1 check (weight_vector >= 0),
  weight_graph real not null default 0.25 check (weight_graph >= 0),
  -- De-duplication on write: trigram similarity of title + body, then (worker) cosine similarity.
  dedup_trigram real not null default 0.9 check (dedup_trigram between 0 and 1),
  dedup_cosine real not null default 0.95 check (dedup_cosine between 0 and 1),
  -- Auto-linker: relates_to above this cosine similarity.
  link_cosine real not null default 0.6 check (link_cosine between 0 and 1),
  updated_at timestamptz not null default now()
);
comment on table cortex.memory_settings is
  'Per-tenant parameters of the memory graph: decay half-life, seed 001 thresholds, reinforcement step, text search language, fusion weights, de-duplication and linking thresholds. One row per tenant, made with the tenant.';
create trigger memory_settings_updated_at before update on cortex.memory_settings
  for each row execute function cortex.touch_updated_at();

alter table cortex.memory_settings enable row level security;
create policy "Memory settings are visible to agents of their tenant" on cortex.memory_settings
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
grant select on cortex.memory_settings to authenticated;

create or replace function cortex.tenants_memory_settings() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  insert into cortex.memory_settings (tenant_id) select n.id from new_rows n on conflict do nothing;
  return null;
end $$;
comment on function cortex.tenants_memory_settings() is 'Trigger: every new tenant gets its memory settings row (defaults).';
revoke execute on function cortex.tenants_memory_settings() from public, anon, authenticated, service_role;
create trigger tenants_memory_settings after insert on cortex.tenants
  referencing new table as new_rows for each statement execute function cortex.tenants_memory_settings();
insert into cortex.memory_settings (tenant_id) select id from cortex.tenants on conflict do nothing;

create or replace function cortex.memory_config(p_tenant_id uuid) returns cortex.memory_settings
language sql stable set search_path = '' as $$
  select s.* from cortex.memory_settings s where s.tenant_id = p_tenant_id
$$;
comment on function cortex.memory_config(uuid) is 'The tenant''s memory settings row (RLS: an API caller sees only its own tenant''s).';
grant execute on function cortex.memory_config(uuid) to authenticated, service_role;

-- Decay: the one rule -----------------------------------------------------------------------

create or replace function cortex.decayed_weight(
  p_weight real, p_since timestamptz, p_half_life_days real, p_permanent boolean, p_at timestamptz
) returns real
-- No SET clause: a function with one is never inlined, and a walk calls this once per edge read
-- (a SET costs a GUC save and restore per call: 3x the walk's time). The body names only
-- pg_catalog, so the caller's search_path cannot change what it means.
language sql immutable parallel safe as $$
  select case
    when p_permanent or p_half_life_days is null or p_half_life_days <= 0 or p_since is null or p_at <= p_since
      then p_weight
    else (p_weight * pg_catalog.power(0.5::float8, pg_catalog.date_part('epoch', p_at - p_since)
                                                 / (p_half_life_days::float8 * 86400)))::real
  end
$$;
comment on function cortex.decayed_weight(real, timestamptz, real, boolean, timestamptz) is
  'The decay rule: weight x 0.5 ^ (age / half-life), age counted from the edge''s last reinforcement (p_since) to p_at. '
  'Edges touching a permanent node never decay. Computed at read time: decay never writes and never deletes. '
  'Inlined into its callers (no SET clause; pg_catalog names only).';
grant execute on function cortex.decayed_weight(real, timestamptz, real, boolean, timestamptz) to authenticated, service_role;

-- Nodes -----------------------------------------------------------------------------------------

create table cortex.memory_nodes (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  id uuid not null default gen_random_uuid(),
  kind text not null check (kind = any (cortex.node_kinds())),
  title text not null check (length(btrim(title)) between 1 and 500),
  body text not null default '' check (length(body) <= 20000),
  importance real not null default 0.5 check (importance between 0 and 1),
  confidence real not null default 0.8 check (confidence between 0 and 1),
  -- The agent that wrote it (null for records without an agent); a private node is its alone.
  source_agent text check (source_agent ~ '^[a-z][a-z0-9_-]{0,62}$'),
  visibility text not null default 'shared' check (visibility = any (cortex.memory_visibilities())),
  -- '' for shared nodes, the owning agent for private ones: uniqueness is per scope.
  scope text generated always as (case when visibility = 'private' then source_agent else '' end) stored,
  tags text[] not null default '{}' check (cardinality(tags) <= 50),
  -- What the memory is about, when it is about a contact (filters, erasure cascades).
  contact_id uuid,
  -- A slot ("contact:...:phone", "policy:refunds"): at most one active node per scope and key; a
  -- newer node in the slot supersedes the older one.
  key text check (length(key) between 1 and 200),
  status text not null default 'active' check (status = any (cortex.memory_statuses())),
  permanent boolean not null default false,
  -- Review flag (a contradiction found by the auto-linker, a low-confidence extraction).
  needs_review boolean not null default false,
  review_reason text check (length(review_reason) <= 1000),
  access_count int not null default 0 check (access_count >= 0),
  last_accessed_at timestamptz,
  -- When it was true: valid_from .. valid_to (null = still true).
  valid_from timestamptz not null default now(),
  valid_to timestamptz,
  -- A node mirrored from seed 000 (agent name, contact / interaction / handoff id).
  ref_kind text check (ref_kind = any (cortex.node_ref_kinds())),
  ref_id text,
  metadata jsonb not null default '{}' check (jsonb_typeof(metadata) = 'object' and octet_length(metadata::text) <= 16384),
  -- Exact de-duplication key of memories (normalised case and spaces); for mirrored records, whose
  -- identity is their ref, a plain hash of the content is enough (the worker compares it) and cheaper.
  content_hash text generated always as (case when ref_kind is null then
    md5(lower(regexp_replace(btrim(title), '\s+', ' ', 'g')) || E'\n' || lower(regexp_replace(btrim(body), '\s+', ' ', 'g')))
    else md5(title || E'\n' || body) end) stored,
  -- Full text: title (A) + tags (B) + body (C) in the tenant's language (trigger).
  fts tsvector,
  embedding extensions.vector(384),
  embed_status text not null default 'pending' check (embed_status = any (cortex.index_statuses())),
  link_status text not null default 'pending' check (link_status = any (cortex.index_statuses())),
  index_attempts int not null default 0 check (index_attempts >= 0),
  index_error text,
  indexed_at timestamptz,
  -- The worker's lease on a node it is indexing (the nodes are their own queue).
  index_locked_until timestamptz,
  created_at timestamptz not null default clock_timestamp(),
  updated_at timestamptz not null default clock_timestamp(),
  primary key (tenant_id, id),
  foreign key (tenant_id, contact_id) references cortex.contacts (tenant_id, id) on delete cascade,
  check (visibility = 'shared' or source_agent is not null),
  check (valid_to is null or valid_to >= valid_from),
  check ((ref_kind is null) = (ref_id is null))
);
comment on table cortex.memory_nodes is
  'Nodes of the memory graph: memories (fact, decision, event, preference, pattern, goal, observation) and entities (agent, contact, person, system), with importance, confidence, validity, status, visibility, and the worker''s embedding.';
create index memory_nodes_kind on cortex.memory_nodes (tenant_id, kind, created_at desc) where status = 'active';
create index memory_nodes_recent on cortex.memory_nodes (tenant_id, created_at desc);
create index memory_nodes_agent on cortex.memory_nodes (tenant_id, source_agent, created_at desc);
create index memory_nodes_contact on cortex.memory_nodes (tenant_id, contact_id, created_at desc) where contact_id is not null;
-- Tenant first (btree_gin): a small tenant's words are looked up among its own memories, not
-- among every tenant's. No fast update: every write's near-duplicate probe and every text search
-- would otherwise read the whole pending list (up to gin_pending_list_limit, 4 MB) while writes
-- come in; under a stream of writes that was most of a probe's time (docs/benchmarks.md).
create index memory_nodes_fts on cortex.memory_nodes using gin (tenant_id, fts) with (fastupdate = off);
create index memory_nodes_tags on cortex.memory_nodes using gin (tags) where cardinality(tags) > 0;
create index memory_nodes_embedding on cortex.memory_nodes using hnsw (embedding extensions.vector_cosine_ops);
create index memory_nodes_review on cortex.memory_nodes (tenant_id, updated_at desc) where needs_review;
-- The few permanent nodes: a walk ranks the nodes it reaches before reading them (their edges never decay).
create index memory_nodes_permanent on cortex.memory_nodes (tenant_id, id) where permanent;
create index memory_nodes_index_queue on cortex.memory_nodes (created_at)
  where embed_status = 'pending' or link_status = 'pending';
create unique index memory_nodes_ref on cortex.memory_nodes (tenant_id, ref_kind, ref_id) where ref_kind is not null;
-- Exact de-duplication is a constraint, so two concurrent writers of the same memory make one node.
create unique index memory_nodes_exact on cortex.memory_nodes (tenant_id, scope, kind, content_hash)
  where status = 'active' and ref_kind is null;
create unique index memory_nodes_key on cortex.memory_nodes (tenant_id, scope, key)
  where status = 'active' and key is not null;

create or replace function cortex.memory_nodes_before_write() returns trigger
language plpgsql set search_path = '' as $$
declare v_config regconfig;
begin
  if cardinality(new.tags) > 0 then
    new.tags := coalesce((select array_agg(distinct lower(btrim(t)) order by lower(btrim(t)))
                          from unnest(new.tags) t where btrim(t) <> ''), '{}');
  end if;
  new.title := btrim(new.title);
  if tg_op = 'INSERT' or (new.title, new.body, new.tags) is distinct from (old.title, old.body, old.tags) then
    v_config := coalesce((select s.text_config from cortex.memory_settings s where s.tenant_id = new.tenant_id),
                         'pg_catalog.english');
    new.fts := setweight(to_tsvector(v_config, new.title), 'A')
            || case when cardinality(new.tags) > 0
                    then setweight(to_tsvector('pg_catalog.simple', array_to_string(new.tags, ' ')), 'B')
                    else ''::tsvector end
            || setweight(to_tsvector(v_config, new.body), 'C');
  end if;
  if tg_op = 'UPDATE' then
    new.updated_at := clock_timestamp();
    -- New content must be embedded and linked again; a stale embedding is dropped at once.
    if (new.title, new.body) is distinct from (old.title, old.body) then
      new.embedding := null;
      new.embed_status := 'pending';
      new.link_status := 'pending';
      new.index_attempts := 0;
      new.index_error := null;
    end if;
  end if;
  return new;
end $$;
comment on function cortex.memory_nodes_before_write() is
  'Trigger: normalises tags and title, computes the full-text vector in the tenant''s language, and sends changed content back to the worker (embedding and links pending).';
create trigger memory_nodes_before_write before insert or update on cortex.memory_nodes
  for each row execute function cortex.memory_nodes_before_write();

-- Edges -------------------------------------------------------------------------------------------

create table cortex.memory_edges (
  -- No foreign key to tenants: the two node keys imply it (and go with it), one lookup fewer per edge.
  tenant_id uuid not null,
  source_id uuid not null,
  target_id uuid not null,
  relation text not null check (relation = any (cortex.edge_relations())),
  weight real not null default 0.5 check (weight between 0 and 1),
  -- Set when either end is private: the edge is then that agent's alone (trigger).
  private_agent text,
  created_by text,
  metadata jsonb not null default '{}' check (jsonb_typeof(metadata) = 'object' and octet_length(metadata::text) <= 4096),
  created_at timestamptz not null default clock_timestamp(),
  last_reinforced_at timestamptz not null default clock_timestamp(),
  primary key (tenant_id, source_id, relation, target_id),
  foreign key (tenant_id, source_id) references cortex.memory_nodes (tenant_id, id) on delete cascade,
  foreign key (tenant_id, target_id) references cortex.memory_nodes (tenant_id, id) on delete cascade,
  constraint memory_edges_no_self_loop check (source_id <> target_id)
);
comment on table cortex.memory_edges is
  'Typed, weighted, directed edges of the memory graph. weight is the value at last_reinforced_at; the weight now is cortex.decayed_weight of it.';
-- Incoming edges, and with source_id last an exact match for a whole key as well: a cached generic
-- plan may pick this index over the primary key for a lookup by all four columns, and for an edge
-- into a hub it then filtered 12,000 entries per lookup (traverse_graph at 1M nodes: p95 157 ms -> 21 ms).
create index memory_edges_target on cortex.memory_edges (tenant_id, target_id, relation, source_id);
create index memory_edges_relation on cortex.memory_edges (tenant_id, relation) where relation = 'contradicts';

create or replace function cortex.memory_edges_before_write() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  v_src text;
  v_tgt text;
begin
  -- Edges written by the graph's own triggers (seed 000 mirrors) join shared nodes only; a caller
  -- cannot reach trigger depth 2 except through them.
  if pg_trigger_depth() > 1 then
    return new;
  end if;
  -- Definer: it must see both ends whoever writes, to keep a private node's edges private.
  select n.scope into v_src from cortex.memory_nodes n where n.tenant_id = new.tenant_id and n.id = new.source_id;
  select n.scope into v_tgt from cortex.memory_nodes n where n.tenant_id = new.tenant_id and n.id = new.target_id;
  if v_src <> '' and v_tgt <> '' and v_src <> v_tgt then
    raise exception 'an edge cannot join private memories of two different agents'
      using errcode = '22023', column = 'target_id';
  end if;
  new.private_agent := nullif(greatest(coalesce(v_src, ''), coalesce(v_tgt, '')), '');
  return new;
end $$;
comment on function cortex.memory_edges_before_write() is
  'Trigger: an edge touching a private node is private to that node''s agent; private nodes of two different agents cannot be joined (22023).';
revoke execute on function cortex.memory_edges_before_write() from public, anon, authenticated, service_role;
create trigger memory_edges_before_write before insert or update of source_id, target_id on cortex.memory_edges
  for each row execute function cortex.memory_edges_before_write();

-- Visibility: RLS on the tenant and agent claims ------------------------------------------------

alter table cortex.memory_nodes enable row level security;
alter table cortex.memory_edges enable row level security;

create policy "Memory nodes are visible to agents of their tenant, private ones to their agent"
  on cortex.memory_nodes for select to authenticated
  using (tenant_id = (select cortex.current_tenant())
         and (visibility = 'shared' or source_agent = (select cortex.current_agent())));
create policy "Writing agents add their own memories to their tenant" on cortex.memory_nodes
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write())
              and ref_kind is null and kind <> 'agent' and kind <> 'contact'
              and (source_agent = (select cortex.current_agent()) or (select cortex.caller_is_admin()))
              and (visibility = 'shared' or source_agent = (select cortex.current_agent())));
create policy "Writing agents change the memories they can see" on cortex.memory_nodes
  for update to authenticated
  using (tenant_id = (select cortex.current_tenant())
         and (visibility = 'shared' or source_agent = (select cortex.current_agent())))
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write())
              and (visibility = 'shared' or source_agent = (select cortex.current_agent())));
grant select, insert, update on cortex.memory_nodes to authenticated;

create policy "Memory edges are visible to agents of their tenant, private ones to their agent"
  on cortex.memory_edges for select to authenticated
  using (tenant_id = (select cortex.current_tenant())
         and (private_agent is null or private_agent = (select cortex.current_agent())));
create policy "Writing agents link memories of their tenant" on cortex.memory_edges
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write())
              and (private_agent is null or private_agent = (select cortex.current_agent())));
create policy "Writing agents change edges they can see" on cortex.memory_edges
  for update to authenticated
  using (tenant_id = (select cortex.current_tenant())
         and (private_agent is null or private_agent = (select cortex.current_agent())))
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write()));
grant select, insert, update on cortex.memory_edges to authenticated;

-- Nothing is deleted but by erasure (a contact's or a tenant's cascade, or cortex.begin_erasure).
create or replace function cortex.memory_no_delete() returns trigger
language plpgsql set search_path = '' as $$
begin
  if tg_op = 'DELETE' and (cortex.erasure_declared() or pg_trigger_depth() > 1
                           or not exists (select from cortex.tenants t where t.id = old.tenant_id)) then
    return old;
  end if;
  raise exception 'memories are never deleted: forget archives them'
    using errcode = '55000', hint = 'use forget_memory; erasure of a person or tenant goes through cortex.begin_erasure';
end $$;
comment on function cortex.memory_no_delete() is
  'Trigger: refuses DELETE and TRUNCATE of nodes and edges (SQLSTATE 55000) except cascades (a contact''s or tenant''s erasure) and transactions that declared an erasure.';
create trigger memory_nodes_no_delete before delete on cortex.memory_nodes
  for each row execute function cortex.memory_no_delete();
create trigger memory_nodes_no_truncate before truncate on cortex.memory_nodes
  for each statement execute function cortex.memory_no_delete();
create trigger memory_edges_no_delete before delete on cortex.memory_edges
  for each row execute function cortex.memory_no_delete();
create trigger memory_edges_no_truncate before truncate on cortex.memory_edges
  for each statement execute function cortex.memory_no_delete();

-- Graph version: one row per writing transaction, no hot row ----------------------------------
-- A counter row per tenant would serialise every writer of the tenant on one row lock. Instead
-- each writing transaction appends one (tenant, txid) row; the version is the folded base plus the
-- committed rows not yet folded, so it moves exactly when a write commits. Reinforcement (the
-- access fold) does not count: it changes weights, not knowledge.

create table cortex.graph_changes (
  tenant_id uuid not null,
  txid xid8 not null default pg_catalog.pg_current_xact_id(),
  changed_at timestamptz not null default now(),
  primary key (tenant_id, txid)
);
comment on table cortex.graph_changes is
  'One row per transaction that wrote a tenant''s graph, until folded into cortex.graph_versions. No foreign key: a tenant''s erasure writes here while it cascades.';

create table cortex.graph_versions (
  tenant_id uuid primary key references cortex.tenants (id) on delete cascade,
  version bigint not null default 0 check (version >= 0),
  folded_at timestamptz not null default now()
);
comment on table cortex.graph_versions is 'Folded part of each tenant''s graph version (see cortex.graph_version).';

alter table cortex.graph_changes enable row level security;
alter table cortex.graph_versions enable row level security;
create policy "Graph changes are visible to agents of their tenant" on cortex.graph_changes
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
create policy "Graph versions are visible to agents of their tenant" on cortex.graph_versions
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
grant select on cortex.graph_changes, cortex.graph_versions to authenticated;

create or replace function cortex.graph_changed() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  -- The tenants this transaction has recorded already (a transaction-local setting): a remember
  -- writes three statements, and each insert here was an index probe and a WAL record for nothing.
  -- A rolled-back savepoint takes the setting back with the row it recorded.
  v_seen text := coalesce(pg_catalog.current_setting('cortex.graph_changed', true), '');
  v_new uuid[];
begin
  if coalesce(pg_catalog.current_setting('cortex.reinforcing', true), '') = 'on' then
    return null;
  end if;
  select pg_catalog.array_agg(distinct r.tenant_id) into v_new
  from changed_rows r where pg_catalog.strpos(v_seen, r.tenant_id::text) = 0;
  if v_new is null then
    return null;
  end if;
  insert into cortex.graph_changes (tenant_id)
  select t from pg_catalog.unnest(v_new) t
  on conflict do nothing;
  perform pg_catalog.set_config('cortex.graph_changed', v_seen || pg_catalog.array_to_string(v_new, ',') || ',', true);
  return null;
end $$;
comment on function cortex.graph_changed() is
  'Trigger (statement, transition table changed_rows): records that this transaction changed the graph of each tenant it touched, once per transaction and tenant (the transaction-local setting cortex.graph_changed lists those recorded).';
revoke execute on function cortex.graph_changed() from public, anon, authenticated, service_role;

create trigger memory_nodes_changed_ins after insert on cortex.memory_nodes
  referencing new table as changed_rows for each statement execute function cortex.graph_changed();
create trigger memory_nodes_changed_upd after update on cortex.memory_nodes
  referencing new table as changed_rows for each statement execute function cortex.graph_changed();
create trigger memory_nodes_changed_del after delete on cortex.memory_nodes
  referencing old table as changed_rows for each statement execute function cortex.graph_changed();
create trigger memory_edges_changed_ins after insert on cortex.memory_edges
  referencing new table as changed_rows for each statement execute function cortex.graph_changed();
create trigger memory_edges_changed_upd after update on cortex.memory_edges
  referencing new table as changed_rows for each statement execute function cortex.graph_changed();
create trigger memory_edges_changed_del after delete on cortex.memory_edges
  referencing old table as changed_rows for each statement execute function cortex.graph_changed();

create or replace function cortex.graph_version(p_tenant_id uuid) returns bigint
language sql stable set search_path = '' as $$
  select coalesce((select v.version from cortex.graph_versions v where v.tenant_id = p_tenant_id), 0)
       + (select count(*) from cortex.graph_changes c where c.tenant_id = p_tenant_id)
$$;
comment on function cortex.graph_version(uuid) is
  'The tenant''s graph version: advances by one with every committed transaction that wrote its nodes or edges (reinforcement excluded). Briefing caches key on it.';
grant execute on function cortex.graph_version(uuid) to authenticated, service_role;

create or replace function cortex.fold_graph_changes() returns int
language sql volatile set search_path = '' as $$
  with gone as (
    delete from cortex.graph_changes c returning c.tenant_id
  ), counted as (
    select g.tenant_id, count(*) as n from gone g
    where exists (select from cortex.tenants t where t.id = g.tenant_id) group by g.tenant_id
  ), folded as (
    insert into cortex.graph_versions as v (tenant_id, version)
    select c.tenant_id, c.n from counted c
    on conflict (tenant_id) do update set version = v.version + excluded.version, folded_at = now()
    returning 1
  )
  select count(*)::int from folded
$$;
comment on function cortex.fold_graph_changes() is
  'Scheduled (each minute): moves committed change rows into the per-tenant base version in one statement, so every version read stays the same across a fold. Returns the tenants folded.';
revoke execute on function cortex.fold_graph_changes() from public, anon, authenticated, service_role;

-- Access: reads append, a fold reinforces in bulk ----------------------------------------------

create table cortex.memory_access (
  tenant_id uuid not null,
  node_id uuid not null,
  agent text,
  accessed_at timestamptz not null default now()
);
comment on table cortex.memory_access is
  'Append-only log of nodes served to agents (one row per node per request); cortex.fold_memory_access turns it into access counts and edge reinforcement.';
create index memory_access_tenant on cortex.memory_access (tenant_id, accessed_at);
alter table cortex.memory_access enable row level security;
create policy "Agents record their own reads in their tenant" on cortex.memory_access
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and agent = (select cortex.current_agent()));
grant insert on cortex.memory_access to authenticated;

create or replace function cortex.record_access(p_tenant_id uuid, p_node_ids uuid[]) returns int
language plpgsql volatile set search_path = '' as $$
declare v_n int;
begin
  -- A read-only transaction (a PostgREST GET) cannot append: serving still works, unrecorded.
  if pg_catalog.current_setting('transaction_read_only') = 'on' or coalesce(cardinality(p_node_ids), 0) = 0 then
    return 0;
  end if;
  -- (select ...): the claims are read once, not once per row (a briefing records 50-100 rows).
  insert into cortex.memory_access (tenant_id, node_id, agent)
  select p_tenant_id, d.id, (select cortex.current_agent()) from (select distinct unnest(p_node_ids) as id) d
  where d.id is not null;
  get diagnostics v_n = row_count;
  return v_n;
end $$;
comment on function cortex.record_access(uuid, uuid[]) is
  'Records that these nodes were served to the calling agent (once each per call); a no-op in a read-only transaction. Invoker: RLS holds an API caller to its tenant and agent.';
grant execute on function cortex.record_access(uuid, uuid[]) to authenticated, service_role;

create or replace function cortex.fold_memory_access(p_at timestamptz default now()) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_nodes int;
  v_edges int;
begin
  perform pg_catalog.set_config('cortex.reinforcing', 'on', true);
  create temporary table if not exists pg_temp.memory_access_batch (
    tenant_id uuid, node_id uuid, n int, last_at timestamptz) on commit drop;
  truncate pg_temp.memory_access_batch;
  with gone as (delete from cortex.memory_access a returning a.*)
  insert into pg_temp.memory_access_batch
  select g.tenant_id, g.node_id, count(*)::int, max(g.accessed_at) from gone g group by 1, 2;

  update cortex.memory_nodes n
  set access_count = n.access_count + b.n, last_accessed_at = greatest(n.last_accessed_at, b.last_at)
  from pg_temp.memory_access_batch b
  where n.tenant_id = b.tenant_id and n.id = b.node_id;
  get diagnostics v_nodes = row_count;

  with touched as (
    select e.tenant_id, e.source_id, e.relation, e.target_id, sum(b.n) as n
    from pg_temp.memory_access_batch b
    join cortex.memory_edges e on e.tenant_id = b.tenant_id and (e.source_id = b.node_id or e.target_id = b.node_id)
    group by 1, 2, 3, 4
  )
  update cortex.memory_edges e
  set weight = least(1, cortex.decayed_weight(e.weight, e.last_reinforced_at, s.half_life_days,
                                              sn.permanent or tn.permanent, p_at)
                        + s.reinforce_step * least(t.n, 5))::real,
      last_reinforced_at = greatest(e.last_reinforced_at, p_at)
  from touched t
  join cortex.memory_settings s on s.tenant_id = t.tenant_id
  join cortex.memory_nodes sn on sn.tenant_id = t.tenant_id and sn.id = t.source_id
  join cortex.memory_nodes tn on tn.tenant_id = t.tenant_id and tn.id = t.target_id
  where e.tenant_id = t.tenant_id and e.source_id = t.source_id and e.relation = t.relation
    and e.target_id = t.target_id;
  get diagnostics v_edges = row_count;
  perform pg_catalog.set_config('cortex.reinforcing', 'off', true);
  return jsonb_build_object('nodes', v_nodes, 'edges', v_edges);
end $$;
comment on function cortex.fold_memory_access(timestamptz) is
  'Scheduled (each minute): applies the access log in bulk: access counts and last access of nodes, and each edge touching a served node reinforced (decayed weight now + reinforce_step per access, at most 5 steps per fold, capped at 1). Does not advance the graph version.';
revoke execute on function cortex.fold_memory_access(timestamptz) from public, anon, authenticated, service_role;

-- JSON of a node --------------------------------------------------------------------------------

create or replace function cortex.memory_node_json(n cortex.memory_nodes) returns jsonb
-- No SET clause, so it is inlined: a traversal or search renders up to 500 nodes.
language sql stable as $$
  select pg_catalog.jsonb_build_object(
    'id', n.id, 'kind', n.kind, 'title', n.title, 'body', n.body, 'importance', n.importance,
    'confidence', n.confidence, 'source_agent', n.source_agent, 'visibility', n.visibility, 'tags', pg_catalog.to_jsonb(n.tags),
    'contact_id', n.contact_id, 'key', n.key, 'status', n.status, 'permanent', n.permanent,
    'needs_review', n.needs_review, 'review_reason', n.review_reason, 'access_count', n.access_count,
    'last_accessed_at', n.last_accessed_at, 'valid_from', n.valid_from, 'valid_to', n.valid_to,
    'ref_kind', n.ref_kind, 'ref_id', n.ref_id, 'metadata', n.metadata,
    'embed_status', n.embed_status, 'link_status', n.link_status, 'index_error', n.index_error,
    'created_at', n.created_at, 'updated_at', n.updated_at)
$$;
comment on function cortex.memory_node_json(cortex.memory_nodes) is 'The API representation of a memory or entity node. Inlined into its callers (no SET clause; pg_catalog names only).';
grant execute on function cortex.memory_node_json(cortex.memory_nodes) to authenticated, service_role;

-- Seed 000 in the graph: by trigger, never by the caller ----------------------------------------
-- Definer triggers: an agent logging an interaction may not write entity or event nodes itself
-- (the insert policy refuses ref_kind), yet its interaction must reach the graph.

create or replace function cortex.graph_add_agents(p_rows cortex.agents[]) returns void
language sql volatile security definer set search_path = '' as $$
  insert into cortex.memory_nodes (tenant_id, kind, title, body, source_agent, permanent, importance, ref_kind, ref_id, metadata)
  select a.tenant_id, 'agent', coalesce(a.display_name, a.name), format('Agent %s (role %s)', a.name, a.role),
         a.name, true, 0.7, 'agent', a.name, jsonb_build_object('name', a.name, 'role', a.role)
  from unnest(p_rows) a
  on conflict (tenant_id, ref_kind, ref_id) where ref_kind is not null do nothing
$$;
comment on function cortex.graph_add_agents(cortex.agents[]) is
  'Agents as permanent entity nodes (kind agent, ref agent/<name>); existing ones are kept.';

create or replace function cortex.contact_node_title(c cortex.contacts) returns text
language sql immutable set search_path = '' as $$
  select left(coalesce(nullif(btrim(c.name), ''), c.email), 500)
$$;
comment on function cortex.contact_node_title(cortex.contacts) is 'Title of a contact''s entity node: its name, else its email.';

create or replace function cortex.contact_node_body(c cortex.contacts) returns text
language sql immutable set search_path = '' as $$
  select concat_ws(' · ', c.email, c.company_name, 'stage ' || c.stage,
                   case when c.owner_agent is not null then 'owner ' || c.owner_agent end)
$$;
comment on function cortex.contact_node_body(cortex.contacts) is 'Body of a contact''s entity node: email, company, stage and owner.';

create or replace function cortex.graph_add_contacts(p_rows cortex.contacts[]) returns void
language sql volatile security definer set search_path = '' as $$
  insert into cortex.memory_nodes (tenant_id, kind, title, body, contact_id, tags, importance, ref_kind, ref_id, metadata)
  select c.tenant_id, 'contact', cortex.contact_node_title(c), cortex.contact_node_body(c), c.id, c.tags[1:50], 0.6,
         'contact', c.id::text, jsonb_build_object('email', c.email, 'company_name', c.company_name, 'stage', c.stage)
  from unnest(p_rows) c
  on conflict (tenant_id, ref_kind, ref_id) where ref_kind is not null do nothing
$$;
comment on function cortex.graph_add_contacts(cortex.contacts[]) is
  'Contacts as entity nodes (kind contact, ref contact/<id>); existing ones are kept.';

create or replace function cortex.interaction_node_title(i cortex.interactions) returns text
language sql immutable set search_path = '' as $$
  select left(initcap(replace(i.type, '_', ' ')) || coalesce(': ' || nullif(btrim(i.subject), ''), ''), 500)
$$;
comment on function cortex.interaction_node_title(cortex.interactions) is 'Title of an interaction''s event node: its type and subject.';

create or replace function cortex.graph_add_interactions(p_rows cortex.interactions[]) returns void
language sql volatile security definer set search_path = '' as $$
  with made as (
    insert into cortex.memory_nodes (tenant_id, kind, title, body, source_agent, contact_id, importance, valid_from,
                                     created_at, ref_kind, ref_id, metadata)
    select i.tenant_id, 'event', cortex.interaction_node_title(i), left(coalesce(i.summary, i.raw_content, ''), 1000),
           i.agent, i.contact_id,
           case when i.sentiment = 'escalation' or i.intent = 'churn_risk' then 0.7 else 0.4 end,
           i.occurred_at, i.occurred_at, 'interaction', i.id::text,
           jsonb_strip_nulls(jsonb_build_object('interaction_id', i.id, 'type', i.type, 'direction', i.direction,
                                                'sentiment', i.sentiment, 'intent', i.intent, 'thread_id', i.thread_id))
    from unnest(p_rows) i
    on conflict (tenant_id, ref_kind, ref_id) where ref_kind is not null do nothing
    returning tenant_id, id, contact_id, source_agent
  )
  -- No edge to the agent node: source_agent says who logged it, and an edge per interaction
  -- would make every agent a hub of millions of edges that traversals would have to wade through.
  insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight, created_by)
  select m.tenant_id, m.id, 'applies_to', c.id, 0.8, m.source_agent
  from made m join cortex.memory_nodes c
    on c.tenant_id = m.tenant_id and c.ref_kind = 'contact' and c.ref_id = m.contact_id::text
  on conflict do nothing
$$;
comment on function cortex.graph_add_interactions(cortex.interactions[]) is
  'Interactions as event nodes (ref interaction/<id>, set-based, source_agent = who logged it) that applies_to their contact.';

create or replace function cortex.handoff_node_title(h cortex.handoff_events) returns text
language sql immutable set search_path = '' as $$
  select left(format('Handoff %s -> %s (%s, %s)', h.from_agent, coalesce(h.to_agent, 'human ' || h.to_human_id),
                     replace(h.reason, '_', ' '), h.status), 500)
$$;
comment on function cortex.handoff_node_title(cortex.handoff_events) is 'Title of a handoff''s event node: who to whom, why, and its status.';

create or replace function cortex.graph_add_handoffs(p_rows cortex.handoff_events[]) returns void
language sql volatile security definer set search_path = '' as $$
  with made as (
    insert into cortex.memory_nodes (tenant_id, kind, title, body, source_agent, contact_id, importance, valid_from,
                                     created_at, ref_kind, ref_id, metadata)
    select h.tenant_id, 'event', cortex.handoff_node_title(h), left(h.context_summary, 4000), h.from_agent,
           h.contact_id, case when h.urgency in ('high', 'urgent') then 0.8 else 0.6 end, h.created_at, h.created_at,
           'handoff', h.id::text,
           jsonb_strip_nulls(jsonb_build_object('handoff_id', h.id, 'from_agent', h.from_agent, 'to_agent', h.to_agent,
                                                'to_human_id', h.to_human_id, 'reason', h.reason,
                                                'urgency', h.urgency, 'status', h.status))
    from unnest(p_rows) h
    on conflict (tenant_id, ref_kind, ref_id) where ref_kind is not null do nothing
    returning tenant_id, id, contact_id, metadata
  )
  insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight, created_by)
  select m.tenant_id, m.id, 'applies_to', c.id, 0.8, m.metadata ->> 'from_agent'
  from made m join cortex.memory_nodes c
    on c.tenant_id = m.tenant_id and c.ref_kind = 'contact' and c.ref_id = m.contact_id::text
  union all
  select m.tenant_id, m.id, 'mentions', a.id, 0.6, m.metadata ->> 'from_agent'
  from made m join cortex.memory_nodes a
    on a.tenant_id = m.tenant_id and a.ref_kind = 'agent'
   and a.ref_id in (m.metadata ->> 'from_agent', m.metadata ->> 'to_agent')
  on conflict do nothing
$$;
comment on function cortex.graph_add_handoffs(cortex.handoff_events[]) is
  'Handoffs as event nodes (ref handoff/<id>) that applies_to their contact and mention both agents.';

-- The triggers: definer, because an agent may not write entity or event nodes itself (the insert
-- policy refuses ref_kind), yet what it logs must reach the graph.
create or replace function cortex.graph_sync_rows() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  case tg_table_name
    when 'agents' then perform cortex.graph_add_agents(array(select r::cortex.agents from new_rows r));
    when 'contacts' then perform cortex.graph_add_contacts(array(select r::cortex.contacts from new_rows r));
    when 'interactions' then perform cortex.graph_add_interactions(array(select r::cortex.interactions from new_rows r));
    when 'handoff_events' then perform cortex.graph_add_handoffs(array(select r::cortex.handoff_events from new_rows r));
  end case;
  return null;
end $$;
comment on function cortex.graph_sync_rows() is
  'Trigger (statement, after insert on agents, contacts, interactions, handoff_events): mirrors the new rows into the graph, set-based.';

create or replace function cortex.graph_sync_contact_changes() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  update cortex.memory_nodes n
  set title = cortex.contact_node_title(new), body = cortex.contact_node_body(new), tags = new.tags[1:50],
      metadata = n.metadata || jsonb_build_object('email', new.email, 'company_name', new.company_name, 'stage', new.stage)
  where n.tenant_id = new.tenant_id and n.ref_kind = 'contact' and n.ref_id = new.id::text;
  return null;
end $$;
comment on function cortex.graph_sync_contact_changes() is 'Trigger: a contact''s name, email, company, stage, owner or tags reach its entity node.';

create or replace function cortex.graph_sync_interaction_analysis() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  update cortex.memory_nodes n
  set body = left(i.summary, 4000),
      importance = case when i.sentiment = 'escalation' or i.intent = 'churn_risk' then 0.7 else n.importance end,
      metadata = n.metadata || jsonb_strip_nulls(jsonb_build_object('sentiment', i.sentiment, 'intent', i.intent))
  from new_rows i
  where n.tenant_id = i.tenant_id and n.ref_kind = 'interaction' and n.ref_id = i.id::text
    and i.summary is not null and n.body is distinct from left(i.summary, 4000);
  return null;
end $$;
comment on function cortex.graph_sync_interaction_analysis() is
  'Trigger: an interaction''s summary, sentiment and intent, once written, reach its event node.';

create or replace function cortex.graph_sync_handoff_status() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  update cortex.memory_nodes n
  set title = cortex.handoff_node_title(new), metadata = n.metadata || jsonb_build_object('status', new.status)
  where n.tenant_id = new.tenant_id and n.ref_kind = 'handoff' and n.ref_id = new.id::text;
  return null;
end $$;
comment on function cortex.graph_sync_handoff_status() is 'Trigger: a handoff''s status change reaches its event node.';

revoke execute on function cortex.graph_add_agents(cortex.agents[]), cortex.graph_add_contacts(cortex.contacts[]),
  cortex.graph_add_interactions(cortex.interactions[]), cortex.graph_add_handoffs(cortex.handoff_events[]),
  cortex.graph_sync_rows(), cortex.graph_sync_contact_changes(), cortex.graph_sync_interaction_analysis(),
  cortex.graph_sync_handoff_status() from public, anon, authenticated, service_role;
grant execute on function cortex.contact_node_title(cortex.contacts), cortex.contact_node_body(cortex.contacts),
  cortex.interaction_node_title(cortex.interactions), cortex.handoff_node_title(cortex.handoff_events)
  to authenticated, service_role;

create trigger graph_sync_agents after insert on cortex.agents
  referencing new table as new_rows for each statement execute function cortex.graph_sync_rows();
create trigger graph_sync_contacts after insert on cortex.contacts
  referencing new table as new_rows for each statement execute function cortex.graph_sync_rows();
create trigger graph_sync_interactions after insert on cortex.interactions
  referencing new table as new_rows for each statement execute function cortex.graph_sync_rows();
create trigger graph_sync_handoffs after insert on cortex.handoff_events
  referencing new table as new_rows for each statement execute function cortex.graph_sync_rows();
create trigger graph_sync_contact_changes after update of name, email, company_name, stage, owner_agent, tags
  on cortex.contacts for each row
  when ((old.name, old.email, old.company_name, old.stage, old.owner_agent, old.tags)
        is distinct from (new.name, new.email, new.company_name, new.stage, new.owner_agent, new.tags))
  execute function cortex.graph_sync_contact_changes();
create trigger graph_sync_interaction_analysis after update on cortex.interactions
  referencing new table as new_rows for each statement execute function cortex.graph_sync_interaction_analysis();
create trigger graph_sync_handoff_status after update of status on cortex.handoff_events for each row
  when (old.status is distinct from new.status) execute function cortex.graph_sync_handoff_status();

-- Backfill: rows that predate the triggers ---------------------------------------------------------

create or replace function cortex.backfill_graph(p_tenant_id uuid default null) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_nodes bigint := (select count(*) from cortex.memory_nodes n where p_tenant_id is null or n.tenant_id = p_tenant_id);
  v_edges bigint := (select count(*) from cortex.memory_edges e where p_tenant_id is null or e.tenant_id = p_tenant_id);
begin
  -- The triggers' own functions, fed from the tables; rows that have a node are skipped.
  perform cortex.graph_add_agents(array(select a from cortex.agents a where p_tenant_id is null or a.tenant_id = p_tenant_id));
  perform cortex.graph_add_contacts(array(
    select c from cortex.contacts c where (p_tenant_id is null or c.tenant_id = p_tenant_id)
      and not exists (select from cortex.memory_nodes n
                      where n.tenant_id = c.tenant_id and n.ref_kind = 'contact' and n.ref_id = c.id::text)));
  perform cortex.graph_add_interactions(array(
    select i from cortex.interactions i where (p_tenant_id is null or i.tenant_id = p_tenant_id)
      and not exists (select from cortex.memory_nodes n
                      where n.tenant_id = i.tenant_id and n.ref_kind = 'interaction' and n.ref_id = i.id::text)));
  perform cortex.graph_add_handoffs(array(
    select h from cortex.handoff_events h where (p_tenant_id is null or h.tenant_id = p_tenant_id)
      and not exists (select from cortex.memory_nodes n
                      where n.tenant_id = h.tenant_id and n.ref_kind = 'handoff' and n.ref_id = h.id::text)));
  return jsonb_build_object(
    'nodes_added', (select count(*) from cortex.memory_nodes n where p_tenant_id is null or n.tenant_id = p_tenant_id) - v_nodes,
    'edges_added', (select count(*) from cortex.memory_edges e where p_tenant_id is null or e.tenant_id = p_tenant_id) - v_edges);
end $$;
comment on function cortex.backfill_graph(uuid) is
  'Mirrors existing agents, contacts, interactions and handoffs (of one tenant, or all) into the graph with the triggers'' own functions. Idempotent: rows with a node are skipped. Returns nodes_added and edges_added.';
revoke execute on function cortex.backfill_graph(uuid) from public, anon, authenticated, service_role;

select cortex.backfill_graph();

-- Schedules -------------------------------------------------------------------------------------

do $$
begin
  if to_regnamespace('cron') is not null and to_regprocedure('cron.schedule(text, text, text)') is not null then
    perform cron.schedule('cortex-fold-memory-access', '* * * * *', 'select cortex.fold_memory_access()');
    perform cron.schedule('cortex-fold-graph-changes', '* * * * *', 'select cortex.fold_graph_changes()');
  end if;
end $$;
