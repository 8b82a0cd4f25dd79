-- Embeddings, linking and hybrid search of the memory graph (issue 13).
--
-- The nodes are their own queue: a node whose embed_status or link_status is 'pending' waits for
-- the worker (cortex.memories.jobs), which claims batches under a lease (claim_memory_index),
-- embeds them in one model call, stores the vectors in one statement (store_memory_embeddings:
-- only where the content is unchanged), folds near-duplicates into older nodes
-- (dedup_memory_embeddings) and links them (auto_link: relates_to, mentions, heuristic
-- contradicts). A node that keeps failing is parked as 'failed' with an alert (fail_memory_index).
-- Writes never wait for any of it: a node is searchable by text at once, by vector once embedded.
--
-- public.search_memories fuses three rankings (full text, vector, graph proximity to anchors) by
-- reciprocal rank: score = sum over rankings r of weight_r / (rrf_k + rank_r).
--
-- Bookkeeping writes of the worker (leases, attempts, statuses, vectors) set cortex.reinforcing
-- for their statement, so they do not advance the graph version (the knowledge did not change);
-- the edges it adds and the duplicates it archives do.

-- Settings and indexes ---------------------------------------------------------------------------

alter table cortex.memory_settings
  add column contradiction_cosine real not null default 0.8 check (contradiction_cosine between 0 and 1);
comment on column cortex.memory_settings.contradiction_cosine is
  'Auto-linker: two facts, preferences or decisions at least this similar, with different numbers or opposite negation, are flagged as a likely contradiction.';

alter table cortex.memory_settings
  add column text_candidate_budget int not null default 2000 check (text_candidate_budget between 1 and 1000000);
comment on column cortex.memory_settings.text_candidate_budget is
  'search_memories: the text matches a query may read and rank (expected, by cortex.memory_lexemes). When even the query''s rarest word is expected to match more and a query vector is given, text only re-ranks the vector and graph candidates (used.text_mode rerank).';

-- The auto-linker looks names up here: one index probe per candidate word group of a node, not a
-- scan of every entity per node.
create index memory_nodes_entity_names on cortex.memory_nodes (tenant_id, lower(title))
  where kind in ('agent', 'contact', 'person', 'system') and status = 'active';

-- Wake the worker ---------------------------------------------------------------------------------

create or replace function cortex.wake_memory_index() returns trigger
language plpgsql set search_path = '' as $$
begin
  -- Any role can LISTEN, so the signal carries nothing: it only wakes workers.
  perform pg_notify('cortex_jobs', '');
  return null;
end $$;
comment on function cortex.wake_memory_index() is
  'Trigger: new nodes (statement) or changed content (row) wake idle workers with an empty NOTIFY cortex_jobs.';
revoke execute on function cortex.wake_memory_index() from public, anon, authenticated, service_role;
create trigger memory_nodes_wake_index after insert on cortex.memory_nodes
  for each statement execute function cortex.wake_memory_index();
-- NOTIFY folds identical signals of one transaction, so a row trigger here costs one signal.
create trigger memory_nodes_wake_reindex after update of title, body on cortex.memory_nodes for each row
  when (old.content_hash is distinct from new.content_hash) execute function cortex.wake_memory_index();

-- Text helpers of the linker ---------------------------------------------------------------------

-- cortex.memory_numbers and cortex.memory_negated: defined with the writes (20261122002100_memories.sql).

create or replace function cortex.memory_conflict(p_a text, p_b text) returns text
language sql immutable parallel safe set search_path = '' as $$
  select case
    when cardinality(cortex.memory_numbers(p_a)) > 0 and cardinality(cortex.memory_numbers(p_b)) > 0
         and cortex.memory_numbers(p_a) <> cortex.memory_numbers(p_b)
      then format('different numbers (%s vs %s)', array_to_string(cortex.memory_numbers(p_a), ', '),
                  array_to_string(cortex.memory_numbers(p_b), ', '))
    when cortex.memory_negated(p_a) <> cortex.memory_negated(p_b) then 'opposite negation'
  end
$$;
comment on function cortex.memory_conflict(text, text) is
  'Why two similar texts may contradict each other (different numbers, opposite negation), or null. Also keeps such pairs from being merged as duplicates.';

create or replace function cortex.memory_name_grams(p_text text, p_max_words int default 4) returns setof text
language sql immutable parallel safe set search_path = '' as $$
  -- Words (letters and digits, inner @ . _ ' - kept: emails, O'Brien, Jean-Luc), a possessive
  -- 's dropped, then every run of 1..p_max_words consecutive words: the names a text may hold.
  with words as (
    select m.ord, regexp_replace(m.w[1], '[''’]s$', '') as w
    from regexp_matches(lower(left(coalesce(p_text, ''), 8000)),
                        '([[:alnum:]](?:[[:alnum:]@._''’-]*[[:alnum:]])?)', 'g') with ordinality m(w, ord)
  )
  select distinct g.gram from (
    select string_agg(b.w, ' ' order by b.ord) as gram, count(*) as n, k.k
    from words a cross join generate_series(1, p_max_words) k(k)
    join words b on b.ord between a.ord and a.ord + k.k - 1
    group by a.ord, k.k
  ) g
  where g.n = g.k and length(g.gram) >= 3
$$;
comment on function cortex.memory_name_grams(text, int) is
  'Candidate names in a text: each run of 1..4 consecutive words, lower-cased (the first 8,000 characters). The auto-linker looks them up in memory_nodes_entity_names.';

grant execute on function cortex.memory_conflict(text, text), cortex.memory_name_grams(text, int) to authenticated, service_role;

-- The worker's queue: claim, store, fail -----------------------------------------------------------

create or replace function cortex.claim_memory_index(p_worker text, p_limit int default 64, p_lease_seconds int default 120)
returns table (tenant_id uuid, id uuid, content_hash text, text text, kind text, embed_status text,
               link_status text, attempts int)
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
begin
  perform pg_catalog.set_config('cortex.reinforcing', 'on', true);  -- a lease is not a graph change
  return query
  update cortex.memory_nodes n
  set index_locked_until = now() + make_interval(secs => p_lease_seconds), index_attempts = n.index_attempts + 1
  from (
    select q.tenant_id, q.id from cortex.memory_nodes q
    where (q.embed_status = 'pending' or q.link_status = 'pending')
      and (q.index_locked_until is null or q.index_locked_until < now())
    order by q.created_at
    limit p_limit
    for update skip locked
  ) c
  where n.tenant_id = c.tenant_id and n.id = c.id
  returning n.tenant_id, n.id, n.content_hash, n.title || E'\n' || left(n.body, 4000), n.kind, n.embed_status,
            n.link_status, n.index_attempts;
  perform pg_catalog.set_config('cortex.reinforcing', 'off', true);
end $$;
comment on function cortex.claim_memory_index(text, int, int) is
  'Worker: claims up to p_limit nodes whose embedding or links are pending and whose lease is free (FOR UPDATE SKIP LOCKED), leases them for p_lease_seconds and counts the attempt. '
  'Returns tenant, id, content_hash (to store the vector only if unchanged), the text to embed (title and body), kind and statuses. p_worker names the caller in logs.';
revoke execute on function cortex.claim_memory_index(text, int, int) from public, anon, authenticated, service_role;

create or replace function cortex.store_memory_embeddings(p_items jsonb) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_done int;
  v_skipped int;
  v_stale jsonb;
begin
  if jsonb_typeof(p_items) is distinct from 'array' then
    raise exception 'items must be a JSON array' using errcode = '22023', column = 'items';
  end if;
  perform pg_catalog.set_config('cortex.reinforcing', 'on', true);
  create temporary table if not exists pg_temp.memory_embedding_items (
    tenant_id uuid, id uuid, content_hash text, embedding extensions.vector(384)) on commit drop;
  truncate pg_temp.memory_embedding_items;
  insert into pg_temp.memory_embedding_items
  select (i ->> 'tenant_id')::uuid, (i ->> 'id')::uuid, i ->> 'content_hash',
         case when jsonb_typeof(i -> 'embedding') = 'array' then (i ->> 'embedding')::extensions.vector(384) end
  from jsonb_array_elements(p_items) i;

  -- Only where the content is the one embedded: an edit meanwhile left the node pending again.
  with u as (
    update cortex.memory_nodes n
    set embedding = i.embedding, embed_status = case when i.embedding is null then 'skipped' else 'done' end,
        index_error = null
    from pg_temp.memory_embedding_items i
    where n.tenant_id = i.tenant_id and n.id = i.id and n.content_hash = i.content_hash and n.embed_status = 'pending'
    returning n.embed_status
  )
  select count(*) filter (where u.embed_status = 'done'), count(*) filter (where u.embed_status = 'skipped')
  into v_done, v_skipped from u;

  with s as (
    update cortex.memory_nodes n set index_locked_until = null
    from pg_temp.memory_embedding_items i
    where n.tenant_id = i.tenant_id and n.id = i.id and n.content_hash <> i.content_hash
    returning n.id
  )
  select coalesce(jsonb_agg(s.id), '[]') into v_stale from s;
  perform pg_catalog.set_config('cortex.reinforcing', 'off', true);
  return jsonb_build_object('stored', v_done, 'skipped', v_skipped, 'stale', v_stale);
end $$;
comment on function cortex.store_memory_embeddings(jsonb) is
  'Worker: stores a batch of vectors in one statement. p_items: [{tenant_id, id, content_hash, embedding: [384 floats] | null}]; a null embedding (provider none) marks the node skipped. '
  'A node whose content changed since its claim is left pending, its lease released. Returns {stored, skipped, stale: [ids]}.';
revoke execute on function cortex.store_memory_embeddings(jsonb) from public, anon, authenticated, service_role;

create or replace function cortex.fail_memory_index(
  p_tenant_ids uuid[], p_ids uuid[], p_error text, p_max_attempts int default 5
) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_retry int;
  v_parked int;
begin
  perform pg_catalog.set_config('cortex.reinforcing', 'on', true);
  create temporary table if not exists pg_temp.memory_index_failures (
    tenant_id uuid, id uuid, parked boolean) on commit drop;
  truncate pg_temp.memory_index_failures;
  with f as (
    update cortex.memory_nodes n
    set index_error = left(coalesce(p_error, 'unknown error'), 2000),
        embed_status = case when n.index_attempts >= p_max_attempts and n.embed_status = 'pending' then 'failed'
                            else n.embed_status end,
        link_status = case when n.index_attempts >= p_max_attempts and n.link_status = 'pending' then 'failed'
                           else n.link_status end,
        -- Retried after 10 s, 20 s, 40 s, ... (at most an hour); parked nodes wait for `reindex`.
        index_locked_until = case when n.index_attempts >= p_max_attempts then null
                                  else now() + make_interval(secs => least(3600, 10 * power(2, greatest(n.index_attempts - 1, 0)))) end
    from unnest(p_tenant_ids, p_ids) k(tenant_id, id)
    where n.tenant_id = k.tenant_id and n.id = k.id
    returning n.tenant_id, n.id, n.index_attempts >= p_max_attempts
  )
  insert into pg_temp.memory_index_failures select * from f;
  perform pg_catalog.set_config('cortex.reinforcing', 'off', true);

  insert into cortex.alerts (tenant_id, kind, severity, message, details)
  select f.tenant_id, 'memory_index_parked', 'warning',
         format('%s memory node(s) failed embedding or linking %s times and were parked: %s',
                count(*), p_max_attempts, left(p_error, 300)),
         jsonb_build_object('node_ids', jsonb_agg(f.id), 'error', left(p_error, 2000))
  from pg_temp.memory_index_failures f where f.parked group by f.tenant_id;
  if found then
    perform pg_notify('cortex_alerts', '');  -- a wake-up only: any role can LISTEN
  end if;
  select count(*) filter (where not f.parked), count(*) filter (where f.parked) into v_retry, v_parked
  from pg_temp.memory_index_failures f;
  return jsonb_build_object('retry', v_retry, 'parked', v_parked);
end $$;
comment on function cortex.fail_memory_index(uuid[], uuid[], text, int) is
  'Worker: records a failed embedding or linking of these nodes: retried with backoff (the lease), or after p_max_attempts parked as failed with one memory_index_parked alert per tenant. Returns {retry, parked}.';
revoke execute on function cortex.fail_memory_index(uuid[], uuid[], text, int) from public, anon, authenticated, service_role;

create or replace function cortex.reindex_memories(p_tenant_id uuid, p_statuses text[] default array['failed', 'skipped'])
returns int
language plpgsql volatile set search_path = '' as $$
declare v_n int;
begin
  perform pg_catalog.set_config('cortex.reinforcing', 'on', true);
  update cortex.memory_nodes n
  set embed_status = case when n.embed_status = any (p_statuses) then 'pending' else n.embed_status end,
      link_status = case when n.link_status = any (p_statuses) or n.embed_status = any (p_statuses) then 'pending'
                         else n.link_status end,
      index_attempts = 0, index_error = null, index_locked_until = null
  where n.tenant_id = p_tenant_id and n.status <> 'archived'
    and (n.embed_status = any (p_statuses) or n.link_status = any (p_statuses));
  get diagnostics v_n = row_count;
  perform pg_catalog.set_config('cortex.reinforcing', 'off', true);
  perform pg_notify('cortex_jobs', '');
  return v_n;
end $$;
comment on function cortex.reindex_memories(uuid, text[]) is
  'Operator (cortex memories reindex): sends the tenant''s nodes whose embedding or links are in p_statuses (default failed and skipped) back to the worker with fresh attempts. Returns how many.';
revoke execute on function cortex.reindex_memories(uuid, text[]) from public, anon, authenticated, service_role;

-- De-duplication by embedding (the third test, after exact and trigram on write) ---------------------

create or replace function cortex.dedup_memory_embeddings(p_tenant_id uuid, p_ids uuid[]) returns jsonb
language plpgsql volatile
set search_path = '' set hnsw.iterative_scan = 'relaxed_order' set hnsw.ef_search = 100 as $$
declare
  v_cos real := (select s.dedup_cosine from cortex.memory_settings s where s.tenant_id = p_tenant_id);
  r record;
  o record;
  v_merged jsonb := '[]';
begin
  -- Oldest first, each against strictly older nodes: a chain of copies folds into its first.
  for r in
    select n.id, n.kind, n.scope, n.contact_id, n.created_at, n.tags, n.embedding, n.title || ' ' || n.body as text
    from cortex.memory_nodes n
    where n.tenant_id = p_tenant_id and n.id = any (p_ids) and n.status = 'active' and n.ref_kind is null
      and n.key is null and n.embedding is not null and n.kind = any (cortex.memory_kinds())
    order by n.created_at, n.id
  loop
    -- The nearest older nodes of its kind, scope and contact: about a contact, all of that
    -- contact's (an index, then exact distances); else the tenant's 40 nearest through HNSW, then
    -- the filters. One statement with every filter misled the planner (a null contact's share is
    -- hard to estimate): it sorted all 33,000 facts of a tenant by distance, 300-500 ms a node.
    select c.id, c.sim into o
    from (
      select x.id, (1 - x.d)::real as sim, x.text
      from (
        select x.id, x.kind, x.scope, x.contact_id, x.created_at, x.title || ' ' || x.body as text,
               x.embedding operator(extensions.<=>) r.embedding as d
        from cortex.memory_nodes x
        where r.contact_id is not null
          and x.tenant_id = p_tenant_id and x.contact_id = r.contact_id and x.status = 'active' and x.ref_kind is null
          and x.embedding is not null
        union all
        (select x.id, x.kind, x.scope, x.contact_id, x.created_at, x.title || ' ' || x.body,
                x.embedding operator(extensions.<=>) r.embedding
         from cortex.memory_nodes x
         where r.contact_id is null
           and x.tenant_id = p_tenant_id and x.status = 'active' and x.ref_kind is null and x.embedding is not null
         order by x.embedding operator(extensions.<=>) r.embedding
         limit 40)
      ) x
      where x.kind = r.kind and x.scope = r.scope and x.contact_id is not distinct from r.contact_id
        and (x.created_at, x.id) < (r.created_at, r.id)
      order by x.d
      limit 5
    ) c
    -- Similar wording with other numbers or the opposite negation is a contradiction, not a copy.
    where c.sim >= v_cos and cortex.memory_conflict(c.text, r.text) is null
    order by c.sim desc, c.id
    limit 1;
    continue when o.id is null;
    update cortex.memory_nodes n
    set importance = least(1, n.importance + 0.05)::real,
        tags = (select coalesce(array_agg(t order by t), '{}') from (
                  select distinct t from unnest(n.tags || r.tags) t order by t limit 50) u)
    where n.tenant_id = p_tenant_id and n.id = o.id;
    update cortex.memory_nodes n
    set status = 'archived', link_status = 'skipped', index_locked_until = null, indexed_at = now(),
        metadata = n.metadata || jsonb_build_object('duplicate_of', o.id, 'duplicate_similarity', round(o.sim::numeric, 4))
    where n.tenant_id = p_tenant_id and n.id = r.id;
    insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight, created_by, metadata)
    values (p_tenant_id, o.id, 'consolidated_from', r.id, least(1, greatest(0, o.sim)), 'system',
            jsonb_build_object('by', 'embedding_dedup', 'similarity', round(o.sim::numeric, 4)))
    on conflict do nothing;
    v_merged := v_merged || jsonb_build_object('id', r.id, 'duplicate_of', o.id, 'similarity', round(o.sim::numeric, 4));
  end loop;
  return jsonb_build_object('merged', v_merged);
end $$;
comment on function cortex.dedup_memory_embeddings(uuid, uuid[]) is
  'Worker: folds each newly embedded memory (no ref_kind, no key) into an older active node of the same kind, scope and contact with cosine similarity >= dedup_cosine '
  '(and no conflicting numbers or negation): the older gains importance (+0.05, capped) and the tags, the newer is archived with metadata.duplicate_of and an edge older -consolidated_from-> newer. Never deletes.';
revoke execute on function cortex.dedup_memory_embeddings(uuid, uuid[]) from public, anon, authenticated, service_role;

-- The auto-linker -----------------------------------------------------------------------------------

create or replace function cortex.auto_link(p_tenant_id uuid, p_ids uuid[]) returns jsonb
language plpgsql volatile
set search_path = '' set hnsw.iterative_scan = 'relaxed_order' set hnsw.ef_search = 100 as $$
declare
  v_cfg cortex.memory_settings;
  v_relates int;
  v_mentions int;
  v_contradicts int;
  v_done int;
  v_inactive int;
  v_candidates jsonb;
begin
  select * into v_cfg from cortex.memory_settings s where s.tenant_id = p_tenant_id;
  create temporary table if not exists pg_temp.memory_link_nodes (
    id uuid primary key, kind text, scope text, created_at timestamptz, text text,
    embedding extensions.vector(384)) on commit drop;
  create temporary table if not exists pg_temp.memory_link_neighbors (
    source_id uuid, target_id uuid, similarity real) on commit drop;
  truncate pg_temp.memory_link_nodes, pg_temp.memory_link_neighbors;

  -- The nodes to link: pending, and embedded (or embedding skipped or parked) in their current content.
  insert into pg_temp.memory_link_nodes
  select n.id, n.kind, n.scope, n.created_at, n.title || E'\n' || n.body, n.embedding
  from cortex.memory_nodes n
  where n.tenant_id = p_tenant_id and n.id = any (p_ids) and n.link_status = 'pending'
    and n.embed_status <> 'pending' and n.status = 'active'
  for update of n;

  -- The five nearest active non-entity nodes of each (HNSW, iterative scan), scopes that may be joined.
  insert into pg_temp.memory_link_neighbors
  select s.id, c.id, c.sim
  from pg_temp.memory_link_nodes s
  cross join lateral (
    select x.id, (1 - (x.embedding operator(extensions.<=>) s.embedding))::real as sim
    from cortex.memory_nodes x
    where x.tenant_id = p_tenant_id and x.status = 'active' and x.embedding is not null and x.id <> s.id
      and x.kind not in ('agent', 'contact', 'person', 'system')
      and (x.scope = '' or s.scope = '' or x.scope = s.scope)
    order by x.embedding operator(extensions.<=>) s.embedding
    limit 5
  ) c
  where s.embedding is not null and s.kind not in ('agent', 'contact', 'person', 'system');

  -- relates_to: the top 3 above link_cosine, weight = the similarity; one direction per pair.
  with cand as (
    select nb.source_id, nb.target_id, nb.similarity
    from (select nb.*, row_number() over (partition by nb.source_id order by nb.similarity desc, nb.target_id) as rk
          from pg_temp.memory_link_neighbors nb where nb.similarity >= v_cfg.link_cosine) nb
    where nb.rk <= 3
  ), made as (
    insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight, created_by, metadata)
    select p_tenant_id, c.source_id, 'relates_to', c.target_id, least(1, c.similarity), 'system',
           jsonb_build_object('by', 'auto_linker', 'similarity', round(c.similarity::numeric, 4))
    from cand c
    where not exists (select from cand r where r.source_id = c.target_id and r.target_id = c.source_id
                                           and r.source_id > c.source_id)
      and not exists (select from cortex.memory_edges e where e.tenant_id = p_tenant_id and e.source_id = c.target_id
                                                          and e.relation = 'relates_to' and e.target_id = c.source_id)
    on conflict do nothing
    returning 1
  )
  select count(*) into v_relates from made;

  -- mentions: entities whose name (title) is a run of words of the text; indexed lookups per word group.
  with grams as (
    select s.id as source_id, s.scope, g.gram
    from pg_temp.memory_link_nodes s cross join lateral cortex.memory_name_grams(s.text) g(gram)
    where s.kind not in ('agent', 'contact', 'person', 'system')
  ), made as (
    insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight, created_by, metadata)
    select distinct p_tenant_id, g.source_id, 'mentions', en.id, 0.5::real, 'system', '{"by": "auto_linker"}'::jsonb
    from grams g
    join cortex.memory_nodes en
      on en.tenant_id = p_tenant_id and lower(en.title) = g.gram
     and en.kind in ('agent', 'contact', 'person', 'system') and en.status = 'active'
    where en.id <> g.source_id and (en.scope = '' or g.scope = '' or en.scope = g.scope)
    on conflict do nothing
    returning 1
  )
  select count(*) into v_mentions from made;

  -- Heuristic contradictions: very similar facts, preferences or decisions with other numbers or
  -- the opposite negation: newer -contradicts-> older, the newer flagged for review.
  create temporary table if not exists pg_temp.memory_link_conflicts (
    newer_id uuid, older_id uuid, similarity real, reason text) on commit drop;
  truncate pg_temp.memory_link_conflicts;
  insert into pg_temp.memory_link_conflicts
  select distinct on (p.newer_id, p.older_id) p.newer_id, p.older_id, p.similarity, p.reason
  from (
    select case when (s.created_at, s.id) > (o.created_at, o.id) then s.id else o.id end as newer_id,
           case when (s.created_at, s.id) > (o.created_at, o.id) then o.id else s.id end as older_id,
           nb.similarity, cortex.memory_conflict(s.text, o.title || E'\n' || o.body) as reason
    from pg_temp.memory_link_neighbors nb
    join pg_temp.memory_link_nodes s on s.id = nb.source_id
    join cortex.memory_nodes o on o.tenant_id = p_tenant_id and o.id = nb.target_id
    where nb.similarity >= v_cfg.contradiction_cosine
      and s.kind in ('fact', 'preference', 'decision') and o.kind in ('fact', 'preference', 'decision')
  ) p
  where p.reason is not null
    and not exists (select from cortex.memory_edges e
                    where e.tenant_id = p_tenant_id and e.relation in ('contradicts', 'supersedes')
                      and ((e.source_id = p.newer_id and e.target_id = p.older_id)
                        or (e.source_id = p.older_id and e.target_id = p.newer_id)))
  order by p.newer_id, p.older_id, p.similarity desc;

  insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight, created_by, metadata)
  select p_tenant_id, c.newer_id, 'contradicts', c.older_id, least(1, c.similarity), 'system',
         jsonb_build_object('by', 'auto_linker', 'reason', c.reason, 'similarity', round(c.similarity::numeric, 4))
  from pg_temp.memory_link_conflicts c
  on conflict do nothing;
  get diagnostics v_contradicts = row_count;
  update cortex.memory_nodes n
  set needs_review = true,
      review_reason = left(format('possible contradiction with %s: %s', c.older_id, c.reason), 1000)
  from (select distinct on (x.newer_id) x.* from pg_temp.memory_link_conflicts x
        order by x.newer_id, x.similarity desc) c
  where n.tenant_id = p_tenant_id and n.id = c.newer_id;

  -- Pairs for the model (when configured): the heuristic's, then the most similar others.
  select coalesce(jsonb_agg(q.pair order by q.heuristic desc, q.similarity desc), '[]') into v_candidates
  from (
    select jsonb_build_object('newer_id', p.newer_id, 'older_id', p.older_id,
                              'similarity', round(p.similarity::numeric, 4), 'heuristic', p.reason,
                              'newer', jsonb_build_object('kind', a.kind, 'title', a.title, 'body', left(a.body, 1000)),
                              'older', jsonb_build_object('kind', b.kind, 'title', b.title, 'body', left(b.body, 1000)))
             as pair, p.reason is not null as heuristic, p.similarity
    from (
      select distinct on (x.newer_id, x.older_id) x.newer_id, x.older_id, x.similarity, c.reason
      from (
        select case when (s.created_at, s.id) > (o.created_at, o.id) then s.id else o.id end as newer_id,
               case when (s.created_at, s.id) > (o.created_at, o.id) then o.id else s.id end as older_id,
               nb.similarity
        from pg_temp.memory_link_neighbors nb
        join pg_temp.memory_link_nodes s on s.id = nb.source_id
        join cortex.memory_nodes o on o.tenant_id = p_tenant_id and o.id = nb.target_id
        where nb.similarity >= v_cfg.link_cosine
          and s.kind in ('fact', 'preference', 'decision') and o.kind in ('fact', 'preference', 'decision')
      ) x
      left join pg_temp.memory_link_conflicts c on c.newer_id = x.newer_id and c.older_id = x.older_id
      order by x.newer_id, x.older_id, x.similarity desc
    ) p
    join cortex.memory_nodes a on a.tenant_id = p_tenant_id and a.id = p.newer_id
    join cortex.memory_nodes b on b.tenant_id = p_tenant_id and b.id = p.older_id
    order by p.reason is not null desc, p.similarity desc
    limit 20
  ) q;

  perform pg_catalog.set_config('cortex.reinforcing', 'on', true);
  update cortex.memory_nodes n
  set link_status = case when n.kind in ('agent', 'contact', 'person', 'system') then 'skipped' else 'done' end,
      indexed_at = now(), index_locked_until = null
  from pg_temp.memory_link_nodes s
  where n.tenant_id = p_tenant_id and n.id = s.id;
  get diagnostics v_done = row_count;
  -- Superseded or archived before the linker reached them: nothing to link (search and links
  -- consider active nodes only), so their links end 'skipped' and the lease is released, or they
  -- would be claimed again every lease period. Their embedding, already stored, stays for "as of" search.
  update cortex.memory_nodes n
  set link_status = 'skipped', indexed_at = now(), index_locked_until = null
  where n.tenant_id = p_tenant_id and n.id = any (p_ids) and n.status <> 'active'
    and n.link_status = 'pending' and n.embed_status <> 'pending';
  get diagnostics v_inactive = row_count;
  -- The rest (edited meanwhile, or not embedded yet) go back to the queue at once.
  update cortex.memory_nodes n set index_locked_until = null
  where n.tenant_id = p_tenant_id and n.id = any (p_ids) and n.index_locked_until is not null
    and (n.link_status <> 'pending' or n.embed_status = 'pending');
  perform pg_catalog.set_config('cortex.reinforcing', 'off', true);
  return jsonb_build_object('linked', v_done, 'skipped_inactive', v_inactive, 'relates_to', v_relates, 'mentions', v_mentions,
                            'contradicts', v_contradicts, 'candidates', v_candidates);
end $$;
comment on function cortex.auto_link(uuid, uuid[]) is
  'Worker: links the given pending nodes (embedded, or embedding skipped): relates_to the 3 most similar active nodes with cosine >= link_cosine (weight = similarity); '
  'mentions the entity nodes (agent, contact, person, system) whose name is a run of words of the title or body (indexed lookups); '
  'contradicts (newer -> older, newer flagged needs_review) for facts, preferences and decisions with cosine >= contradiction_cosine and different numbers or opposite negation. '
  'Marks them linked (entities: skipped). Nodes of the batch no longer active (superseded or archived before the linker reached them) are not linked: their link_status becomes skipped and their lease is released (their stored embedding stays, for "as of" search). '
  'Returns counts (linked, skipped_inactive, relates_to, mentions, contradicts) and up to 20 candidate pairs for a model check.';
revoke execute on function cortex.auto_link(uuid, uuid[]) from public, anon, authenticated, service_role;

create or replace function cortex.apply_contradiction_verdicts(p_tenant_id uuid, p_verdicts jsonb, p_model text)
returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v jsonb;
  v_newer uuid;
  v_older uuid;
  a cortex.memory_nodes;
  b cortex.memory_nodes;
  v_added int := 0;
  v_confirmed int := 0;
  v_rejected int := 0;
  v_reason text;
begin
  if jsonb_typeof(p_verdicts) is distinct from 'array' then
    raise exception 'verdicts must be a JSON array' using errcode = '22023', column = 'verdicts';
  end if;
  for v in select * from jsonb_array_elements(p_verdicts) loop
    select * into a from cortex.memory_nodes n where n.tenant_id = p_tenant_id and n.id = (v ->> 'a')::uuid;
    select * into b from cortex.memory_nodes n where n.tenant_id = p_tenant_id and n.id = (v ->> 'b')::uuid;
    -- Only live, joinable pairs of this tenant; anything else in an answer is ignored.
    continue when a.id is null or b.id is null or a.id = b.id or a.status <> 'active' or b.status <> 'active'
                  or (a.scope <> '' and b.scope <> '' and a.scope <> b.scope);
    if (a.created_at, a.id) > (b.created_at, b.id) then
      v_newer := a.id; v_older := b.id;
    else
      v_newer := b.id; v_older := a.id;
    end if;
    v_reason := left(coalesce(v ->> 'reason', ''), 500);
    if (v ->> 'contradicts')::boolean then
      insert into cortex.memory_edges as e (tenant_id, source_id, relation, target_id, weight, created_by, metadata)
      values (p_tenant_id, v_newer, 'contradicts', v_older, 0.8, 'system',
              jsonb_build_object('by', 'model', 'model', p_model, 'model_verdict', 'confirmed', 'model_reason', v_reason))
      on conflict (tenant_id, source_id, relation, target_id) do update
        set metadata = e.metadata || jsonb_build_object('model', p_model, 'model_verdict', 'confirmed',
                                                        'model_reason', v_reason);
      if (select (x.metadata ->> 'by') = 'model' from cortex.memory_edges x
          where x.tenant_id = p_tenant_id and x.source_id = v_newer and x.relation = 'contradicts' and x.target_id = v_older) then
        v_added := v_added + 1;
      else
        v_confirmed := v_confirmed + 1;
      end if;
      update cortex.memory_nodes n
      set needs_review = true,
          review_reason = coalesce(n.review_reason,
                                   left(format('contradicts %s (model): %s', v_older, v_reason), 1000))
      where n.tenant_id = p_tenant_id and n.id = v_newer;
    else
      -- A rejection never removes anything: it is noted on the heuristic's edge for the reviewer.
      update cortex.memory_edges e
      set metadata = e.metadata || jsonb_build_object('model', p_model, 'model_verdict', 'rejected', 'model_reason', v_reason)
      where e.tenant_id = p_tenant_id and e.source_id = v_newer and e.relation = 'contradicts' and e.target_id = v_older;
      v_rejected := v_rejected + 1;
    end if;
  end loop;
  return jsonb_build_object('added', v_added, 'confirmed', v_confirmed, 'rejected', v_rejected);
end $$;
comment on function cortex.apply_contradiction_verdicts(uuid, jsonb, text) is
  'Worker: applies a model''s validated verdicts [{a, b, contradicts, reason}] on candidate pairs: a contradiction adds (or confirms) newer -contradicts-> older and flags the newer for review; '
  'a rejection is noted on an existing heuristic edge. Never deletes, never supersedes. Returns {added, confirmed, rejected}.';
revoke execute on function cortex.apply_contradiction_verdicts(uuid, jsonb, text) from public, anon, authenticated, service_role;

-- Hybrid search ------------------------------------------------------------------------------------

-- The operands of a web-search query: websearch_to_tsquery's output is a flat list of operands
-- joined by & and |: single lexemes, phrases ('a' <-> 'b') and negations (!'a', !( 'a' <-> 'b' ));
-- no operand holds & or |.
create or replace function cortex.memory_query_operands(p_config regconfig, p_query text)
returns table (op text, neg boolean, ord bigint)
language sql stable parallel safe set search_path = '' as $$
  select o.op, o.op like '!%', o.ord
  from pg_catalog.websearch_to_tsquery(p_config, p_query) q (tsq)
  cross join lateral pg_catalog.regexp_split_to_table(q.tsq::text, ' [&|] ') with ordinality o (op, ord)
  where pg_catalog.numnode(q.tsq) > 0
$$;
comment on function cortex.memory_query_operands(regconfig, text) is
  'The operands of websearch_to_tsquery(p_config, p_query) in order: single lexemes, phrases and negations (neg), each as tsquery text.';
grant execute on function cortex.memory_query_operands(regconfig, text) to authenticated, service_role;

create or replace function cortex.memory_any_tsquery(p_config regconfig, p_query text) returns tsquery
language sql stable parallel safe set search_path = '' as $$
  with parts as (
    select string_agg(o.op, ' | ' order by o.ord) filter (where not o.neg) as anyof,
           string_agg(o.op, ' & ' order by o.ord) filter (where o.neg) as noneof
    from cortex.memory_query_operands(p_config, p_query) o
  )
  -- Negations only (or nothing): as websearch says.
  select case when p.anyof is null then pg_catalog.websearch_to_tsquery(p_config, p_query)
              else (case when p.noneof is null then '( ' || p.anyof || ' )'
                         else '( ' || p.anyof || ' ) & ' || p.noneof end)::tsquery end
  from parts p
$$;
comment on function cortex.memory_any_tsquery(regconfig, text) is
  'The full-text query of search_memories: websearch_to_tsquery(p_config, p_query) with its AND turned into OR, so a document matching any of the query''s words (or quoted phrases) matches; '
  'ts_rank_cd still ranks those matching more of them first. Quoted phrases stay phrases and negated words (-word, -"a phrase") still exclude: (w1 | w2 | "p h") & !n. '
  'A query of negations only is websearch''s as it is.';
grant execute on function cortex.memory_any_tsquery(regconfig, text) to authenticated, service_role;

create or replace function cortex.memory_text_candidates(
  p_tenant_id uuid, p_config regconfig, p_query text, p_budget int
) returns table (query tsquery, expected bigint)
language sql stable parallel safe set search_path = '' as $$
  -- A phrase is as rare as its rarest word; a word not counted is rarer than any counted one.
  with ops as (
    select o.op, o.neg, o.ord,
           coalesce((select min(coalesce(l.ndoc, 0))
                     from pg_catalog.regexp_matches(o.op, '''((?:[^'']|'''')*)''', 'g') m (lex)
                     left join cortex.memory_lexemes l
                       on l.tenant_id = p_tenant_id and l.lexeme = pg_catalog.replace(m.lex[1], '''''', '''')), 0) as df
    from cortex.memory_query_operands(p_config, p_query) o
  ),
  ranked as (
    select x.op, x.ord, sum(x.df) over w as upto, row_number() over w as pos
    from ops x where not x.neg
    window w as (order by x.df, x.ord)
  ),
  kept as (
    select r.op, r.ord, r.upto from ranked r where r.upto <= p_budget or r.pos = 1
  ),
  parts as (
    select (select string_agg(k.op, ' | ' order by k.ord) from kept k) as anyof,
           (select max(k.upto) from kept k) as expected,
           (select string_agg(x.op, ' & ' order by x.ord) from ops x where x.neg) as noneof
  )
  select case when p.anyof is null then pg_catalog.websearch_to_tsquery(p_config, p_query)
              else (case when p.noneof is null then '( ' || p.anyof || ' )'
                         else '( ' || p.anyof || ' ) & ' || p.noneof end)::tsquery end,
         p.expected::bigint
  from parts p
$$;
comment on function cortex.memory_text_candidates(uuid, regconfig, text, int) is
  'The query that picks search_memories'' text candidates in a tenant, and how many rows it is expected to match: memory_any_tsquery''s operands, rarest first (cortex.memory_lexemes), as many as keep the expected matches under p_budget '
  '(always at least the rarest), with the negations kept. expected = the summed counts of the operands kept (above p_budget only when the rarest alone is; a word not counted is 0); null for a query of negations only (websearch''s query as it is). '
  'The query equals memory_any_tsquery when every operand fits the budget.';
grant execute on function cortex.memory_text_candidates(uuid, regconfig, text, int) to authenticated, service_role;

create or replace function cortex.memory_candidate_tsquery(
  p_tenant_id uuid, p_config regconfig, p_query text, p_budget int
) returns tsquery
language sql stable parallel safe set search_path = '' as $$
  select c.query from cortex.memory_text_candidates(p_tenant_id, p_config, p_query, p_budget) c
$$;
comment on function cortex.memory_candidate_tsquery(uuid, regconfig, text, int) is
  'The query part of cortex.memory_text_candidates: the operands of memory_any_tsquery, rarest first, as many as keep the expected matches under p_budget (always at least the rarest), negations kept.';
grant execute on function cortex.memory_candidate_tsquery(uuid, regconfig, text, int) to authenticated, service_role;

-- Definer: `@@` is not leakproof, so under RLS the planner may not use the full-text index for it
-- and reads every row of the tenant (60,000 rows for a rare word at scale 0.1; docs/benchmarks.md).
-- The tenant and the agent come from the request's claims, never from an argument, and the
-- visibility rule is the select policy's.
create or replace function cortex.memory_text_ranking(
  p_query tsquery, p_candidates tsquery, p_statuses text[], p_kinds text[], p_agent text, p_contact_id uuid,
  p_tags text[], p_since timestamptz, p_until timestamptz, p_as_of timestamptz, p_limit int
) returns uuid[]
language plpgsql stable security definer set search_path = '' as $$
declare
  v_tenant uuid := cortex.require_tenant();
  v_me text := cortex.current_agent();
  v_ids uuid[];
begin
  -- Callable on its own by any agent: bounded like search_memories' rankings.
  if p_limit is null or p_limit not between 1 and 400 then
    raise exception 'p_limit must be between 1 and 400' using errcode = '22023', column = 'p_limit';
  end if;
  -- EXECUTE: planned for this query's words (a cached generic plan cannot know that they are
  -- rare and reads the whole tenant); candidates by the rarest words, ranked by all of them.
  execute $q$
    select coalesce(array_agg(c.id order by c.r desc, c.id), '{}')
    from (
      select n.id, pg_catalog.ts_rank_cd(n.fts, $2) as r
      from cortex.memory_nodes n
      where n.tenant_id = $1 and n.fts operator(pg_catalog.@@) $3 and n.status = any ($4)
        and (n.visibility = 'shared' or n.source_agent = $13)
        and ($5::text[] is null or n.kind = any ($5))
        and ($6::text is null or n.source_agent = $6)
        and ($7::uuid is null or n.contact_id = $7)
        and ($8::text[] is null or n.tags operator(pg_catalog.@>) $8)
        and ($9::timestamptz is null or n.created_at >= $9)
        and ($10::timestamptz is null or n.created_at < $10)
        and ($11::timestamptz is null or (n.valid_from <= $11 and (n.valid_to is null or n.valid_to > $11)))
      order by r desc, n.id
      limit $12
    ) c $q$
  into v_ids
  using v_tenant, p_query, p_candidates, p_statuses, p_kinds, p_agent, p_contact_id, p_tags, p_since, p_until,
        p_as_of, p_limit, v_me;
  return v_ids;
end $$;
comment on function cortex.memory_text_ranking(tsquery, tsquery, text[], text[], text, uuid, text[], timestamptz,
  timestamptz, timestamptz, int) is
  'search_memories'' text ranking in the candidates mode: the ids of the caller''s tenant''s nodes matching p_candidates (found through the full-text index) that pass the filters and are visible to the calling agent (shared, or its own private ones: the select policy), ranked by ts_rank_cd against p_query, at most p_limit (1..400, else 22023 naming p_limit). Tenant and agent from the claims (28000 without).';
revoke execute on function cortex.memory_text_ranking(tsquery, tsquery, text[], text[], text, uuid, text[], timestamptz,
  timestamptz, timestamptz, int) from public, anon, service_role;
grant execute on function cortex.memory_text_ranking(tsquery, tsquery, text[], text[], text, uuid, text[], timestamptz,
  timestamptz, timestamptz, int) to authenticated;

create or replace function public.search_memories(
  query text default null,
  query_vector extensions.vector default null,
  kinds text[] default null,
  agent text default null,
  contact_id uuid default null,
  tags text[] default null,
  since timestamptz default null,
  "until" timestamptz default null,
  as_of timestamptz default null,
  include_superseded boolean default false,
  anchors uuid[] default null,
  anchor_depth int default 2,
  "limit" int default 10,
  weight_text real default null,
  weight_vector real default null,
  weight_graph real default null,
  record_access boolean default true
) returns jsonb
language plpgsql volatile
set search_path = '' set hnsw.iterative_scan = 'relaxed_order' set hnsw.ef_search = 100 as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_cfg cortex.memory_settings;
  v_q text := btrim(search_memories.query);
  v_tsq tsquery;
  v_candidates tsquery;
  v_expected bigint;
  v_text_mode text;
  v_n int;
  v_statuses text[];
  v_tags text[];
  v_kind text;
  v_wt real;
  v_wv real;
  v_wg real;
  v_text uuid[] := '{}';
  v_vec uuid[] := '{}';
  v_graph uuid[] := '{}';
  v_walk int;
  v_walked bigint;
  v_results jsonb;
  v_ids uuid[];
  v_single boolean;
  v_vn int;
  v_pass int;
begin
  -- Validate everything first.
  if search_memories.query is not null and v_q = '' then
    raise exception 'query must not be empty' using errcode = '22023', column = 'query';
  end if;
  if length(v_q) > 1000 then
    raise exception 'query must be at most 1000 characters' using errcode = '22023', column = 'query';
  end if;
  if v_q is null and search_memories.query_vector is null and coalesce(cardinality(search_memories.anchors), 0) = 0 then
    raise exception 'give a query, a query_vector or anchors' using errcode = '22023', column = 'query';
  end if;
  if search_memories.query_vector is not null and extensions.vector_dims(search_memories.query_vector) <> 384 then
    raise exception 'query_vector must have 384 dimensions, not %', extensions.vector_dims(search_memories.query_vector)
      using errcode = '22023', column = 'query_vector';
  end if;
  if search_memories."limit" is null or search_memories."limit" not between 1 and 100 then
    raise exception 'limit must be between 1 and 100' using errcode = '22023', column = 'limit';
  end if;
  if search_memories.anchor_depth is null or search_memories.anchor_depth not between 1 and 6 then
    raise exception 'anchor_depth must be between 1 and 6' using errcode = '22023', column = 'anchor_depth';
  end if;
  if cardinality(search_memories.anchors) > 100 or array_position(search_memories.anchors, null) is not null then
    raise exception 'anchors must be at most 100 ids, none null' using errcode = '22023', column = 'anchors';
  end if;
  foreach v_kind in array coalesce(search_memories.kinds, '{}') loop
    perform cortex.check_enum('kinds', v_kind, cortex.node_kinds());
  end loop;
  if cardinality(search_memories.tags) > 50 then
    raise exception 'tags must be at most 50' using errcode = '22023', column = 'tags';
  end if;
  if search_memories.as_of > now() then
    raise exception 'as_of must not be in the future' using errcode = '22023', column = 'as_of';
  end if;
  if search_memories.since > search_memories."until" then
    raise exception 'until must not be before since' using errcode = '22023', column = 'until';
  end if;
  if search_memories.weight_text < 0 or search_memories.weight_vector < 0 or search_memories.weight_graph < 0 then
    raise exception 'weights must be 0 or more' using errcode = '22023',
      column = case when search_memories.weight_text < 0 then 'weight_text'
                    when search_memories.weight_vector < 0 then 'weight_vector' else 'weight_graph' end;
  end if;

  select * into v_cfg from cortex.memory_settings s where s.tenant_id = v_tenant;
  v_wt := coalesce(search_memories.weight_text, v_cfg.weight_text);
  v_wv := coalesce(search_memories.weight_vector, v_cfg.weight_vector);
  v_wg := coalesce(search_memories.weight_graph, v_cfg.weight_graph);
  -- Each ranking takes its top N after the filters.
  v_n := greatest(search_memories."limit" * 4, 40);
  v_statuses := case when search_memories.as_of is not null or search_memories.include_superseded
                     then array['active', 'superseded'] else array['active'] end;
  v_tags := (select array_agg(distinct lower(btrim(t))) from unnest(search_memories.tags) t where btrim(t) <> '');

  -- (1) Full text, in the tenant's language, by ts_rank_cd.
  if v_q is not null then
    -- Any of the words: a natural question rarely holds all of them (see cortex.memory_any_tsquery).
    v_tsq := cortex.memory_any_tsquery(v_cfg.text_config, v_q);
    if numnode(v_tsq) > 0 then
      select c.query, c.expected into v_candidates, v_expected
      from cortex.memory_text_candidates(v_tenant, v_cfg.text_config, v_q, v_cfg.text_candidate_budget) c;
      -- Even the rarest word is common: reading and ranking its matches is thousands of random
      -- heap reads. With a vector ranking that counts, text only re-ranks its candidates (below,
      -- after the vector and graph rankings); without one, the rarest word's matches it is.
      v_text_mode := case when v_expected > v_cfg.text_candidate_budget and search_memories.query_vector is not null
                               and v_wv > 0 then 'rerank' else 'candidates' end;
    end if;
    if v_text_mode = 'candidates' then
      v_text := cortex.memory_text_ranking(v_tsq, v_candidates, v_statuses, search_memories.kinds,
                                           search_memories.agent, search_memories.contact_id, v_tags,
                                           search_memories.since, search_memories."until", search_memories.as_of, v_n);
    end if;
  end if;

  -- (2) Vector: cosine distance through the HNSW index; the iterative scan keeps reading the index
  -- until enough rows pass the filters, so a small tenant in a big table still gets its full top-k.
  if search_memories.query_vector is not null then
    -- Alone (no text ranking, no anchors) nothing is fused, so the top `limit` is the answer: the
    -- walk stops at `limit` rows, not 4x that (a 1 % tenant reads ~100 other tenants' rows per own
    -- row: docs/benchmarks.md). Its first pass takes the nodes at or above min_importance, so a
    -- second one only fills what they leave with the others (ranked after all, as in fusion).
    v_single := v_text_mode is null and coalesce(cardinality(search_memories.anchors), 0) = 0;
    v_vn := case when v_single then search_memories."limit" else v_n end;
    perform pg_catalog.set_config('hnsw.ef_search', greatest(100, v_vn)::text, true);
    for v_pass in 1..case when v_single then 2 else 1 end loop
      exit when v_pass = 2 and cardinality(v_vec) >= v_vn;
      select v_vec || coalesce(array_agg(c.id order by c.d, c.id), '{}') into v_vec
      from (
        select n.id, n.embedding operator(extensions.<=>) search_memories.query_vector as d
        from cortex.memory_nodes n
        where n.tenant_id = v_tenant and n.embedding is not null and n.status = any (v_statuses)
          and (not v_single or (n.importance >= v_cfg.min_importance) = (v_pass = 1))
          and (search_memories.kinds is null or n.kind = any (search_memories.kinds))
          and (search_memories.agent is null or n.source_agent = search_memories.agent)
          and (search_memories.contact_id is null or n.contact_id = search_memories.contact_id)
          and (v_tags is null or n.tags @> v_tags)
          and (search_memories.since is null or n.created_at >= search_memories.since)
          and (search_memories."until" is null or n.created_at < search_memories."until")
          and (search_memories.as_of is null or (n.valid_from <= search_memories.as_of
                                                 and (n.valid_to is null or n.valid_to > search_memories.as_of)))
        order by n.embedding operator(extensions.<=>) search_memories.query_vector
        limit v_vn - cardinality(v_vec)
      ) c;
    end loop;
  end if;

  -- (3) Graph: proximity to the anchors: the nearest nodes (breadth first, fewest steps first),
  -- ranked by the product of decayed weights along the path that reached them. First the nearest
  -- 2 N; only when fewer than N of them pass the filters, the nearest 10 N (at most 500). A walk
  -- for more nodes than the first level holds completes the next one, and from a few anchors the
  -- next level runs through the contact hubs they apply to (thousands of edges each): 4.5 ms for
  -- the nearest 100 from 25 anchors, 35 ms for 200 or 400 (docs/benchmarks.md). A best-first walk
  -- would rank by weight alone, but it pops one node per statement: 400 nodes from 100 anchors took
  -- a second where the level-by-level walk takes 50 ms.
  if coalesce(cardinality(search_memories.anchors), 0) > 0 then
    v_walk := least(v_n * 2, 500);
    loop
      with w as (
        select w.node_id, w.score, w.depth
        from cortex.graph_walk(v_tenant, search_memories.anchors, search_memories.anchor_depth, 'both', null, null,
                               v_cfg.min_weight, 'breadth_first', v_walk, coalesce(search_memories.as_of, now())) w
      ), c as (
        select w.node_id, w.score, w.depth
        from w join cortex.memory_nodes n on n.tenant_id = v_tenant and n.id = w.node_id
        where n.status = any (v_statuses)
          and (search_memories.kinds is null or n.kind = any (search_memories.kinds))
          and (search_memories.agent is null or n.source_agent = search_memories.agent)
          and (search_memories.contact_id is null or n.contact_id = search_memories.contact_id)
          and (v_tags is null or n.tags @> v_tags)
          and (search_memories.since is null or n.created_at >= search_memories.since)
          and (search_memories."until" is null or n.created_at < search_memories."until")
          and (search_memories.as_of is null or (n.valid_from <= search_memories.as_of
                                                 and (n.valid_to is null or n.valid_to > search_memories.as_of)))
        order by w.score desc, w.depth, w.node_id
        limit v_n
      )
      select coalesce((select array_agg(c.node_id order by c.score desc, c.depth, c.node_id) from c), '{}'),
             (select count(*) from w)
      into v_graph, v_walked;
      exit when cardinality(v_graph) >= v_n or v_walked < v_walk or v_walk >= least(v_n * 10, 500);
      v_walk := least(v_n * 10, 500);
    end loop;
  end if;

  -- (1, rerank mode) Text ranks only what the vector and graph rankings found (they passed the
  -- filters already): at most 2 N primary-key reads of rows just read, not thousands. A wider vector
  -- pool (its top 200) doubled the hybrid query's time at scale 1 for no gain in the eval
  -- (docs/benchmarks.md).
  if v_text_mode = 'rerank' then
    with c as materialized (
      -- Materialized: the match is tested on these rows, never planned as a full-text index scan.
      select n.id, n.fts operator(pg_catalog.@@) v_tsq as hit, pg_catalog.ts_rank_cd(n.fts, v_tsq) as r
      from cortex.memory_nodes n
      where n.tenant_id = v_tenant and n.id = any (v_vec || v_graph)
    )
    select coalesce(array_agg(t.id order by t.r desc, t.id), '{}') into v_text
    from (select c.id, c.r from c where c.hit order by c.r desc, c.id limit v_n) t;
  end if;

  -- Reciprocal rank fusion. Nodes below min_importance come after all others (still findable).
  with ranked as (
    select r.id, min(r.rt)::int as rt, min(r.rv)::int as rv, min(r.rg)::int as rg
    from (
      select t.id, t.rk as rt, null::bigint as rv, null::bigint as rg from unnest(v_text) with ordinality t(id, rk)
      union all
      select v.id, null, v.rk, null from unnest(v_vec) with ordinality v(id, rk)
      union all
      select g.id, null, null, g.rk from unnest(v_graph) with ordinality g(id, rk)
    ) r
    group by r.id
  ), scored as (
    select r.id, r.rt, r.rv, r.rg,
           coalesce(v_wt::float8 / (v_cfg.rrf_k + r.rt), 0) + coalesce(v_wv::float8 / (v_cfg.rrf_k + r.rv), 0)
           + coalesce(v_wg::float8 / (v_cfg.rrf_k + r.rg), 0) as score
    from ranked r
  ), top as (
    select s.*, n as node, row_number() over (
             order by (n.importance >= v_cfg.min_importance) desc, s.score desc, s.id) as pos
    from scored s join cortex.memory_nodes n on n.tenant_id = v_tenant and n.id = s.id
    order by pos
    limit search_memories."limit"
  )
  select coalesce(jsonb_agg(jsonb_build_object(
           'memory', cortex.memory_node_json(t.node), 'score', round(t.score::numeric, 6),
           'rankings', jsonb_build_object('text', t.rt, 'vector', t.rv, 'graph', t.rg)) order by t.pos), '[]'),
         array_agg(t.id)
  into v_results, v_ids
  from top t;

  -- A caller that serves the results itself (a briefing) or only measures (the eval) records nothing.
  if search_memories.record_access is not false then  -- null: the default
    -- The access log is the only write of a search: its commit need not wait for the WAL flush
    -- (in a caller's own transaction, this holds for all of it).
    perform pg_catalog.set_config('synchronous_commit', 'off', true);
    perform cortex.record_access(v_tenant, v_ids);
  end if;
  return jsonb_build_object(
    'results', v_results, 'k', v_cfg.rrf_k,
    'weights', jsonb_build_object('text', v_wt, 'vector', v_wv, 'graph', v_wg),
    'used', jsonb_build_object('text', v_tsq is not null and numnode(v_tsq) > 0,
                               'text_mode', v_text_mode,
                               'vector', search_memories.query_vector is not null,
                               'graph', coalesce(cardinality(search_memories.anchors), 0) > 0));
end $$;
comment on function public.search_memories(text, extensions.vector, text[], text, uuid, text[], timestamptz, timestamptz,
  timestamptz, boolean, uuid[], int, int, real, real, real, boolean) is
  'Hybrid search: full text (any of the words of websearch_to_tsquery in the tenant''s text_config, phrases and negations kept: cortex.memory_any_tsquery; ranked by ts_rank_cd), vector (cosine through HNSW with iterative scan; query_vector of 384 dimensions) and graph proximity to anchors (cortex.graph_walk), '
  'each its top max(limit x 4, 40) after the filters (a search by query_vector alone, with nothing to fuse: the vector''s top limit, those at or above min_importance first, the others only filling the rest), fused by reciprocal rank: score = sum of weight_r / (rrf_k + rank_r) (rrf_k and weights from memory_settings unless given). '
  'Text candidates (used.text_mode): candidates = the matches of the query''s rarest words within memory_settings.text_candidate_budget expected rows (cortex.memory_text_candidates; always at least the rarest word); '
  'rerank = when even the rarest word is expected to match more than the budget and a query_vector is given with a weight above 0: text ranks only the nodes of the vector and graph rankings that match the query. '
  'Filters: kinds, agent, contact_id, tags (all of them), since/until (created_at), as_of (valid then; superseded included), include_superseded; archived never. Nodes below min_importance rank after the others. '
  'Returns {results: [{memory, score, rankings: {text, vector, graph}}], k, weights, used: {text, text_mode, vector, graph}}; records access of the returned nodes (access count, edge reinforcement) unless record_access is false, and then commits without waiting for the WAL flush (synchronous_commit off for the transaction).';
grant execute on function public.search_memories(text, extensions.vector, text[], text, uuid, text[], timestamptz, timestamptz,
  timestamptz, boolean, uuid[], int, int, real, real, real, boolean) to authenticated;

do $$
begin
  if to_regnamespace('cron') is not null and to_regprocedure('cron.schedule(text, text, text)') is not null then
    perform cron.schedule('cortex-refresh-memory-lexicons', '17 * * * *', 'select cortex.refresh_memory_lexicons()');
  end if;
end $$;
