-- Consolidation agents (issue 10, seed 003): the set work of the five agents, in SQL. Python
-- (cortex.consolidation) only drives them, asks the model for merged text and writes vault files.
--
--   decay      score = 0.5 x recency + 0.25 x use + 0.25 x strength (cortex.consolidation_decay_score):
--              recency 0.5^(days since last access or creation / half_life_days), use 1 - 0.5^(access_count / 3),
--              strength the greatest decayed weight of the node's edges (supersedes and consolidated_from
--              are history, not strength). Danger zone < 0.35, urgent < 0.10 (first); permanent memories
--              are never candidates. Recommends promote (importance >= 0.8), consolidate (a similar memory
--              is linked: relates_to at or above link_cosine), gc (urgent, importance < 0.5, never used) or
--              reinforce; urgent memories get an item; gc archives (never deletes).
--   cluster    candidate pairs are the auto-linker's relates_to edges between active memories of one
--              kind, scope and contact (no key slot), rescored by the exact cosine of their embeddings,
--              without conflicting numbers or negation; connected components of pairs >= pair_min are
--              clusters (at most max_size members). cohesion = mean pairwise cosine, blended 0.8 / 0.2
--              with the Jaccard overlap of the entities the members link to (when any). Action merge
--              (cohesion >= merge_min), link (>= 0.4) or ignore; an item from 0.4; never two for one set.
--   merge      from consolidation:merge items only: supersedes the originals (status, valid_to) and
--              writes the merged node with consolidated_from edges and the originals' other edges, in one
--              transaction; undo restores the originals and retires the merged node.
--   promote    importance >= 0.7, confidence >= 0.7 and (access_count >= 3 or age >= 7 days): a vault
--              path per memory, recorded once.
--   relations  pairs of active memories linked to a shared entity (not a hub of more than 200 links),
--              with no edge between them in either direction, no conflict and no item yet, that read
--              more alike than the entity's memories do on average: lift = (cosine - the entity's mean
--              cosine) / (1 - it), proposed from 0.2; strength 0.5 x cosine + 0.3 x lift + 0.2 x entity
--              Jaccard, confidence 0.6 + 0.8 x lift.
-- Every writing function refuses a dry run (read-only transaction) first, and links each change to
-- its item (cortex.consolidation_changes).

-- Decay ----------------------------------------------------------------------------------------------

create or replace function cortex.consolidation_decay_score(
  p_access_count int, p_last_at timestamptz, p_strength real, p_half_life_days real, p_permanent boolean,
  p_at timestamptz
) returns real
language sql immutable parallel safe set search_path = '' as $$
  select case when p_permanent then 1::real else (
    0.5 * power(0.5::float8, greatest(extract(epoch from p_at - p_last_at)::float8, 0)
                             / (greatest(coalesce(p_half_life_days, 30), 0.001)::float8 * 86400))
    + 0.25 * (1 - power(0.5::float8, greatest(coalesce(p_access_count, 0), 0)::float8 / 3))
    + 0.25 * least(greatest(coalesce(p_strength, 0), 0), 1))::real end
$$;
comment on function cortex.consolidation_decay_score(int, timestamptz, real, real, boolean, timestamptz) is
  'The decay score of a memory (0..1): 0.5 x recency (0.5 ^ (age since last access or creation / half-life)) + 0.25 x use (1 - 0.5 ^ (access_count / 3)) + 0.25 x strength (its strongest decayed edge). Permanent memories score 1.';

create or replace function cortex.consolidation_decay_candidates(
  p_ids uuid[] default null, p_limit int default 1000, p_at timestamptz default now(), p_threshold real default 0.35
) returns table (memory_id uuid, score real, urgency text, action text, confidence real, importance real,
                 access_count int, strength real, similar boolean)
language plpgsql stable set search_path = '' set jit = off as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_cfg cortex.memory_settings;
begin
  select * into v_cfg from cortex.memory_settings s where s.tenant_id = v_tenant;
  return query
  with nodes as (
    select n.id, n.importance, n.access_count, greatest(n.created_at, n.last_accessed_at) as last_at
    from cortex.memory_nodes n
    where n.tenant_id = v_tenant and n.status = 'active' and not n.permanent and n.ref_kind is null
      and n.kind = any (cortex.memory_kinds())
      and (p_ids is null or n.id = any (p_ids))
      -- Analysed before: an item of the decay agent exists for it (whatever its status).
      and (p_ids is not null or not exists (
        select from cortex.consolidation_items i
        where i.tenant_id = v_tenant and i.agent = 'decay' and i.memory_ids @> array[n.id]))
  ), ends as (
    select x.id, e.relation, e.weight, e.last_reinforced_at, o.permanent
    from nodes x
    join cortex.memory_edges e on e.tenant_id = v_tenant and e.source_id = x.id
    join cortex.memory_nodes o on o.tenant_id = v_tenant and o.id = e.target_id
    where e.relation not in ('supersedes', 'consolidated_from')
    union all
    select x.id, e.relation, e.weight, e.last_reinforced_at, o.permanent
    from nodes x
    join cortex.memory_edges e on e.tenant_id = v_tenant and e.target_id = x.id
    join cortex.memory_nodes o on o.tenant_id = v_tenant and o.id = e.source_id
    where e.relation not in ('supersedes', 'consolidated_from')
  ), strength as (
    select d.id, max(d.w) as s, bool_or(d.relation = 'relates_to' and d.w >= v_cfg.link_cosine) as similar
    from (select en.id, en.relation,
                 cortex.decayed_weight(en.weight, en.last_reinforced_at, v_cfg.half_life_days, en.permanent, p_at) as w
          from ends en) d
    group by d.id
  ), scored as (
    select x.id, x.importance, x.access_count, coalesce(st.s, 0)::real as s, coalesce(st.similar, false) as similar,
           cortex.consolidation_decay_score(x.access_count, x.last_at, st.s, v_cfg.half_life_days, false, p_at) as score
    from nodes x left join strength st on st.id = x.id
  )
  select sc.id, sc.score,
         case when sc.score < 0.10 then 'high' when sc.score < 0.20 then 'medium' else 'low' end,
         case when sc.importance >= 0.8 then 'promote'
              when sc.similar then 'consolidate'
              when sc.score < 0.10 and sc.importance < 0.5 and sc.access_count = 0 then 'gc'
              else 'reinforce' end,
         round((1 - sc.score)::numeric, 4)::real,
         sc.importance, sc.access_count, sc.s, sc.similar
  from scored sc
  where p_ids is not null or sc.score < p_threshold
  order by sc.score, sc.id
  limit case when p_ids is null then p_limit end;
end $$;
comment on function cortex.consolidation_decay_candidates(uuid[], int, timestamptz, real) is
  'Decay scan (p_ids null): active, non-permanent written memories scoring below p_threshold (danger zone 0.35) that no decay item names yet, lowest score (most urgent) first, at most p_limit. With p_ids: the score of those memories. '
  'Each with score, urgency (high < 0.10, medium < 0.20, low), the recommended action (promote, consolidate, gc, reinforce), confidence (1 - score), importance, access_count, strength, similar. Reads only.';

create or replace function cortex.consolidation_archive(p_item_id uuid, p_agent text, p_node_id uuid, p_reason text,
                                                        p_run_id uuid default null)
returns boolean
language plpgsql volatile set search_path = '' as $$
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_node cortex.memory_nodes;
begin
  perform cortex.consolidation_check_write();
  select * into v_node from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = p_node_id for update;
  if not found or v_node.status <> 'active' or v_node.permanent or v_node.ref_kind is not null then
    return false;
  end if;
  update cortex.memory_nodes n
  set status = 'archived', valid_to = coalesce(n.valid_to, greatest(now(), n.valid_from)),
      metadata = n.metadata || jsonb_build_object('archived_by', 'consolidation', 'consolidation_item', p_item_id,
                                                  'archived_reason', left(p_reason, 500))
  where n.tenant_id = v_tenant and n.id = p_node_id;
  perform cortex.consolidation_record_change(p_item_id, p_agent, 'node_archived', p_node_id,
                                             jsonb_build_object('status', v_node.status, 'valid_to', v_node.valid_to),
                                             jsonb_build_object('status', 'archived', 'reason', left(p_reason, 500)),
                                             null, null, p_run_id);
  return true;
end $$;
comment on function cortex.consolidation_archive(uuid, text, uuid, text, uuid) is
  'gc: archives an active, non-permanent written memory (status archived, valid_to set, why in metadata) and records the change against the item; never deletes. False when the node is not archivable any more.';

create or replace function cortex.consolidation_decay_process(
  p_ids uuid[], p_run_id uuid default null, p_dry_run boolean default false, p_auto real default 0.9,
  p_at timestamptz default now()
) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  r record;
  v_missing uuid;
  v_item jsonb;
  v_item_id uuid;
  v_out jsonb := '[]';
  v_applied boolean;
begin
  if not p_dry_run then
    perform cortex.consolidation_check_write();
  end if;
  select m into v_missing from unnest(p_ids) m
  where not exists (select from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = m) limit 1;
  if v_missing is not null then
    perform cortex.memory_not_found(v_missing);
  end if;
  select n.id into v_missing from cortex.memory_nodes n
  where n.tenant_id = v_tenant and n.id = any (p_ids) and n.permanent limit 1;
  if v_missing is not null then
    raise exception 'memory % is permanent: permanent memories never decay', v_missing
      using errcode = '22023', column = 'memory_id';
  end if;
  for r in select * from cortex.consolidation_decay_candidates(p_ids, null, p_at) loop
    v_item_id := null;
    v_applied := false;
    if r.urgency = 'high' and not p_dry_run then
      v_item := cortex.consolidation_create_item(
        'decay', array[r.memory_id], r.action, 'high',
        format('Decay: memory %s is fading (score %s): %s', r.memory_id, round(r.score::numeric, 3), r.action),
        jsonb_build_object('score', r.score, 'strength', r.strength, 'importance', r.importance,
                           'access_count', r.access_count),
        r.confidence, p_run_id);
      v_item_id := (v_item -> 'item' ->> 'id')::uuid;
      if r.action = 'gc' and r.confidence >= p_auto and (v_item -> 'item' ->> 'status') = 'open' then
        perform cortex.consolidation_apply_item(v_item_id, p_run_id);
        v_applied := true;
      end if;
    end if;
    v_out := v_out || jsonb_build_object('memory_id', r.memory_id, 'score', round(r.score::numeric, 4),
                                         'urgency', r.urgency, 'action', r.action, 'beads_issue_id', v_item_id,
                                         'confidence', r.confidence, 'applied', v_applied);
  end loop;
  -- Memories no longer active (merged or archived since the scan): nothing to decay.
  return v_out;
end $$;
comment on function cortex.consolidation_decay_process(uuid[], uuid, boolean, real, timestamptz) is
  'Decay process of a batch of memories: score, urgency, action; an item (urgency high) for each urgent one, and gc applied at once (archived) when its confidence reaches p_auto. Unknown ids are P0002, permanent ones 22023 (naming memory_id). '
  'p_dry_run: computes without writing (beads_issue_id null). Returns [{memory_id, score, urgency, action, beads_issue_id, confidence, applied}].';

-- Cluster --------------------------------------------------------------------------------------------

create or replace function cortex.consolidation_other_subjects(p_tenant_id uuid, p_a uuid, p_b uuid) returns boolean
language sql stable set search_path = '' as $$
  -- Both link entities (mentions, applies_to), and none in common.
  select exists (select from cortex.memory_edges e join cortex.memory_nodes n on n.tenant_id = e.tenant_id and n.id = e.target_id
                 where e.tenant_id = p_tenant_id and e.source_id = p_a and e.relation in ('mentions', 'applies_to')
                   and n.kind = any (cortex.entity_kinds()))
     and exists (select from cortex.memory_edges e join cortex.memory_nodes n on n.tenant_id = e.tenant_id and n.id = e.target_id
                 where e.tenant_id = p_tenant_id and e.source_id = p_b and e.relation in ('mentions', 'applies_to')
                   and n.kind = any (cortex.entity_kinds()))
     and not exists (select from cortex.memory_edges e1
                     join cortex.memory_edges e2 on e2.tenant_id = e1.tenant_id and e2.target_id = e1.target_id
                      and e2.source_id = p_b and e2.relation in ('mentions', 'applies_to')
                     where e1.tenant_id = p_tenant_id and e1.source_id = p_a and e1.relation in ('mentions', 'applies_to'))
$$;
comment on function cortex.consolidation_other_subjects(uuid, uuid, uuid) is
  'True when two memories are about different subjects: both link entities (mentions, applies_to) and share none. Such a pair is never clustered however alike it reads ("Acme pays in 30 days", "Globex pays in 30 days").';

create or replace function cortex.consolidation_cluster_candidates(
  p_seed uuid default null, p_limit int default 200, p_pair_min real default 0.8, p_max_size int default 8,
  p_merge_min real default 0.85
) returns table (cluster_id uuid, seed_id uuid, memory_ids uuid[], cohesion real, mean_cosine real,
                 shared_entities text[], action text, confidence real)
language plpgsql stable set search_path = '' set jit = off as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.consolidation_require_admin();
begin
  -- No temporary tables: a dry run's read-only transaction runs this too.
  return query
  with recursive close_pairs as materialized (
    -- Candidate pairs: the auto-linker's relates_to edges, rescored by the exact cosine.
    select least(p.source_id, p.target_id) as a, greatest(p.source_id, p.target_id) as b
    from (
      select e.source_id, e.target_id, x.title || ' ' || x.body as xt, y.title || ' ' || y.body as yt,
             (1 - (x.embedding operator(extensions.<=>) y.embedding))::real as cos
      from cortex.memory_edges e
      join cortex.memory_nodes x on x.tenant_id = v_tenant and x.id = e.source_id
      join cortex.memory_nodes y on y.tenant_id = v_tenant and y.id = e.target_id
      where e.tenant_id = v_tenant and e.relation = 'relates_to'
        and x.status = 'active' and y.status = 'active' and x.ref_kind is null and y.ref_kind is null
        and x.key is null and y.key is null and x.kind = y.kind and x.scope = y.scope
        and x.contact_id is not distinct from y.contact_id and x.kind = any (cortex.memory_kinds())
        and x.embedding is not null and y.embedding is not null
    ) p
    where p.cos >= p_pair_min and cortex.memory_conflict(p.xt, p.yt) is null
    group by 1, 2
  ), pairs as materialized (
    -- Only for the close pairs (a materialized step, so the check is not run on every edge).
    select c.a, c.b from close_pairs c where not cortex.consolidation_other_subjects(v_tenant, c.a, c.b)
  ), adjacent as materialized (
    select a as id, b as other from pairs union select b, a from pairs
  ), reach (root, id, depth) as (
    -- Breadth-first from every node, at most p_max_size steps: a connected component of more
    -- than p_max_size nodes shows more than p_max_size nodes from every root, and is dropped.
    select distinct j.id, j.id, 0 from adjacent j
    union
    select r.root, j.other, r.depth + 1
    from reach r join adjacent j on j.id = r.id
    where r.depth < p_max_size
  ), reached as (
    select r.root, array_agg(distinct r.id order by r.id) as ids from reach r group by r.root
  ), comps as (
    select distinct x.ids[1] as l, x.ids from reached x
    where cardinality(x.ids) between 2 and p_max_size
  ), chosen as (
    select c.* from comps c
    where (p_seed is null or p_seed = any (c.ids))
      -- Pending work on a member: not clustered again; a set clustered before: never twice.
      and not exists (select from cortex.consolidation_items i
                      where i.tenant_id = v_tenant and i.agent in ('cluster', 'merge')
                        and i.status in ('open', 'in_progress', 'blocked') and i.memory_ids && c.ids)
      and not exists (select from cortex.consolidation_items i
                      where i.tenant_id = v_tenant and i.agent = 'cluster' and i.memory_ids = c.ids)
  ), cos as (
    select c.l, avg(1 - (x.embedding operator(extensions.<=>) y.embedding))::real as mean_cos
    from chosen c
    cross join lateral unnest(c.ids) a(id)
    cross join lateral unnest(c.ids) b(id)
    join cortex.memory_nodes x on x.tenant_id = v_tenant and x.id = a.id
    join cortex.memory_nodes y on y.tenant_id = v_tenant and y.id = b.id
    where a.id < b.id
    group by c.l
  ), ent as (
    select c.l, m.id as member, en.title as name
    from chosen c cross join lateral unnest(c.ids) m(id)
    join cortex.memory_edges e on e.tenant_id = v_tenant and e.source_id = m.id and e.relation in ('mentions', 'applies_to')
    join cortex.memory_nodes en on en.tenant_id = v_tenant and en.id = e.target_id
     and en.kind = any (cortex.entity_kinds())
  ), overlap as (
    select c.l,
           (select count(distinct x.name) from ent x where x.l = c.l) as any_n,
           (select array_agg(s.name order by s.name) from (
              select x.name from ent x where x.l = c.l group by x.name
              having count(distinct x.member) = cardinality(c.ids)) s) as shared
    from chosen c
  ), scored as (
    select c.l, c.ids, co.mean_cos, o.shared,
           case when o.any_n = 0 then co.mean_cos
                else 0.8 * co.mean_cos + 0.2 * coalesce(cardinality(o.shared), 0)::real / o.any_n end::real as cohesion
    from chosen c join cos co on co.l = c.l join overlap o on o.l = c.l
  )
  select md5('cluster:' || array_to_string(s.ids, ','))::uuid, s.l, s.ids, round(s.cohesion::numeric, 4)::real,
         round(s.mean_cos::numeric, 4)::real, coalesce(s.shared, '{}'),
         case when s.cohesion >= p_merge_min then 'merge' when s.cohesion >= 0.4 then 'link' else 'ignore' end,
         round(least(greatest(s.cohesion, 0), 1)::numeric, 4)::real
  from scored s
  order by s.cohesion desc, s.l
  limit p_limit;
end $$;
comment on function cortex.consolidation_cluster_candidates(uuid, int, real, int, real) is
  'Cluster scan: components of the relates_to pairs between active written memories of one kind, scope and contact (no key) whose exact cosine is at least p_pair_min, whose numbers and negation agree and that are not about different entities (cortex.consolidation_other_subjects), of 2..p_max_size members, '
  'that no pending item names and that were never clustered as this set; with p_seed only the one holding it. cohesion = mean pairwise cosine, 0.8 / 0.2 with the entity overlap (entities all members link to / any). '
  'action merge (cohesion >= p_merge_min), link (>= 0.4) or ignore; confidence = cohesion. Most cohesive first, at most p_limit. Reads only (a dry run''s read-only transaction runs it).';

create or replace function cortex.consolidation_cluster_process(
  p_clusters jsonb, p_run_id uuid default null, p_dry_run boolean default false, p_auto real default 0.9
) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  c jsonb;
  v_ids uuid[];
  v_item jsonb;
  v_item_id uuid;
  v_out jsonb := '[]';
  v_cohesion real;
  v_action text;
begin
  if not p_dry_run then
    perform cortex.consolidation_check_write();
  end if;
  if jsonb_typeof(p_clusters) is distinct from 'array' then
    raise exception 'clusters must be a JSON array' using errcode = '22023', column = 'clusters';
  end if;
  for c in select * from jsonb_array_elements(p_clusters) loop
    v_ids := array(select (x #>> '{}')::uuid from jsonb_array_elements(c -> 'memory_ids') x order by 1);
    v_cohesion := (c ->> 'cohesion')::real;
    v_action := c ->> 'action';
    perform cortex.check_enum('action', v_action, array['merge', 'link', 'ignore']);
    v_item_id := null;
    if v_cohesion >= 0.4 and not p_dry_run then
      v_item := cortex.consolidation_create_item(
        'cluster', v_ids, v_action, case when v_action = 'merge' then 'medium' else 'low' end,
        format('Cluster of %s similar memories (cohesion %s): %s', cardinality(v_ids), round(v_cohesion::numeric, 3),
               v_action),
        jsonb_build_object('cohesion', v_cohesion, 'mean_cosine', c -> 'mean_cosine',
                           'shared_entities', coalesce(c -> 'shared_entities', '[]'), 'cluster_id', c -> 'cluster_id'),
        (c ->> 'confidence')::real, p_run_id,
        case when v_action = 'merge' then array['consolidation:merge'] else '{}' end);
      v_item_id := (v_item -> 'item' ->> 'id')::uuid;
      if v_action = 'link' and (c ->> 'confidence')::real >= p_auto and (v_item -> 'item' ->> 'status') = 'open' then
        perform cortex.consolidation_apply_item(v_item_id, p_run_id);
      end if;
    end if;
    v_out := v_out || jsonb_build_object('cluster_id', c -> 'cluster_id', 'memory_ids', to_jsonb(v_ids),
                                         'cohesion', v_cohesion, 'action', v_action,
                                         'confidence', (c ->> 'confidence')::real, 'beads_issue_id', v_item_id);
  end loop;
  return v_out;
end $$;
comment on function cortex.consolidation_cluster_process(jsonb, uuid, boolean, real) is
  'Cluster process of a batch of candidates [{cluster_id, memory_ids, cohesion, mean_cosine, shared_entities, action, confidence}]: an item for each with cohesion >= 0.4 (label consolidation:merge when the action is merge, for the merge agent; the same set is never two items); '
  'a link cluster whose confidence reaches p_auto is linked at once (relates_to between its members). p_dry_run writes nothing. Returns the ClusterResults.';

-- Applying an item: decay gc, cluster links, relations --------------------------------------------------

create or replace function cortex.consolidation_apply_item(p_item_id uuid, p_run_id uuid default null) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_item cortex.consolidation_items;
  v_reason text;
  v_from uuid;
  v_to uuid;
  v_relation_id uuid;
  v_n int := 0;
  p record;
begin
  perform cortex.consolidation_check_write();
  select * into v_item from cortex.consolidation_items i where i.tenant_id = v_tenant and i.id = p_item_id for update;
  if not found then
    perform cortex.consolidation_item_not_found(p_item_id);
  end if;
  if v_item.status not in ('open', 'in_progress') then
    raise exception 'item % is %: only an open or claimed item is applied', p_item_id, v_item.status
      using errcode = '55000', column = 'item_id';
  end if;
  if 'consolidation:merge' = any (v_item.labels) or v_item.agent in ('merge', 'promote') then
    raise exception 'item % is processed by the % agent, not applied in SQL', p_item_id,
      case when v_item.agent = 'promote' then 'promote' else 'merge' end
      using errcode = '22023', column = 'item_id', hint = 'run `cortex consolidate process ITEM`';
  end if;
  case v_item.agent
    when 'decay' then
      if v_item.action = 'gc' then
        if cortex.consolidation_archive(v_item.id, 'decay', v_item.memory_ids[1], 'decay gc: ' || v_item.title, p_run_id) then
          v_reason := 'gc: archived (nothing deleted)';
        else
          v_reason := 'gc: the memory was no longer active; nothing changed';
        end if;
      else
        v_reason := format('recommendation recorded: %s', v_item.action);
      end if;
    when 'cluster' then
      for p in
        select a.id as a, b.id as b from unnest(v_item.memory_ids) a(id) cross join unnest(v_item.memory_ids) b(id)
        where a.id < b.id
          and not exists (select from cortex.memory_edges e where e.tenant_id = v_tenant
                          and ((e.source_id = a.id and e.target_id = b.id) or (e.source_id = b.id and e.target_id = a.id)))
          and exists (select from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = a.id and n.status = 'active')
          and exists (select from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = b.id and n.status = 'active')
      loop
        insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight, created_by, metadata)
        values (v_tenant, p.a, 'relates_to', p.b, least(1, greatest(coalesce(v_item.confidence, 0.5), 0)),
                cortex.current_agent(), jsonb_build_object('by', 'consolidation', 'consolidation_item', v_item.id));
        perform cortex.consolidation_record_change(v_item.id, 'cluster', 'edge_added', p.a, null,
                                                   jsonb_build_object('weight', v_item.confidence), 'relates_to', p.b,
                                                   p_run_id);
        v_n := v_n + 1;
      end loop;
      v_reason := format('linked: %s relates_to edge(s) added', v_n);
    when 'relations' then
      v_from := (v_item.notes ->> 'from_memory_id')::uuid;
      v_to := (v_item.notes ->> 'to_memory_id')::uuid;
      if v_from is null or v_to is null then
        raise exception 'relations item % names no pair', p_item_id using errcode = '22023', column = 'item_id';
      end if;
      if exists (select from cortex.memory_edges e where e.tenant_id = v_tenant
                 and ((e.source_id = v_from and e.target_id = v_to) or (e.source_id = v_to and e.target_id = v_from))) then
        v_reason := 'already related: nothing added';
      elsif (select count(*) from cortex.memory_nodes n
             where n.tenant_id = v_tenant and n.id in (v_from, v_to) and n.status = 'active') < 2 then
        v_reason := 'a memory of the pair is no longer active: nothing added';
      else
        v_relation_id := cortex.consolidation_relation_id(v_from, v_to);
        insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight, created_by, metadata)
        values (v_tenant, v_from, 'relates_to', v_to, least(1, greatest((v_item.notes ->> 'strength')::real, 0)),
                cortex.current_agent(),
                jsonb_build_object('by', 'consolidation', 'consolidation_item', v_item.id,
                                   'reasoning', left(v_item.notes ->> 'reasoning', 1000),
                                   'confidence', v_item.confidence));
        insert into cortex.consolidation_changes (tenant_id, id, item_id, run_id, agent, change, node_id, relation,
                                                  target_id, after, created_by)
        values (v_tenant, v_relation_id, v_item.id, p_run_id, 'relations', 'edge_added', v_from, 'relates_to', v_to,
                jsonb_build_object('weight', (v_item.notes ->> 'strength')::real), cortex.current_agent());
        v_reason := format('related: %s relates_to %s', v_from, v_to);
      end if;
  end case;
  update cortex.consolidation_items i
  set status = 'closed', close_reason = v_reason, closed_at = clock_timestamp(),
      claimed_by = coalesce(i.claimed_by, cortex.current_agent()), claimed_at = coalesce(i.claimed_at, clock_timestamp()),
      notes = i.notes || jsonb_build_object('close_reason', v_reason)
  where i.tenant_id = v_tenant and i.id = v_item.id
  returning i.* into v_item;
  return cortex.consolidation_item_json(v_item);
end $$;
comment on function cortex.consolidation_apply_item(uuid, uuid) is
  'Applies an open or claimed item of the decay (gc archives; other actions are recorded), cluster (link: relates_to between members not yet joined) or relations agent (the pair''s relates_to edge, once), records each change against it and closes it with the reason. '
  'Merge and promote items are the Python agents'' (22023); a blocked or closed item is 55000. Refused in a dry run. Returns the item.';

-- Merge ----------------------------------------------------------------------------------------------

create or replace function cortex.consolidation_merge_material(p_item_id uuid) returns jsonb
language plpgsql stable set search_path = '' as $$
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_item cortex.consolidation_items;
begin
  select * into v_item from cortex.consolidation_items i where i.tenant_id = v_tenant and i.id = p_item_id;
  if not found then
    perform cortex.consolidation_item_not_found(p_item_id);
  end if;
  if not ('consolidation:merge' = any (v_item.labels)) then
    raise exception 'item % is not a consolidation:merge item (agent %, action %)', p_item_id, v_item.agent, v_item.action
      using errcode = '22023', column = 'item_id', hint = 'the merge agent only processes items labelled consolidation:merge';
  end if;
  if cardinality(v_item.memory_ids) < 2 then
    raise exception 'merge item % names fewer than two memories', p_item_id using errcode = '22023', column = 'item_id';
  end if;
  return jsonb_build_object(
    'item', cortex.consolidation_item_json(v_item),
    'members', coalesce((
      select jsonb_agg(jsonb_build_object(
               'id', n.id, 'kind', n.kind, 'title', n.title, 'body', n.body, 'importance', n.importance,
               'confidence', n.confidence, 'access_count', n.access_count, 'status', n.status,
               'created_at', n.created_at,
               'entities', coalesce((select jsonb_agg(distinct en.title)
                                     from cortex.memory_edges e
                                     join cortex.memory_nodes en on en.tenant_id = v_tenant and en.id = e.target_id
                                     where e.tenant_id = v_tenant and e.source_id = n.id
                                       and e.relation in ('mentions', 'applies_to')
                                       and en.kind = any (cortex.entity_kinds())), '[]'))
             order by n.importance desc, n.access_count desc, n.created_at, n.id)
      from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = any (v_item.memory_ids)), '[]'));
end $$;
comment on function cortex.consolidation_merge_material(uuid) is
  'What the merge agent needs of a consolidation:merge item: the item and its members (id, kind, title, body, importance, confidence, access_count, status, created_at, entities = names of the entity nodes they mention or apply to), most important first. 22023 for an item that is not a merge item, 404 for an unknown one.';

create or replace function cortex.consolidation_merge_apply(
  p_item_id uuid, p_title text, p_body text, p_entities text[], p_content_diff text, p_model text,
  p_run_id uuid default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_agent text;
  v_item cortex.consolidation_items;
  v_members cortex.memory_nodes[];
  v_bad cortex.memory_nodes;
  v_kind text;
  v_scope text;
  v_visibility text;
  v_source text;
  v_contact uuid;
  v_tags text[];
  v_new uuid;
  v_now timestamptz := now();
  v_relations uuid[] := '{}';
  v_change uuid;
  m cortex.memory_nodes;
  v_result jsonb;
  v_constraint text;
begin
  perform cortex.consolidation_check_write();
  v_agent := cortex.require_writer();
  select * into v_item from cortex.consolidation_items i where i.tenant_id = v_tenant and i.id = p_item_id for update;
  if not found then
    perform cortex.consolidation_item_not_found(p_item_id);
  end if;
  if not ('consolidation:merge' = any (v_item.labels)) then
    raise exception 'item % is not a consolidation:merge item', p_item_id using errcode = '22023', column = 'item_id';
  end if;
  if v_item.status <> 'in_progress' then
    raise exception 'item % is %: claim it before merging', p_item_id, v_item.status
      using errcode = '55000', column = 'item_id';
  end if;
  perform cortex.memory_check_fields(p_title, p_body, null, null, null, 'shared', null, null);
  if p_content_diff is null or length(p_content_diff) > 100000 then
    raise exception 'content_diff is required (at most 100000 characters)' using errcode = '22023', column = 'content_diff';
  end if;
  -- The originals, locked in id order (lock order: memory nodes, then edges).
  select array_agg(n order by n.id) into v_members from (
    select n.* from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = any (v_item.memory_ids)
    order by n.id for update) n;
  if coalesce(cardinality(v_members), 0) <> cardinality(v_item.memory_ids) then
    raise exception 'a memory of item % is gone or not visible', p_item_id using errcode = 'P0002', column = 'memory_ids';
  end if;
  select * into v_bad from unnest(v_members) x where x.status <> 'active' limit 1;
  if v_bad.id is not null then
    raise exception 'memory % is % since the item was made: nothing merged', v_bad.id, v_bad.status
      using errcode = '55000', column = 'memory_ids', hint = 'the cluster agent will find the memories again';
  end if;
  if (select count(distinct x.scope) from unnest(v_members) x) > 1 then
    raise exception 'the memories of item % are in different scopes', p_item_id using errcode = '22023', column = 'memory_ids';
  end if;
  -- The merged node: the most common kind (the most important member's on a tie), the greatest importance and
  -- confidence, every tag (at most 50), the contact all share, the source agent all share (else the caller).
  select x.kind into v_kind from unnest(v_members) x group by x.kind order by count(*) desc, max(x.importance) desc, x.kind limit 1;
  v_scope := v_members[1].scope;
  v_visibility := v_members[1].visibility;
  v_source := case when (select count(distinct x.source_agent) from unnest(v_members) x) = 1
                   and (select count(*) from unnest(v_members) x where x.source_agent is null) = 0
                   then v_members[1].source_agent else v_agent end;
  if v_visibility = 'private' then
    v_source := v_scope;
  end if;
  v_contact := case when (select count(distinct x.contact_id) from unnest(v_members) x) = 1
                     and (select count(*) from unnest(v_members) x where x.contact_id is null) = 0
                    then v_members[1].contact_id end;
  v_tags := array(select distinct t from unnest(v_members) x cross join lateral unnest(x.tags) t order by t limit 50);

  -- 1. Supersede the originals (their exact-content slot is freed for the merged text).
  update cortex.memory_nodes n
  set status = 'superseded', valid_to = greatest(coalesce(least(n.valid_to, v_now), v_now), n.valid_from),
      metadata = n.metadata || jsonb_build_object('merged_by', 'consolidation', 'consolidation_item', v_item.id)
  where n.tenant_id = v_tenant and n.id = any (v_item.memory_ids);
  -- 2. The merged node.
  begin
    insert into cortex.memory_nodes as n (tenant_id, kind, title, body, importance, confidence, source_agent, visibility,
                                          tags, contact_id, valid_from, metadata)
    values (v_tenant, v_kind, btrim(p_title), p_body, (select max(x.importance) from unnest(v_members) x),
            (select max(x.confidence) from unnest(v_members) x), v_source, v_visibility, v_tags, v_contact, v_now,
            jsonb_build_object('consolidated_from', to_jsonb(v_item.memory_ids), 'consolidation_item', v_item.id,
                               'merged_by', coalesce(p_model, 'deterministic'), 'entities', to_jsonb(p_entities)))
    returning n.id into v_new;
  exception when unique_violation then
    get stacked diagnostics v_constraint = constraint_name;
    raise exception 'an active memory with the merged content exists already' using errcode = '23505',
      column = 'body', detail = format('constraint %s', v_constraint), hint = 'close the item: the memories are merged there';
  end;
  perform cortex.consolidation_record_change(v_item.id, 'merge', 'node_created', v_new, null,
    jsonb_build_object('title', btrim(p_title), 'body', p_body, 'kind', v_kind, 'model', coalesce(p_model, 'deterministic'),
                       'content_diff', p_content_diff), null, null, p_run_id);
  foreach m in array v_members loop
    perform cortex.consolidation_record_change(v_item.id, 'merge', 'node_superseded', m.id,
      jsonb_build_object('status', m.status, 'valid_to', m.valid_to),
      jsonb_build_object('status', 'superseded', 'merged_into', v_new), null, null, p_run_id);
  end loop;
  -- 3. Why the originals ended: merged -consolidated_from-> each original.
  for m in select * from unnest(v_members) loop
    insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight, created_by, metadata)
    values (v_tenant, v_new, 'consolidated_from', m.id, 1, v_agent,
            jsonb_build_object('by', 'consolidation', 'consolidation_item', v_item.id));
    v_change := cortex.consolidation_record_change(v_item.id, 'merge', 'edge_added', v_new, null,
                                                   jsonb_build_object('weight', 1), 'consolidated_from', m.id, p_run_id);
    v_relations := v_relations || v_change;
  end loop;
  -- 4. The originals' other edges, carried over to the merged node (the greater weight when it has one).
  insert into cortex.memory_edges as e (tenant_id, source_id, relation, target_id, weight, created_by, metadata,
                                        last_reinforced_at)
  select v_tenant, x.source_id, x.relation, x.target_id, max(x.weight), v_agent,
         jsonb_build_object('by', 'consolidation', 'consolidation_item', v_item.id), max(x.last_reinforced_at)
  from (
    select v_new as source_id, e.relation, e.target_id, e.weight, e.last_reinforced_at
    from cortex.memory_edges e
    where e.tenant_id = v_tenant and e.source_id = any (v_item.memory_ids) and not (e.target_id = any (v_item.memory_ids))
      and e.relation not in ('supersedes', 'consolidated_from')
    union all
    select e.source_id, e.relation, v_new, e.weight, e.last_reinforced_at
    from cortex.memory_edges e
    where e.tenant_id = v_tenant and e.target_id = any (v_item.memory_ids) and not (e.source_id = any (v_item.memory_ids))
      and e.relation not in ('supersedes', 'consolidated_from') and e.source_id <> v_new
  ) x
  where x.source_id <> x.target_id
  group by x.source_id, x.relation, x.target_id
  on conflict (tenant_id, source_id, relation, target_id) do update set weight = greatest(e.weight, excluded.weight);

  v_result := jsonb_build_object('new_memory_id', v_new, 'source_ids', to_jsonb(v_item.memory_ids),
                                 'relation_ids', to_jsonb(v_relations), 'content_diff', p_content_diff,
                                 'entities_preserved', coalesce(cardinality(p_entities), 0), 'success', true,
                                 'beads_issue_id', v_item.id);
  update cortex.consolidation_items i
  set status = 'closed', closed_at = clock_timestamp(), close_reason = format('merged into %s', v_new),
      result = v_result, notes = i.notes || jsonb_build_object('merged_into', v_new, 'model', coalesce(p_model, 'deterministic'))
  where i.tenant_id = v_tenant and i.id = v_item.id;
  return v_result;
end $$;
comment on function cortex.consolidation_merge_apply(uuid, text, text, text[], text, text, uuid) is
  'Merges a claimed consolidation:merge item in one transaction: the originals (locked in id order, all still active, else 55000) are superseded (status, valid_to; never deleted), the merged node is written (most common kind, greatest importance and confidence, all tags, shared contact and source agent), '
  'with consolidated_from edges to each original and the originals'' other edges carried over; every change is recorded against the item (the content diff with the node), which is closed. Returns the MergeResult {new_memory_id, source_ids, relation_ids, content_diff, entities_preserved, success, beads_issue_id}.';

create or replace function public.undo_consolidation_merge(item_id uuid, reason text default null) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_agent text;
  v_item cortex.consolidation_items;
  v_new uuid;
  v_node cortex.memory_nodes;
  v_bad uuid;
  v_constraint text;
  m uuid;
begin
  perform cortex.consolidation_check_write();
  v_agent := cortex.require_writer();
  if length(reason) > 1000 then
    raise exception 'reason must be at most 1000 characters' using errcode = '22023', column = 'reason';
  end if;
  select * into v_item from cortex.consolidation_items i where i.tenant_id = v_tenant and i.id = item_id for update;
  if not found then
    perform cortex.consolidation_item_not_found(item_id);
  end if;
  v_new := (v_item.notes ->> 'merged_into')::uuid;
  if not ('consolidation:merge' = any (v_item.labels)) or v_new is null then
    raise exception 'item % did not merge anything: there is nothing to undo', item_id
      using errcode = '55000', column = 'item_id';
  end if;
  if v_item.notes ? 'undone_at' then
    raise exception 'the merge of item % was undone already', item_id using errcode = '55000', column = 'item_id';
  end if;
  select * into v_node from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = v_new for update;
  if not found or v_node.status <> 'active' then
    raise exception 'the merged memory % is no longer active: undo it there first', v_new
      using errcode = '55000', column = 'item_id', hint = 'it was superseded or forgotten after the merge';
  end if;
  perform 1 from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = any (v_item.memory_ids)
  order by n.id for update;
  select n.id into v_bad from cortex.memory_nodes n
  where n.tenant_id = v_tenant and n.id = any (v_item.memory_ids)
    and not (n.status = 'superseded' and (n.metadata ->> 'consolidation_item')::uuid = v_item.id) limit 1;
  if v_bad is not null then
    raise exception 'memory % was changed after the merge: nothing undone', v_bad using errcode = '55000',
      column = 'memory_ids';
  end if;
  -- Retire the merged node first (its content slot is freed), then restore the originals.
  update cortex.memory_nodes n
  set status = 'archived', valid_to = greatest(now(), n.valid_from),
      metadata = n.metadata || jsonb_strip_nulls(jsonb_build_object('undone_by', v_agent, 'undone_at', now(),
                                                                    'undone_reason', reason))
  where n.tenant_id = v_tenant and n.id = v_new;
  perform cortex.consolidation_record_change(v_item.id, 'merge', 'node_retired', v_new,
    jsonb_build_object('status', 'active'), jsonb_build_object('status', 'archived', 'reason', reason));
  begin
    update cortex.memory_nodes n
    set status = 'active', valid_to = null, metadata = n.metadata - 'merged_by' - 'consolidation_item'
                                                        || jsonb_build_object('merge_undone', v_item.id)
    where n.tenant_id = v_tenant and n.id = any (v_item.memory_ids);
  exception when unique_violation then
    get stacked diagnostics v_constraint = constraint_name;
    raise exception 'an original cannot be restored: an active memory now holds its content or key'
      using errcode = '23505', column = 'memory_ids', detail = format('constraint %s', v_constraint),
            hint = 'forget or supersede that memory first';
  end;
  foreach m in array v_item.memory_ids loop
    perform cortex.consolidation_record_change(v_item.id, 'merge', 'node_restored', m,
      jsonb_build_object('status', 'superseded'), jsonb_build_object('status', 'active'));
  end loop;
  update cortex.consolidation_items i
  set notes = i.notes || jsonb_strip_nulls(jsonb_build_object('undone_at', now(), 'undone_by', v_agent,
                                                              'undone_reason', reason))
  where i.tenant_id = v_tenant and i.id = v_item.id
  returning i.* into v_item;
  return jsonb_build_object('item', cortex.consolidation_item_json(v_item), 'restored', to_jsonb(v_item.memory_ids),
                            'retired', v_new);
end $$;
comment on function public.undo_consolidation_merge(uuid, text) is
  'Undoes the merge of a consolidation:merge item in one transaction: the merged memory is retired (archived), the originals are restored (active, valid_to cleared), each change recorded against the item (notes.undone_at). '
  '404 for an unknown item; 409 (55000) when it merged nothing, was undone already, or the nodes changed since; 409 (23505) when an original''s content or key is now held by another memory. Admins only.';
grant execute on function public.undo_consolidation_merge(uuid, text) to authenticated;

-- Promote --------------------------------------------------------------------------------------------

create or replace function cortex.consolidation_slug(p_text text) returns text
language sql immutable parallel safe set search_path = '' as $$
  select coalesce(nullif(left(btrim(regexp_replace(lower(coalesce(p_text, '')), '[^a-z0-9]+', '-', 'g'), '-'), 60), ''), 'memory')
$$;
comment on function cortex.consolidation_slug(text) is 'A file-name slug of a title: lower-case letters and digits joined by dashes, at most 60 characters ("memory" when empty).';

create or replace function cortex.consolidation_promote_candidates(
  p_ids uuid[] default null, p_limit int default 500, p_at timestamptz default now(),
  p_min_importance real default 0.7, p_min_confidence real default 0.7, p_min_access int default 3,
  p_min_age_days real default 7
) returns table (memory_id uuid, criteria_met text[], eligible boolean, vault_path text, memory jsonb)
language plpgsql stable set search_path = '' as $$
#variable_conflict use_column
declare v_tenant uuid := cortex.consolidation_require_admin();
begin
  return query
  select n.id, c.met,
         n.importance >= p_min_importance and n.confidence >= p_min_confidence
           and (n.access_count >= p_min_access or n.created_at <= p_at - make_interval(secs => p_min_age_days * 86400)),
         coalesce(p.vault_path, format('%s/%s-%s.md', n.kind, cortex.consolidation_slug(n.title), left(n.id::text, 8))),
         cortex.memory_node_json(n)
  from cortex.memory_nodes n
  cross join lateral (select array_remove(array[
      case when n.importance >= p_min_importance then format('importance >= %s', p_min_importance) end,
      case when n.confidence >= p_min_confidence then format('confidence >= %s', p_min_confidence) end,
      case when n.access_count >= p_min_access then format('access_count >= %s', p_min_access) end,
      case when n.created_at <= p_at - make_interval(secs => p_min_age_days * 86400)
           then format('age >= %s days', p_min_age_days) end], null) as met) c
  left join cortex.consolidation_promotions p on p.tenant_id = v_tenant and p.memory_id = n.id
  where n.tenant_id = v_tenant and n.ref_kind is null and n.kind = any (cortex.memory_kinds())
    and (p_ids is not null and n.id = any (p_ids)
         or p_ids is null and n.status = 'active' and p.memory_id is null
            and n.importance >= p_min_importance and n.confidence >= p_min_confidence
            and (n.access_count >= p_min_access or n.created_at <= p_at - make_interval(secs => p_min_age_days * 86400)))
  order by n.importance desc, n.access_count desc, n.id
  limit case when p_ids is null then p_limit end;
end $$;
comment on function cortex.consolidation_promote_candidates(uuid[], int, timestamptz, real, real, int, real) is
  'Promote scan (p_ids null): active written memories not promoted yet with importance >= 0.7, confidence >= 0.7 and (access_count >= 3 or age >= 7 days), most important first. With p_ids: those memories, eligible or not. '
  'Each with the criteria it meets, eligible, its vault path (relative: <kind>/<slug of title>-<first 8 of id>.md, or the recorded one) and the memory (node json). Reads only.';

create or replace function cortex.consolidation_record_promotion(
  p_memory_id uuid, p_vault_path text, p_criteria text[], p_run_id uuid default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  v_existing cortex.consolidation_promotions;
  v_item jsonb;
  v_item_id uuid;
begin
  perform cortex.consolidation_check_write();
  if p_vault_path is null or p_vault_path ~ '(^/|\.\./)' or length(p_vault_path) > 1000 then
    raise exception 'vault_path must be a relative path inside the vault' using errcode = '22023', column = 'vault_path';
  end if;
  if coalesce(cardinality(p_criteria), 0) = 0 then
    raise exception 'criteria_met must name at least one criterion' using errcode = '22023', column = 'criteria_met';
  end if;
  perform 1 from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = p_memory_id for update;
  if not found then
    perform cortex.memory_not_found(p_memory_id);
  end if;
  select * into v_existing from cortex.consolidation_promotions p where p.tenant_id = v_tenant and p.memory_id = p_memory_id;
  if found then
    return jsonb_build_object('memory_id', p_memory_id, 'vault_path', v_existing.vault_path, 'criteria_met',
                              to_jsonb(v_existing.criteria_met), 'success', true, 'beads_issue_id', v_existing.item_id,
                              'created', false);
  end if;
  v_item := cortex.consolidation_create_item('promote', array[p_memory_id], 'promote', 'low',
                                             format('Promote memory %s to the vault: %s', p_memory_id, p_vault_path),
                                             jsonb_build_object('vault_path', p_vault_path, 'criteria_met', to_jsonb(p_criteria)),
                                             null, p_run_id);
  v_item_id := (v_item -> 'item' ->> 'id')::uuid;
  insert into cortex.consolidation_promotions (tenant_id, memory_id, vault_path, item_id, criteria_met)
  values (v_tenant, p_memory_id, p_vault_path, v_item_id, p_criteria);
  update cortex.memory_nodes n
  set metadata = n.metadata || jsonb_build_object('promoted', jsonb_build_object(
        'status', 'promoted', 'vault_path', p_vault_path, 'at', now(), 'consolidation_item', v_item_id))
  where n.tenant_id = v_tenant and n.id = p_memory_id;
  perform cortex.consolidation_record_change(v_item_id, 'promote', 'node_promoted', p_memory_id, null,
                                             jsonb_build_object('status', 'promoted', 'vault_path', p_vault_path),
                                             null, null, p_run_id);
  update cortex.consolidation_items i
  set status = 'closed', closed_at = clock_timestamp(), close_reason = 'promoted to ' || p_vault_path
  where i.tenant_id = v_tenant and i.id = v_item_id and i.status <> 'closed';
  return jsonb_build_object('memory_id', p_memory_id, 'vault_path', p_vault_path, 'criteria_met', to_jsonb(p_criteria),
                            'success', true, 'beads_issue_id', v_item_id, 'created', true);
end $$;
comment on function cortex.consolidation_record_promotion(uuid, text, text[], uuid) is
  'Records a memory''s promotion once the vault file is written: status promoted with the vault path (cortex.consolidation_promotions and the node''s metadata.promoted), a closed promote item and the change. A memory promoted already returns its first record (created false): never two files. Returns the PromotionResult.';

create or replace function cortex.consolidation_record_promotions(p_items jsonb, p_run_id uuid default null)
returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v jsonb;
  v_out jsonb := '[]';
begin
  perform cortex.consolidation_require_admin();
  if jsonb_typeof(p_items) is distinct from 'array' then
    raise exception 'items must be a JSON array' using errcode = '22023', column = 'items';
  end if;
  for v in select * from jsonb_array_elements(p_items) loop
    v_out := v_out || cortex.consolidation_record_promotion(
      (v ->> 'memory_id')::uuid, v ->> 'vault_path',
      array(select jsonb_array_elements_text(coalesce(v -> 'criteria_met', '[]'))), p_run_id);
  end loop;
  return v_out;
end $$;
comment on function cortex.consolidation_record_promotions(jsonb, uuid) is
  'cortex.consolidation_record_promotion for a batch [{memory_id, vault_path, criteria_met}] in one call (the files written first). Returns the PromotionResults.';

-- Relations ------------------------------------------------------------------------------------------

create or replace function cortex.consolidation_relation_id(p_from uuid, p_to uuid) returns uuid
language sql immutable parallel safe set search_path = '' as $$
  select md5('relation:' || p_from || ':' || p_to)::uuid
$$;
comment on function cortex.consolidation_relation_id(uuid, uuid) is
  'The id of the relation the relations agent proposes from p_from to p_to (stable across runs; the id of its change row once applied).';

create or replace function cortex.consolidation_relation_candidates(
  p_limit int default 500, p_min_lift real default 0.2, p_hub_max int default 200
) returns table (from_memory_id uuid, to_memory_id uuid, relation_id uuid, strength real, cosine real,
                 shared_entities text[], confidence real, reasoning text)
language plpgsql stable set search_path = '' set jit = off set work_mem = '64MB' as $$
#variable_conflict use_column
declare v_tenant uuid := cortex.consolidation_require_admin();
begin
  return query
  with links as (
    -- Active written memories (embedded) and the entities they mention or apply to.
    select distinct e.source_id as memory_id, e.target_id as entity_id
    from cortex.memory_edges e
    join cortex.memory_nodes en on en.tenant_id = v_tenant and en.id = e.target_id
     and en.kind = any (cortex.entity_kinds()) and en.status = 'active'
    join cortex.memory_nodes m on m.tenant_id = v_tenant and m.id = e.source_id
     and m.status = 'active' and m.ref_kind is null and m.kind = any (cortex.memory_kinds()) and m.embedding is not null
    where e.tenant_id = v_tenant and e.relation in ('mentions', 'applies_to')
  ), ok as materialized (
    -- Entities with more than p_hub_max memories are hubs: sharing them says little. Each
    -- embedding is read once here, as a normalised copy in memory (same cosines): an embedding is
    -- stored out of line (TOAST), and reading it per pair cost two TOAST lookups a pair.
    select l.memory_id, l.entity_id, extensions.l2_normalize(m.embedding) as emb
    from links l
    join cortex.memory_nodes m on m.tenant_id = v_tenant and m.id = l.memory_id
    where l.entity_id in (select x.entity_id from links x group by x.entity_id having count(*) <= p_hub_max)
  ), degree as materialized (
    select o.memory_id, count(*) as n from ok o group by o.memory_id
  ), entity_pairs as materialized (
    -- Every pair of memories of an entity, with its cosine (computed once per entity and pair).
    select a.entity_id, a.memory_id as a, b.memory_id as b,
           (1 - (a.emb operator(extensions.<=>) b.emb))::real as cos
    from ok a
    join ok b on b.entity_id = a.entity_id and b.memory_id > a.memory_id
  ), baseline as materialized (
    -- How alike an entity's memories read on average (its name alone makes them alike).
    select ep.entity_id, case when count(*) >= 3 then avg(ep.cos) else 0.5 end::real as base
    from entity_pairs ep group by ep.entity_id
  ), pairs as materialized (
    select ep.a, ep.b, array_agg(ep.entity_id) as shared, avg(bl.base)::real as base, max(ep.cos) as cos
    from entity_pairs ep join baseline bl on bl.entity_id = ep.entity_id
    group by ep.a, ep.b
  ), lifted as materialized (
    select p.*, greatest(0, least(1, (p.cos - p.base) / greatest(1 - p.base, 0.01)))::real as lift
    from pairs p
  ), scored as (
    select p.a, p.b, p.shared, p.base, p.cos, p.lift, x.created_at as xa, y.created_at as yb, x.id as xid, y.id as yid,
           (cardinality(p.shared)::real / (da.n + db.n - cardinality(p.shared)))::real as jac,
           x.title || ' ' || x.body as xt, y.title || ' ' || y.body as yt, x.scope as xs, y.scope as ys
    from lifted p
    join degree da on da.memory_id = p.a
    join degree db on db.memory_id = p.b
    join cortex.memory_nodes x on x.tenant_id = v_tenant and x.id = p.a
    join cortex.memory_nodes y on y.tenant_id = v_tenant and y.id = p.b
    where p.lift >= p_min_lift
  ), kept as (
    select s.*,
           case when (s.xa, s.xid) > (s.yb, s.yid) then s.a else s.b end as f,
           case when (s.xa, s.xid) > (s.yb, s.yid) then s.b else s.a end as t
    from scored s
    where (s.xs = '' or s.ys = '' or s.xs = s.ys)
      and cortex.memory_conflict(s.xt, s.yt) is null
      and not exists (select from cortex.memory_edges e
                      where e.tenant_id = v_tenant and e.source_id = s.a and e.target_id = s.b)
      and not exists (select from cortex.memory_edges e
                      where e.tenant_id = v_tenant and e.source_id = s.b and e.target_id = s.a)
      and not exists (select from cortex.consolidation_items i where i.tenant_id = v_tenant
                      and i.agent = 'relations' and i.memory_ids = array[s.a, s.b])
      and not exists (select from cortex.consolidation_items i where i.tenant_id = v_tenant
                      and 'consolidation:merge' = any (i.labels) and i.status in ('open', 'in_progress', 'blocked')
                      and i.memory_ids @> array[s.a, s.b])
  )
  select k.f, k.t, cortex.consolidation_relation_id(k.f, k.t),
         round((0.5 * k.cos + 0.3 * k.lift + 0.2 * k.jac)::numeric, 4)::real,
         round(k.cos::numeric, 4)::real, n.names,
         round(least(0.99, 0.6 + 0.8 * k.lift)::numeric, 4)::real,
         format('both concern %s, and they read more alike than its memories do on average (cosine %s against %s: lift %s; entity overlap %s)',
                array_to_string(n.names, ', '), round(k.cos::numeric, 2), round(k.base::numeric, 2),
                round(k.lift::numeric, 2), round(k.jac::numeric, 2))
  from kept k
  cross join lateral (select array_agg(en.title order by en.title) as names from cortex.memory_nodes en
                      where en.tenant_id = v_tenant and en.id = any (k.shared)) n
  order by k.lift desc, k.f, k.t
  limit p_limit;
end $$;
comment on function cortex.consolidation_relation_candidates(int, real, int) is
  'Relations scan: pairs of active written memories linked to a shared entity (mentions or applies_to; entities with more than p_hub_max memories are hubs and ignored) with no edge between them in either direction, no conflicting numbers or negation, no relations item yet and no pending merge of both. '
  'A shared name makes texts alike, so a pair is judged against its entity''s baseline (the mean cosine of the entity''s pairs; 0.5 with fewer than 3): lift = (cosine - baseline) / (1 - baseline), proposed from p_min_lift. '
  'strength = 0.5 x cosine + 0.3 x lift + 0.2 x entity Jaccard; confidence = 0.6 + 0.8 x lift (at most 0.99); from the newer to the older; a reasoning sentence. Highest lift first, at most p_limit. Reads only.';

create or replace function cortex.consolidation_relations_process(
  p_pairs jsonb, p_run_id uuid default null, p_dry_run boolean default false, p_log real default 0.7
) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_tenant uuid := cortex.consolidation_require_admin();
  p jsonb;
  v_from uuid;
  v_to uuid;
  v_item jsonb;
  v_item_id uuid;
  v_out jsonb := '[]';
  v_applied boolean;
begin
  if not p_dry_run then
    perform cortex.consolidation_check_write();
  end if;
  if jsonb_typeof(p_pairs) is distinct from 'array' then
    raise exception 'pairs must be a JSON array' using errcode = '22023', column = 'pairs';
  end if;
  for p in select * from jsonb_array_elements(p_pairs) loop
    v_from := (p ->> 'from_memory_id')::uuid;
    v_to := (p ->> 'to_memory_id')::uuid;
    if exists (select from cortex.memory_edges e where e.tenant_id = v_tenant
               and ((e.source_id = v_from and e.target_id = v_to) or (e.source_id = v_to and e.target_id = v_from))) then
      raise exception 'memories % and % are related already', v_from, v_to using errcode = '55000', column = 'pair';
    end if;
    v_item_id := null;
    v_applied := false;
    if not p_dry_run then
      v_item := cortex.consolidation_create_item(
        'relations', array[v_from, v_to], 'relate', 'low',
        format('Relation: %s relates_to %s (strength %s)', v_from, v_to, round((p ->> 'strength')::numeric, 3)),
        jsonb_build_object('from_memory_id', v_from, 'to_memory_id', v_to, 'strength', (p ->> 'strength')::real,
                           'cosine', p -> 'cosine', 'reasoning', p ->> 'reasoning',
                           'shared_entities', coalesce(p -> 'shared_entities', '[]')),
        (p ->> 'confidence')::real, p_run_id);
      v_item_id := (v_item -> 'item' ->> 'id')::uuid;
      if (p ->> 'confidence')::real >= p_log and (v_item -> 'item' ->> 'status') = 'open' then
        perform cortex.consolidation_apply_item(v_item_id, p_run_id);
        v_applied := true;
      end if;
    end if;
    v_out := v_out || jsonb_build_object('from_memory_id', v_from, 'to_memory_id', v_to,
                                         'relation_id', cortex.consolidation_relation_id(v_from, v_to),
                                         'strength', (p ->> 'strength')::real, 'reasoning', p ->> 'reasoning',
                                         'shared_entities', coalesce(p -> 'shared_entities', '[]'),
                                         'confidence', (p ->> 'confidence')::real, 'beads_issue_id', v_item_id,
                                         'applied', v_applied);
  end loop;
  return v_out;
end $$;
comment on function cortex.consolidation_relations_process(jsonb, uuid, boolean, real) is
  'Relations process of a batch of candidate pairs [{from_memory_id, to_memory_id, strength, cosine, shared_entities, confidence, reasoning}]: a pair related meanwhile is 55000; else an item per pair, and the relates_to edge added at once when the confidence reaches p_log (lower: the item waits for a person). '
  'p_dry_run writes nothing. Returns the RelationResults (relation_id = cortex.consolidation_relation_id).';

grant execute on function
  cortex.consolidation_decay_score(int, timestamptz, real, real, boolean, timestamptz),
  cortex.consolidation_decay_candidates(uuid[], int, timestamptz, real),
  cortex.consolidation_archive(uuid, text, uuid, text, uuid),
  cortex.consolidation_decay_process(uuid[], uuid, boolean, real, timestamptz),
  cortex.consolidation_other_subjects(uuid, uuid, uuid),
  cortex.consolidation_cluster_candidates(uuid, int, real, int, real),
  cortex.consolidation_cluster_process(jsonb, uuid, boolean, real),
  cortex.consolidation_apply_item(uuid, uuid),
  cortex.consolidation_merge_material(uuid),
  cortex.consolidation_merge_apply(uuid, text, text, text[], text, text, uuid),
  cortex.consolidation_slug(text),
  cortex.consolidation_promote_candidates(uuid[], int, timestamptz, real, real, int, real),
  cortex.consolidation_record_promotion(uuid, text, text[], uuid),
  cortex.consolidation_record_promotions(jsonb, uuid),
  cortex.consolidation_relation_id(uuid, uuid),
  cortex.consolidation_relation_candidates(int, real, int),
  cortex.consolidation_relations_process(jsonb, uuid, boolean, real)
  to authenticated, service_role;

-- Nightly: pg_cron only enqueues ----------------------------------------------------------------------

create or replace function cortex.job_consolidation(p_now timestamptz default now()) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  t record;
  v_local timestamp;
  v_window timestamptz;
  v_queued int := 0;
begin
  for t in select id, time_zone from cortex.tenants order by id loop
    v_local := p_now at time zone t.time_zone;
    continue when extract(hour from v_local) not between 3 and 5;
    v_window := (date_trunc('day', v_local) + interval '3 hours') at time zone t.time_zone;
    continue when not cortex.claim_schedule_window(t.id, 'nightly_consolidation', v_window);
    perform cortex.enqueue_job(t.id, 'consolidate', jsonb_build_object('agents', to_jsonb(cortex.consolidation_agents())),
                               'consolidation:nightly');
    perform cortex.finish_schedule_window(t.id, 'nightly_consolidation', v_window, jsonb_build_object('queued', 1));
    v_queued := v_queued + 1;
  end loop;
  -- The rate limit's counters are only read for the current minute.
  delete from cortex.consolidation_rate x where x.minute < p_now - interval '1 day';
  return jsonb_build_object('queued', v_queued);
end $$;
comment on function cortex.job_consolidation(timestamptz) is
  'Hourly; for each tenant whose local time is 03:00-05:59 and not yet done that night: queues one consolidate job (all agents, deduplicated while queued) for the worker; drops rate-limit counters older than a day. Never calls a model itself. Returns {queued}.';
revoke execute on function cortex.job_consolidation(timestamptz) from public, anon, authenticated, service_role;

do $$
begin
  if to_regnamespace('cron') is not null and to_regprocedure('cron.schedule(text, text, text)') is not null then
    perform cron.schedule('cortex-nightly-consolidation', '15 * * * *', 'select cortex.job_consolidation()');
  end if;
end $$;
