-- Traversal and the graph API (issue 13): cortex.graph_walk (breadth-first or weighted, cycle-safe,
-- over decayed edge weights), neighbors, link_memories, graph_stats, graph_version, and the
-- operator's cortex.set_memory_settings.
--
-- The rule of a walk (docs/architecture.md "Traversal, decay and reinforcement"):
--   * An edge's weight now is cortex.decayed_weight(weight, last_reinforced_at, half_life_days,
--     either end permanent, now); an edge below min_weight (default memory_settings.min_weight,
--     0.2) is not followed.
--   * A node is reached only when it is active, of an allowed kind, and important enough:
--     importance >= memory_settings.min_importance (0.3), except entity nodes (agents, contacts,
--     people, systems), which are reached whatever their importance. Start nodes may be any
--     visible node, of any status, kind or importance; they are never returned themselves.
--   * score = product of the decayed weights along the path by which the node was reached.
--   * RLS does the rest: an invoker function never sees another tenant's nodes or another
--     agent's private nodes and edges.
-- Serving reinforces: every API read appends the nodes it returns to cortex.memory_access once
-- per request (cortex.record_access); the scheduled fold turns that into access counts and edge
-- reinforcement in bulk, so a read never updates a hot row.

-- Vocabularies ---------------------------------------------------------------------------------

create or replace function cortex.graph_directions() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['out', 'in', 'both'];
end $$;
comment on function cortex.graph_directions() is
  'Directions of a walk: out (source -> target), in (target -> source), both.';

create or replace function cortex.traversal_strategies() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['breadth_first', 'weighted'];
end $$;
comment on function cortex.traversal_strategies() is
  'Traversal strategies: breadth_first (by depth, then score) and weighted (highest-score paths first).';

grant execute on function cortex.graph_directions(), cortex.traversal_strategies() to authenticated, service_role;

-- Validation -----------------------------------------------------------------------------------

create or replace function cortex.check_enum_array(p_field text, p_values text[], p_allowed text[]) returns text[]
language plpgsql immutable set search_path = '' as $$
declare v text;
begin
  if p_values is null then
    return null;
  end if;
  if cardinality(p_values) = 0 then
    raise exception '% must not be empty (leave it out for all)', p_field using errcode = '22023', column = p_field;
  end if;
  foreach v in array p_values loop
    if v is null then
      raise exception '% cannot hold null', p_field using errcode = '22023', column = p_field;
    end if;
    perform cortex.check_enum(p_field, v, p_allowed);
  end loop;
  return p_values;
end $$;
comment on function cortex.check_enum_array(text, text[], text[]) is
  'Returns p_values if every element is allowed (or null for all), else SQLSTATE 22023 naming the field (an empty list, a null element, an unknown value).';
grant execute on function cortex.check_enum_array(text, text[], text[]) to authenticated, service_role;

create or replace function cortex.check_graph_walk(
  p_depth int, p_direction text, p_relations text[], p_kinds text[], p_min_weight real, p_strategy text, p_limit int
) returns void
language plpgsql immutable set search_path = '' as $$
begin
  if p_depth is null or p_depth not between 1 and 6 then
    raise exception 'depth must be between 1 and 6' using errcode = '22023', column = 'depth',
      detail = format('got %s', coalesce(p_depth::text, 'null'));
  end if;
  if p_direction is null then
    raise exception 'direction is required' using errcode = '22023', column = 'direction';
  end if;
  perform cortex.check_enum('direction', p_direction, cortex.graph_directions());
  if p_strategy is null then
    raise exception 'strategy is required' using errcode = '22023', column = 'strategy';
  end if;
  perform cortex.check_enum('strategy', p_strategy, cortex.traversal_strategies());
  perform cortex.check_enum_array('relations', p_relations, cortex.edge_relations());
  perform cortex.check_enum_array('kinds', p_kinds, cortex.node_kinds());
  -- 'NaN' compares greater than every number in Postgres, so the range test refuses it too.
  if p_min_weight is not null and not (p_min_weight between 0 and 1) then
    raise exception 'min_weight must be between 0 and 1' using errcode = '22023', column = 'min_weight';
  end if;
  if p_limit is null or p_limit not between 1 and 500 then
    raise exception 'limit must be between 1 and 500' using errcode = '22023', column = 'limit';
  end if;
end $$;
comment on function cortex.check_graph_walk(int, text, text[], text[], real, text, int) is
  'Validates the parameters of a walk (SQLSTATE 22023 naming the field): depth 1..6, direction, strategy, relations and kinds in their vocabularies, min_weight 0..1, limit 1..500.';
grant execute on function cortex.check_graph_walk(int, text, text[], text[], real, text, int) to authenticated, service_role;

-- The walk ---------------------------------------------------------------------------------------

create or replace function cortex.graph_walk(
  p_tenant_id uuid, p_start uuid[], p_depth int, p_direction text, p_relations text[], p_kinds text[],
  p_min_weight real, p_strategy text, p_limit int, p_at timestamptz default now(),
  p_min_importance real default null
) returns table (node_id uuid, depth int, score real, via_node uuid, via_relation text)
language plpgsql stable rows 50 set search_path = '' as $$
#variable_conflict use_column
declare
  -- Edges read per node and direction: a hub (an agent's entity node mentioned by every
  -- interaction) must not make one step read the whole tenant.
  c_fanout constant int := 500;
  v_half real;
  v_min real := coalesce(p_min_weight, 0);
  v_entities text[] := cortex.entity_kinds();
  v_level int := 0;
  v_seen uuid[];
  -- The frontier (breadth_first: the last level; weighted: the tentative nodes, best first).
  f_ids uuid[];
  f_score real[];
  f_perm boolean[];
  f_depth int[];
  f_via uuid[];
  f_rel text[];
  -- One popped node (weighted).
  v_id uuid;
  v_score real;
  v_perm boolean;
  v_depth int;
  -- The answer, in order.
  r_ids uuid[] := '{}';
  r_depth int[] := '{}';
  r_score real[] := '{}';
  r_via uuid[] := '{}';
  r_rel text[] := '{}';
  v_take int;
  -- One level's edges to new nodes (far end, via, relation, path score so far, weight decayed and kept),
  -- the permanent ones among those nodes, and the nodes by best path first, before the node filters.
  e_nb uuid[];
  e_via uuid[];
  e_rel text[];
  e_score real[];
  e_decayed real[];
  e_kept real[];
  v_kept uuid[];
  c_ids uuid[];
  c_score real[];
  c_perm boolean[];
  c_via uuid[];
  c_rel text[];
  v_need int;
  v_from int;
  v_batch int;
begin
  perform cortex.guard_tenant(p_tenant_id);
  perform cortex.check_graph_walk(p_depth, p_direction, p_relations, p_kinds, p_min_weight, p_strategy, p_limit);
  if p_min_importance is not null and not (p_min_importance between 0 and 1) then
    raise exception 'min_importance must be between 0 and 1' using errcode = '22023', column = 'min_importance';
  end if;
  select s.half_life_days into v_half from cortex.memory_settings s where s.tenant_id = p_tenant_id;

  -- Start nodes: any visible node (RLS), whatever its status.
  select coalesce(array_agg(n.id), '{}'), coalesce(array_agg(n.permanent), '{}')
  into f_ids, f_perm
  from cortex.memory_nodes n where n.tenant_id = p_tenant_id and n.id = any (p_start);
  v_seen := f_ids;
  if cardinality(f_ids) = 0 then
    return;
  end if;

  -- Step one (both strategies), then each level of breadth_first: the frontier's edges (at most
  -- c_fanout per node and direction), the best path per new node; a node is expanded once, at its
  -- first depth (best score within that level). A path's score needs only the edges and whether the
  -- far node is permanent (its edges never decay), which a small partial index answers; so the new
  -- nodes are ranked first, without reading them, and then read best first, in batches, until the
  -- answer is full (a level around a hub reaches thousands of nodes for a few dozen places).
  f_score := array_fill(1::real, array[cardinality(f_ids)]);
  loop
    select coalesce(array_agg(e.nb), '{}'), coalesce(array_agg(f.id), '{}'), coalesce(array_agg(e.relation), '{}'),
           coalesce(array_agg(f.score), '{}'),
           coalesce(array_agg(cortex.decayed_weight(e.weight, e.last_reinforced_at, v_half, f.perm, p_at)), '{}'),
           coalesce(array_agg(e.weight), '{}')
    into e_nb, e_via, e_rel, e_score, e_decayed, e_kept
    from unnest(f_ids, f_score, f_perm) f (id, score, perm)
    cross join lateral (
      (select e.target_id as nb, e.relation, e.weight, e.last_reinforced_at from cortex.memory_edges e
       where p_direction <> 'in' and e.tenant_id = p_tenant_id and e.source_id = f.id
         and (p_relations is null or e.relation = any (p_relations))
       limit c_fanout)
      union all
      (select e.source_id, e.relation, e.weight, e.last_reinforced_at from cortex.memory_edges e
       where p_direction <> 'out' and e.tenant_id = p_tenant_id and e.target_id = f.id
         and (p_relations is null or e.relation = any (p_relations))
       limit c_fanout)
    ) e
    where e.nb not in (select unnest(v_seen));
    -- Which of the reached nodes are permanent: one probe each of a small partial index.
    v_kept := array(select n.id from cortex.memory_nodes n
                    where n.tenant_id = p_tenant_id and n.permanent and n.id = any (e_nb));
    select coalesce(array_agg(b.id order by b.score desc, b.id), '{}'),
           coalesce(array_agg(b.score order by b.score desc, b.id), '{}'),
           coalesce(array_agg(b.perm order by b.score desc, b.id), '{}'),
           coalesce(array_agg(b.via order by b.score desc, b.id), '{}'),
           coalesce(array_agg(b.rel order by b.score desc, b.id), '{}')
    into c_ids, c_score, c_perm, c_via, c_rel
    from (
      select distinct on (c.nb) c.nb as id, (c.score * w.w)::real as score, c.perm, c.via, c.rel
      from (select c.*, c.nb in (select unnest(v_kept)) as perm
            from unnest(e_nb, e_via, e_rel, e_score, e_decayed, e_kept) c (nb, via, rel, score, w_decayed, w_kept)) c
      cross join lateral (select case when c.perm then c.w_kept else c.w_decayed end as w) w
      where w.w >= v_min
      order by c.nb, (c.score * w.w)::real desc, c.via, c.rel
    ) b;

    -- The node filters, best first: a level never needs more than the places left in the answer.
    v_need := p_limit - cardinality(r_ids);
    v_from := 1;
    v_batch := greatest(v_need + v_need / 2, 50);
    f_ids := '{}';
    f_score := '{}';
    f_perm := '{}';
    f_via := '{}';
    f_rel := '{}';
    loop
      exit when v_from > cardinality(c_ids) or cardinality(f_ids) >= v_need;
      select f_ids || coalesce(array_agg(x.id order by x.ord), '{}'),
             f_score || coalesce(array_agg(x.score order by x.ord), '{}'),
             f_perm || coalesce(array_agg(x.perm order by x.ord), '{}'),
             f_via || coalesce(array_agg(x.via order by x.ord), '{}'),
             f_rel || coalesce(array_agg(x.rel order by x.ord), '{}')
      into f_ids, f_score, f_perm, f_via, f_rel
      from unnest(c_ids[v_from:v_from + v_batch - 1], c_score[v_from:v_from + v_batch - 1],
                  c_perm[v_from:v_from + v_batch - 1], c_via[v_from:v_from + v_batch - 1],
                  c_rel[v_from:v_from + v_batch - 1]) with ordinality x (id, score, perm, via, rel, ord)
      where exists (
        select from cortex.memory_nodes n
        where n.tenant_id = p_tenant_id and n.id = x.id and n.status = 'active'
          and (p_kinds is null or n.kind = any (p_kinds))
          and (p_min_importance is null or n.importance >= p_min_importance or n.kind = any (v_entities)));
      v_from := v_from + v_batch;
      v_batch := v_batch * 4;
    end loop;
    v_level := v_level + 1;
    exit when p_strategy <> 'breadth_first';
    v_take := least(cardinality(f_ids), p_limit - cardinality(r_ids));
    r_ids := r_ids || f_ids[1:v_take];
    r_score := r_score || f_score[1:v_take];
    r_via := r_via || f_via[1:v_take];
    r_rel := r_rel || f_rel[1:v_take];
    r_depth := r_depth || array_fill(v_level, array[v_take]);
    v_seen := v_seen || f_ids;
    exit when cardinality(r_ids) >= p_limit or v_level >= p_depth or cardinality(f_ids) = 0;
  end loop;

  if p_strategy = 'weighted' then
    -- Weighted: best-first (Dijkstra on the product of weights, which never grows along a path),
    -- so nodes are settled best score first and a node is expanded once, at its best score. Only
    -- the best (limit - settled) tentative nodes are kept: any other would be settled after enough
    -- better ones to fill the answer, so dropping it changes nothing and keeps each step small.
    f_depth := array_fill(1, array[cardinality(f_ids)]);
    loop
      exit when cardinality(f_ids) = 0 or cardinality(r_ids) >= p_limit;
      v_id := f_ids[1];
      v_score := f_score[1];
      v_perm := f_perm[1];
      v_depth := f_depth[1];
      r_ids := r_ids || v_id;
      r_score := r_score || v_score;
      r_via := r_via || f_via[1];
      r_rel := r_rel || f_rel[1];
      r_depth := r_depth || v_depth;
      v_seen := v_seen || v_id;
      f_ids := f_ids[2:];
      f_score := f_score[2:];
      f_perm := f_perm[2:];
      f_depth := f_depth[2:];
      f_via := f_via[2:];
      f_rel := f_rel[2:];
      continue when v_depth >= p_depth;
      v_take := p_limit - cardinality(r_ids);

      select coalesce(array_agg(c.id order by c.score desc, c.depth, c.id), '{}'),
             coalesce(array_agg(c.score order by c.score desc, c.depth, c.id), '{}'),
             coalesce(array_agg(c.perm order by c.score desc, c.depth, c.id), '{}'),
             coalesce(array_agg(c.depth order by c.score desc, c.depth, c.id), '{}'),
             coalesce(array_agg(c.via order by c.score desc, c.depth, c.id), '{}'),
             coalesce(array_agg(c.rel order by c.score desc, c.depth, c.id), '{}')
      into f_ids, f_score, f_perm, f_depth, f_via, f_rel
      from (
        select b.* from (
          select distinct on (x.id) x.* from (
            select t.id, t.score, t.perm, t.depth, t.via, t.rel
            from unnest(f_ids, f_score, f_perm, f_depth, f_via, f_rel) t (id, score, perm, depth, via, rel)
            union all
            select n.id, (v_score * w.w)::real, n.permanent, v_depth + 1, v_id, e.relation
            from (
              (select e.target_id as nb, e.relation, e.weight, e.last_reinforced_at from cortex.memory_edges e
               where p_direction <> 'in' and e.tenant_id = p_tenant_id and e.source_id = v_id
                 and (p_relations is null or e.relation = any (p_relations))
               limit c_fanout)
              union all
              (select e.source_id, e.relation, e.weight, e.last_reinforced_at from cortex.memory_edges e
               where p_direction <> 'out' and e.tenant_id = p_tenant_id and e.target_id = v_id
                 and (p_relations is null or e.relation = any (p_relations))
               limit c_fanout)
            ) e
            join cortex.memory_nodes n on n.tenant_id = p_tenant_id and n.id = e.nb
            cross join lateral (select cortex.decayed_weight(e.weight, e.last_reinforced_at, v_half, v_perm or n.permanent, p_at) as w) w
            where n.status = 'active' and n.id <> all (v_seen)
              and (p_kinds is null or n.kind = any (p_kinds))
              and (p_min_importance is null or n.importance >= p_min_importance or n.kind = any (v_entities))
              and w.w >= v_min
          ) x
          order by x.id, x.score desc, x.depth, x.via, x.rel
        ) b
        order by b.score desc, b.depth, b.id
        limit v_take
      ) c;
    end loop;
  end if;

  return query
    select r.id, r.depth, r.score, r.via, r.rel
    from unnest(r_ids, r_depth, r_score, r_via, r_rel) with ordinality r (id, depth, score, via, rel, ord)
    order by r.ord;
end $$;
comment on function cortex.graph_walk(uuid, uuid[], int, text, text[], text[], real, text, int, timestamptz, real) is
  'Walks the graph from p_start (any visible nodes) up to p_depth (1..6) steps along edges in p_direction (out, in, both) of p_relations (null: all), '
  'following an edge only when its decayed weight at p_at (cortex.decayed_weight, the tenant''s half-life, either end permanent) is at least p_min_weight. '
  'Reaches only active nodes of p_kinds (null: all) whose importance is at least p_min_importance (null: no floor; entity nodes always pass). '
  'score = product of decayed weights along the path; start nodes are not returned. Cycle-safe: a node is expanded once, at its first depth '
  '(breadth_first: answered by depth, then score, stopping as soon as p_limit nodes are found) or at its best score (weighted: best-first, '
  'answered best score first). At most 500 edges per node and direction are read. Invoker: RLS hides other tenants and other agents'' private nodes and edges.';
grant execute on function cortex.graph_walk(uuid, uuid[], int, text, text[], text[], real, text, int, timestamptz, real)
  to authenticated, service_role;

-- JSON of an edge --------------------------------------------------------------------------------

create or replace function cortex.memory_edge_json(e cortex.memory_edges) returns jsonb
language sql stable set search_path = '' as $$
  select jsonb_build_object(
    'source_id', e.source_id, 'target_id', e.target_id, 'relation', e.relation, 'weight', e.weight,
    'current_weight', cortex.decayed_weight(
       e.weight, e.last_reinforced_at,
       (select s.half_life_days from cortex.memory_settings s where s.tenant_id = e.tenant_id),
       coalesce((select bool_or(n.permanent) from cortex.memory_nodes n
                 where n.tenant_id = e.tenant_id and n.id in (e.source_id, e.target_id)), false),
       now()),
    'created_at', e.created_at, 'last_reinforced_at', e.last_reinforced_at, 'created_by', e.created_by,
    'metadata', e.metadata)
$$;
comment on function cortex.memory_edge_json(cortex.memory_edges) is
  'The API representation of an edge: weight as stored (its value at last_reinforced_at) and current_weight, decayed to now (spared when either end is permanent).';
grant execute on function cortex.memory_edge_json(cortex.memory_edges) to authenticated, service_role;

-- API: traversal ---------------------------------------------------------------------------------

create or replace function public.traverse_graph(
  start_ids uuid[],
  depth int default 2,
  direction text default 'both',
  relations text[] default null,
  kinds text[] default null,
  min_weight real default null,
  strategy text default 'breadth_first',
  "limit" int default 50
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_settings cortex.memory_settings;
  v_starts uuid[];
  v_missing uuid;
  v_ids uuid[];
  v_depths int[];
  v_scores real[];
  v_vias uuid[];
  v_rels text[];
  v_permanent uuid[];
  v_found_permanent uuid[];
  v_nodes jsonb;
  v_edges jsonb;
begin
  if traverse_graph.start_ids is null or cardinality(traverse_graph.start_ids) = 0 then
    raise exception 'start_ids must name at least one node' using errcode = '22023', column = 'start_ids';
  end if;
  if cardinality(traverse_graph.start_ids) > 100 then
    raise exception 'start_ids may name at most 100 nodes' using errcode = '22023', column = 'start_ids',
      detail = format('got %s', cardinality(traverse_graph.start_ids));
  end if;
  if array_position(traverse_graph.start_ids, null) is not null then
    raise exception 'start_ids cannot hold null' using errcode = '22023', column = 'start_ids';
  end if;
  perform cortex.check_graph_walk(traverse_graph.depth, traverse_graph.direction, traverse_graph.relations,
                                  traverse_graph.kinds, traverse_graph.min_weight, traverse_graph.strategy,
                                  traverse_graph."limit");

  v_starts := array(select distinct s from unnest(traverse_graph.start_ids) s);
  select s.id into v_missing from unnest(v_starts) s (id)
  where not exists (select from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = s.id)
  limit 1;
  -- Permanent nodes among the ends of the answer's edges (an edge touching one never decays).
  v_permanent := array(select n.id from cortex.memory_nodes n
                       where n.tenant_id = v_tenant and n.id = any (v_starts) and n.permanent);
  if v_missing is not null then
    raise exception 'memory % not found', v_missing using errcode = 'P0002', column = 'start_ids',
      hint = 'a start node must be a memory or entity node of this tenant that this agent can see';
  end if;
  v_settings := cortex.memory_config(v_tenant);

  select coalesce(array_agg(w.node_id order by w.ord), '{}'), coalesce(array_agg(w.depth order by w.ord), '{}'),
         coalesce(array_agg(w.score order by w.ord), '{}'), coalesce(array_agg(w.via_node order by w.ord), '{}'),
         coalesce(array_agg(w.via_relation order by w.ord), '{}')
  into v_ids, v_depths, v_scores, v_vias, v_rels
  from cortex.graph_walk(
         v_tenant, v_starts, traverse_graph.depth, traverse_graph.direction, traverse_graph.relations,
         traverse_graph.kinds, coalesce(traverse_graph.min_weight, v_settings.min_weight), traverse_graph.strategy,
         traverse_graph."limit", now(), v_settings.min_importance
       ) with ordinality w (node_id, depth, score, via_node, via_relation, ord);

  -- Primary-key lookups per returned node (the walk's answer is small; a join would be planned for
  -- the whole tenant).
  select coalesce(jsonb_agg(jsonb_build_object(
           'memory', cortex.memory_node_json(n), 'depth', r.depth, 'score', r.score,
           'via_node', r.via, 'via_relation', r.rel) order by r.ord), '[]'),
         coalesce(array_agg(n.id) filter (where n.permanent), '{}')
  into v_nodes, v_found_permanent
  from unnest(v_ids, v_depths, v_scores, v_vias, v_rels) with ordinality r (id, depth, score, via, rel, ord)
  cross join lateral (select * from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = r.id offset 0) n;

  v_permanent := v_permanent || v_found_permanent;
  -- The edges the nodes were reached by (both, when 'both' found the relation either way),
  -- as cortex.memory_edge_json renders them, with the ends' permanent flags at hand.
  select coalesce(jsonb_agg(jsonb_build_object(
           'source_id', e.source_id, 'target_id', e.target_id, 'relation', e.relation, 'weight', e.weight,
           'current_weight', cortex.decayed_weight(e.weight, e.last_reinforced_at, v_settings.half_life_days,
                                                   e.permanent, now()),
           'created_at', e.created_at, 'last_reinforced_at', e.last_reinforced_at, 'created_by', e.created_by,
           'metadata', e.metadata) order by r.ord, e.source_id), '[]')
  into v_edges
  from unnest(v_ids, v_vias, v_rels) with ordinality r (id, via, rel, ord)
  cross join lateral (
    select e.*, (r.id = any (v_permanent) or r.via = any (v_permanent)) as permanent
    from (
      select e.* from cortex.memory_edges e
      where traverse_graph.direction <> 'in' and e.tenant_id = v_tenant and e.source_id = r.via
        and e.relation = r.rel and e.target_id = r.id
      union all
      select e.* from cortex.memory_edges e
      where traverse_graph.direction <> 'out' and e.tenant_id = v_tenant and e.source_id = r.id
        and e.relation = r.rel and e.target_id = r.via
    ) e
  ) e;

  perform cortex.record_access(v_tenant, v_ids);
  return jsonb_build_object('nodes', v_nodes, 'edges', v_edges);
end $$;
comment on function public.traverse_graph(uuid[], int, text, text[], text[], real, text, int) is
  'Walks the graph from start_ids (1..100 nodes the caller can see, else 404 naming start_ids) up to depth steps (1..6) in direction (out, in, both) '
  'along relations (null: all) to active nodes of kinds (null: all), following edges whose decayed weight is at least min_weight (default: the tenant''s min_weight), '
  'skipping nodes below the tenant''s min_importance unless they are entity nodes. strategy breadth_first answers by depth then score; weighted, best score first. '
  'Returns {nodes: [{memory, depth, score, via_node, via_relation}], edges: [the edges the nodes were reached by]}; the returned nodes are recorded as accessed (once per request).';
grant execute on function public.traverse_graph(uuid[], int, text, text[], text[], real, text, int) to authenticated;

create or replace function public.neighbors(
  node_id uuid,
  direction text default 'both',
  relations text[] default null,
  kinds text[] default null,
  min_weight real default null,
  "limit" int default 50
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  -- Edges examined per direction: a hub's neighbours are ranked among its first 5,000 edges.
  c_scan constant int := 5000;
  v_tenant uuid := cortex.require_tenant();
  v_settings cortex.memory_settings;
  v_perm boolean;
  v_min real;
  v_ids uuid[];
  v_items jsonb;
begin
  if neighbors.node_id is null then
    raise exception 'node_id is required' using errcode = '22023', column = 'node_id';
  end if;
  perform cortex.check_graph_walk(1, neighbors.direction, neighbors.relations, neighbors.kinds, neighbors.min_weight,
                                  'breadth_first', neighbors."limit");
  select n.permanent into v_perm from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = neighbors.node_id;
  if not found then
    raise exception 'memory % not found', neighbors.node_id using errcode = 'P0002', column = 'node_id',
      hint = 'the node must be a memory or entity node of this tenant that this agent can see';
  end if;
  v_settings := cortex.memory_config(v_tenant);
  v_min := coalesce(neighbors.min_weight, v_settings.min_weight);

  select coalesce(array_agg(x.id order by x.ord), '{}'),
         coalesce(jsonb_agg(jsonb_build_object('memory', x.memory, 'relation', x.relation, 'direction', x.dir,
                                               'weight', x.w) order by x.ord), '[]')
  into v_ids, v_items
  from (
    select n.id, cortex.memory_node_json(n) as memory, e.relation, e.dir, w.w,
           row_number() over (order by w.w desc, e.dir desc, e.relation, n.id) as ord
    from (
      (select e.target_id as nb, e.relation, 'out' as dir, e.weight, e.last_reinforced_at from cortex.memory_edges e
       where neighbors.direction <> 'in' and e.tenant_id = v_tenant and e.source_id = neighbors.node_id
         and (neighbors.relations is null or e.relation = any (neighbors.relations))
       limit c_scan)
      union all
      (select e.source_id, e.relation, 'in', e.weight, e.last_reinforced_at from cortex.memory_edges e
       where neighbors.direction <> 'out' and e.tenant_id = v_tenant and e.target_id = neighbors.node_id
         and (neighbors.relations is null or e.relation = any (neighbors.relations))
       limit c_scan)
    ) e
    join cortex.memory_nodes n on n.tenant_id = v_tenant and n.id = e.nb
    cross join lateral (select cortex.decayed_weight(e.weight, e.last_reinforced_at, v_settings.half_life_days,
                                                     v_perm or n.permanent, now()) as w) w
    where w.w >= v_min
      and (neighbors.kinds is null or n.kind = any (neighbors.kinds))
      and (n.importance >= v_settings.min_importance or n.kind = any (cortex.entity_kinds()))
    order by w.w desc, e.dir desc, e.relation, n.id
    limit neighbors."limit"
  ) x;

  perform cortex.record_access(v_tenant, v_ids);
  return jsonb_build_object('items', v_items);
end $$;
comment on function public.neighbors(uuid, text, text[], text[], real, int) is
  'The nodes one edge away from node_id (404 when the caller cannot see it), per edge: {items: [{memory, relation, direction (out: node_id -> memory, in: memory -> node_id), weight (decayed now)}]}, '
  'strongest first. Same thresholds as traverse_graph (min_weight, default the tenant''s; min_importance except entity nodes) but any status: a superseded node is one supersedes edge away. '
  'Among a node''s first 5,000 edges per direction. The returned nodes are recorded as accessed (once per request).';
grant execute on function public.neighbors(uuid, text, text[], text[], real, int) to authenticated;

-- API: linking -----------------------------------------------------------------------------------

create or replace function public.link_memories(
  source_id uuid,
  target_id uuid,
  relation text,
  weight real default 0.5,
  metadata jsonb default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_agent text;
  v_weight real := coalesce(link_memories.weight, 0.5);
  v_src cortex.memory_nodes;
  v_tgt cortex.memory_nodes;
  v_half real;
  v_row cortex.memory_edges;
  v_created boolean;
begin
  v_agent := cortex.require_writer();
  if link_memories.source_id is null then
    raise exception 'source_id is required' using errcode = '22023', column = 'source_id';
  end if;
  if link_memories.target_id is null then
    raise exception 'target_id is required' using errcode = '22023', column = 'target_id';
  end if;
  if link_memories.relation is null then
    raise exception 'relation is required' using errcode = '22023', column = 'relation';
  end if;
  perform cortex.check_enum('relation', link_memories.relation, cortex.edge_relations());
  if link_memories.source_id = link_memories.target_id then
    raise exception 'an edge cannot join a memory to itself' using errcode = '22023', column = 'target_id';
  end if;
  if not (v_weight between 0 and 1) then
    raise exception 'weight must be between 0 and 1' using errcode = '22023', column = 'weight',
      detail = format('got %s', v_weight);
  end if;
  if link_memories.metadata is not null and jsonb_typeof(link_memories.metadata) <> 'object' then
    raise exception 'metadata must be a JSON object' using errcode = '22023', column = 'metadata';
  end if;
  if octet_length(link_memories.metadata::text) > 4096 then
    raise exception 'metadata of an edge may take at most 4096 bytes as JSON' using errcode = '22023', column = 'metadata';
  end if;

  -- RLS: another tenant's node, or another agent's private one, is simply not there.
  select * into v_src from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = link_memories.source_id;
  if not found then
    raise exception 'memory % not found', link_memories.source_id using errcode = 'P0002', column = 'source_id';
  end if;
  select * into v_tgt from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = link_memories.target_id;
  if not found then
    raise exception 'memory % not found', link_memories.target_id using errcode = 'P0002', column = 'target_id';
  end if;
  select s.half_life_days into v_half from cortex.memory_settings s where s.tenant_id = v_tenant;

  insert into cortex.memory_edges as e (tenant_id, source_id, relation, target_id, weight, created_by, metadata)
  values (v_tenant, link_memories.source_id, link_memories.relation, link_memories.target_id, v_weight, v_agent,
          coalesce(link_memories.metadata, '{}'))
  on conflict (tenant_id, source_id, relation, target_id) do update set
    -- Linking again reinforces: never weaker than the edge is now, nor than asked.
    weight = greatest(cortex.decayed_weight(e.weight, e.last_reinforced_at, v_half, v_src.permanent or v_tgt.permanent,
                                            now()), excluded.weight),
    last_reinforced_at = greatest(e.last_reinforced_at, now()),
    metadata = e.metadata || excluded.metadata
  returning (e.xmax = 0) into v_created;
  select * into v_row from cortex.memory_edges e
  where e.tenant_id = v_tenant and e.source_id = link_memories.source_id and e.relation = link_memories.relation
    and e.target_id = link_memories.target_id;
  return cortex.memory_edge_json(v_row) || jsonb_build_object('created', v_created);
end $$;
comment on function public.link_memories(uuid, uuid, text, real, jsonb) is
  'Links source_id -> target_id with relation (an edge of weight 0..1, default 0.5, created_by the caller). Both ends must be nodes the caller can see (404 naming the end); '
  'a self-loop or unknown relation is 22023. An existing edge is reinforced instead: weight = greatest(its decayed weight now, weight), last_reinforced_at = now, metadata merged. '
  'Returns the edge and created=true|false.';
grant execute on function public.link_memories(uuid, uuid, text, real, jsonb) to authenticated;

-- API: statistics and version --------------------------------------------------------------------

create or replace function public.graph_stats() returns jsonb
language plpgsql stable set search_path = '' as $$
declare
  v_tenant uuid := cortex.require_tenant();
  v_settings cortex.memory_settings := cortex.memory_config(v_tenant);
  v_nodes jsonb;
  v_edges jsonb;
begin
  -- One pass over the tenant's nodes, one over its edges, each grouped as small as it gets.
  with g as (
    select n.kind, n.status, count(*) as n,
           count(*) filter (where n.embed_status = 'pending') as embed_pending,
           count(*) filter (where n.embed_status = 'failed') as embed_failed,
           count(*) filter (where n.link_status = 'pending') as link_pending,
           count(*) filter (where n.link_status = 'failed') as link_failed,
           count(*) filter (where n.needs_review) as review
    from cortex.memory_nodes n where n.tenant_id = v_tenant group by n.kind, n.status
  )
  select jsonb_build_object(
    'total', coalesce((select sum(g.n) from g), 0),
    'by_kind', (select jsonb_object_agg(k, coalesce((select sum(g.n) from g where g.kind = k), 0) order by o)
                from unnest(cortex.node_kinds()) with ordinality k (k, o)),
    'by_status', (select jsonb_object_agg(k, coalesce((select sum(g.n) from g where g.status = k), 0) order by o)
                  from unnest(cortex.memory_statuses()) with ordinality k (k, o)),
    'pending_embedding', coalesce((select sum(g.embed_pending) from g), 0),
    'failed_embedding', coalesce((select sum(g.embed_failed) from g), 0),
    'pending_linking', coalesce((select sum(g.link_pending) from g), 0),
    'failed_linking', coalesce((select sum(g.link_failed) from g), 0),
    'needs_review', coalesce((select sum(g.review) from g), 0))
  into v_nodes;

  with g as (
    select e.relation, count(*) as n from cortex.memory_edges e where e.tenant_id = v_tenant group by e.relation
  )
  select jsonb_build_object(
    'total', coalesce((select sum(g.n) from g), 0),
    'by_relation', (select jsonb_object_agg(k, coalesce((select g.n from g where g.relation = k), 0) order by o)
                    from unnest(cortex.edge_relations()) with ordinality k (k, o)))
  into v_edges;

  return jsonb_build_object(
    'nodes', v_nodes, 'edges', v_edges, 'version', cortex.graph_version(v_tenant),
    'settings', jsonb_build_object('half_life_days', v_settings.half_life_days, 'min_weight', v_settings.min_weight,
                                   'min_importance', v_settings.min_importance,
                                   'reinforce_step', v_settings.reinforce_step));
end $$;
comment on function public.graph_stats() is
  'The caller''s view of its tenant''s graph (RLS: other agents'' private nodes and edges are not counted): nodes by kind and by status, '
  'nodes pending or failed in the worker''s embedding and linking, nodes needing review, edges by relation, the graph version and the decay settings.';
grant execute on function public.graph_stats() to authenticated;

create or replace function public.graph_version() returns jsonb
language plpgsql stable set search_path = '' as $$
begin
  return jsonb_build_object('version', cortex.graph_version(cortex.require_tenant()));
end $$;
comment on function public.graph_version() is
  'The caller''s tenant''s graph version {version}: it advances with every committed write to nodes or edges (not with reinforcement). Briefing caches key on it.';
grant execute on function public.graph_version() to authenticated;

-- Operators: settings ----------------------------------------------------------------------------

create or replace function cortex.set_memory_settings(p_tenant_id uuid, p_settings jsonb) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_allowed text[] := array(
    select a.attname::text from pg_catalog.pg_attribute a
    where a.attrelid = 'cortex.memory_settings'::regclass and a.attnum > 0 and not a.attisdropped
      and a.attname not in ('tenant_id', 'updated_at')
    order by a.attnum);
  v_key text;
  v_constraint text;
  v_row cortex.memory_settings;
begin
  if p_settings is null or jsonb_typeof(p_settings) <> 'object' then
    raise exception 'settings must be a JSON object' using errcode = '22023', column = 'settings';
  end if;
  for v_key in select jsonb_object_keys(p_settings) loop
    if not (v_key = any (v_allowed)) then
      raise exception 'unknown setting "%"; settings are: %', left(v_key, 100), array_to_string(v_allowed, ', ')
        using errcode = '22023', column = v_key;
    end if;
    if jsonb_typeof(p_settings -> v_key) = 'null' then
      raise exception '% cannot be null', v_key using errcode = '22023', column = v_key;
    end if;
    begin
      perform jsonb_populate_record(null::cortex.memory_settings, jsonb_build_object(v_key, p_settings -> v_key));
    exception when data_exception or undefined_object then
      raise exception '% is not a valid value: %', v_key, sqlerrm using errcode = '22023', column = v_key;
    end;
  end loop;
  if not exists (select from cortex.memory_settings s where s.tenant_id = p_tenant_id) then
    raise exception 'tenant % not found', p_tenant_id using errcode = 'P0002', column = 'tenant_id';
  end if;

  begin
    -- Every column but the key and the stamp, so a setting added later is settable at once.
    execute format(
      'update cortex.memory_settings s set (%s) = (select %s from pg_catalog.jsonb_populate_record(s, $1) r) '
      'where s.tenant_id = $2 returning s.*',
      (select string_agg(format('%I', c), ', ') from unnest(v_allowed) c),
      (select string_agg(format('r.%I', c), ', ') from unnest(v_allowed) c))
    into v_row using p_settings, p_tenant_id;
  exception when check_violation then
    get stacked diagnostics v_constraint = constraint_name;
    v_key := regexp_replace(v_constraint, '^memory_settings_(.*)_check$', '\1');
    raise exception '% is out of range', v_key using errcode = '22023', column = v_key,
      detail = format('constraint %s', v_constraint);
  end;
  return to_jsonb(v_row) - 'tenant_id';
end $$;
comment on function cortex.set_memory_settings(uuid, jsonb) is
  'Operators: sets some of a tenant''s memory settings ({"half_life_days": 14, ...}); absent keys are kept. An unknown key, a null, '
  'a value of the wrong type or out of the table''s range is SQLSTATE 22023 naming the key. Returns the settings row.';
revoke execute on function cortex.set_memory_settings(uuid, jsonb) from public, anon, authenticated, service_role;
