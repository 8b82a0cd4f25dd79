-- Memories: the write and read API of the memory graph (issue 13). remember, get_memory,
-- list_memories, update_memory, supersede_memory, forget_memory: invoker functions that write
-- cortex.memory_nodes / memory_edges through their RLS policies (20261122002000_graph.sql).
--
-- De-duplication on write, cheapest test first:
--   exact    the unique index memory_nodes_exact (tenant, scope, kind, content_hash) of active nodes:
--            a probe, then `insert ... on conflict do nothing` with a fallback to the row that won,
--            so two concurrent writers of one memory make one node;
--   trigram  an active node of the same kind and scope whose title + body is at least
--            memory_settings.dedup_trigram similar (pg_trgm), with the same numbers and the same
--            negation, so "above 500 EUR" never swallows "above 5000 EUR" nor "does not want calls"
--            "wants calls". Compared with the memories sharing one of its rarest words, found through
--            the full-text index (cortex.memory_near_duplicate): a trigram index on title + body
--            costs every insert a hundred index entries and a probe tens of milliseconds in a big
--            tenant.
--   (embedding similarity follows in the worker, off the write path.)
-- A duplicate reinforces the node it duplicates instead of adding a second.
--
-- Supersession: a key slot holds at most one active node per scope (unique index memory_nodes_key).
-- A newer node in the slot supersedes the holder in the same transaction: the holder is locked,
-- gets status superseded and valid_to = the new node's valid_from, and a `supersedes` edge
-- new -> old (weight 1) records why. Both stay queryable "as of" a time.
--
-- Lock order (as in the graph migration): memory_nodes (duplicate, then holder, then the new
-- row) -> memory_edges.

-- Helpers ----------------------------------------------------------------------------------------

-- The content hash, negation test and tsquery quoting carry no SET clause: a function with one is
-- never inlined, and these run once per write or once per compared row (parsed and planned anew on
-- each call otherwise). Their bodies name only pg_catalog, so the caller's search_path cannot change
-- what they mean (the rule and its test: tests/test_security.py, INLINED).
create or replace function cortex.memory_content_hash(p_title text, p_body text) returns text
language sql immutable parallel safe as $$
  select pg_catalog.md5(pg_catalog.lower(pg_catalog.regexp_replace(pg_catalog.btrim(p_title), '\s+', ' ', 'g')) || E'\n'
                        || pg_catalog.lower(pg_catalog.regexp_replace(pg_catalog.btrim(coalesce(p_body, '')), '\s+', ' ', 'g')))
$$;
comment on function cortex.memory_content_hash(text, text) is
  'The exact de-duplication key of a memory''s content: the same expression as the generated column memory_nodes.content_hash (case and runs of whitespace ignored). tests/test_memories.py checks they agree. '
  'Inlined into its callers (no SET clause; pg_catalog names only).';

-- plpgsql, not sql: an aggregate cannot be inlined, and a sql function with a SET clause is parsed and
-- planned again in every transaction; plpgsql keeps its plan for the session.
create or replace function cortex.memory_numbers(p_text text) returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return (select coalesce(array_agg(distinct m[1] order by m[1]), '{}')
          from regexp_matches(coalesce(p_text, ''), '(\d+(?:[.,]\d+)*)', 'g') m);
end $$;
comment on function cortex.memory_numbers(text) is
  'The distinct numbers written in a text (sorted; "1,500.75" is one). Near-duplicates must have the same set ("500 EUR" and "5000 EUR" are different facts however similar the words), and the linker flags two similar texts with different ones as a likely contradiction.';

create or replace function cortex.memory_negated(p_text text) returns boolean
language sql immutable parallel safe as $$
  select pg_catalog.lower(coalesce(p_text, '')) ~ '\m(not|no|never|none|nothing|cannot|without|neither|nor)\M|n[''’]t\M'
$$;
comment on function cortex.memory_negated(text) is
  'True when a text holds a negation (not, no, never, none, nothing, cannot, without, neither, nor, ...n''t). Near-duplicates must agree ("does not want calls" is no duplicate of "wants calls"), and the linker flags two similar texts that disagree as a likely contradiction. '
  'Inlined into its callers (no SET clause; pg_catalog names only).';

create or replace function cortex.tsquery_quote(p_lexeme text) returns text
language sql immutable parallel safe as $$
  select '''' || pg_catalog.replace(pg_catalog.replace(p_lexeme, '\', '\\'), '''', '''''') || ''''
$$;
comment on function cortex.tsquery_quote(text) is
  'A lexeme as one quoted term of a tsquery''s text (backslashes and quotes escaped): no operator or weight in it is read as such. '
  'Inlined into its callers (no SET clause; pg_catalog names only).';

grant execute on function cortex.memory_content_hash(text, text), cortex.memory_numbers(text),
  cortex.memory_negated(text), cortex.tsquery_quote(text) to authenticated, service_role;

-- Term statistics: which words are common in a tenant ---------------------------------------------
-- Ranking reads every document the any-word query matches, and a common word matches a good part
-- of a big tenant (a word in 5 % of 600,000 memories is 30,000 rows to fetch and rank). So the
-- candidates come from the query's rarest words, as many as keep the candidates under a budget,
-- and are ranked by the whole query: a document that holds only common query words ranks low
-- anyway. The counts are refreshed in bulk (pg_cron, hourly), never per write, and only over shared
-- active memories (a private memory's words are no other agent's business). A word missing from
-- the table counts as rare, so new words and small tenants lose nothing.

create table cortex.memory_lexemes (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  lexeme text not null,
  ndoc int not null check (ndoc >= 0),
  primary key (tenant_id, lexeme)
);
comment on table cortex.memory_lexemes is
  'Per tenant, the lexemes found in at least 50 shared active memories and in how many (cortex.refresh_memory_lexicon); search_memories draws its text candidates from the rarest query words first.';
alter table cortex.memory_lexemes enable row level security;
create policy "Term statistics are visible to agents of their tenant" on cortex.memory_lexemes
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
grant select on cortex.memory_lexemes to authenticated;

create table cortex.memory_lexicon_runs (
  tenant_id uuid not null primary key references cortex.tenants (id) on delete cascade,
  documents int not null,
  lexemes int not null,
  refreshed_at timestamptz not null default now()
);
comment on table cortex.memory_lexicon_runs is 'When each tenant''s term statistics were last counted, over how many memories.';
alter table cortex.memory_lexicon_runs enable row level security;

create or replace function cortex.refresh_memory_lexicon(p_tenant_id uuid) returns int
language plpgsql volatile set search_path = '' as $$
declare
  v_docs int;
  v_lexemes int;
begin
  select count(*) into v_docs from cortex.memory_nodes n
  where n.tenant_id = p_tenant_id and n.status = 'active' and n.visibility = 'shared';
  delete from cortex.memory_lexemes l where l.tenant_id = p_tenant_id;
  insert into cortex.memory_lexemes (tenant_id, lexeme, ndoc)
  select p_tenant_id, s.word, s.ndoc
  from pg_catalog.ts_stat(pg_catalog.format(
         'select n.fts from cortex.memory_nodes n where n.tenant_id = %L and n.status = %L and n.visibility = %L',
         p_tenant_id, 'active', 'shared')) s
  where s.ndoc >= 50;
  get diagnostics v_lexemes = row_count;
  insert into cortex.memory_lexicon_runs as r (tenant_id, documents, lexemes)
  values (p_tenant_id, v_docs, v_lexemes)
  on conflict (tenant_id) do update set documents = excluded.documents, lexemes = excluded.lexemes, refreshed_at = now();
  return v_lexemes;
end $$;
comment on function cortex.refresh_memory_lexicon(uuid) is
  'Recounts a tenant''s term statistics (cortex.memory_lexemes: lexemes in at least 50 shared active memories) in one transaction; returns how many lexemes were stored. Owner and scheduler only.';
revoke execute on function cortex.refresh_memory_lexicon(uuid) from public, anon, authenticated, service_role;

create or replace function cortex.refresh_memory_lexicons(p_min_documents int default 2000) returns int
language plpgsql volatile set search_path = '' as $$
declare
  v_tenant uuid;
  v_done int := 0;
begin
  -- Only tenants big enough for a common word to matter (or counted before, so that the counts of
  -- a shrinking tenant do not go stale).
  for v_tenant in
    select t.id from cortex.tenants t
    where (select count(*) from (select from cortex.memory_nodes n
                                 where n.tenant_id = t.id and n.status = 'active' and n.visibility = 'shared'
                                 limit p_min_documents) c) >= p_min_documents
       or exists (select from cortex.memory_lexicon_runs r where r.tenant_id = t.id)
    order by t.id
  loop
    perform cortex.refresh_memory_lexicon(v_tenant);
    v_done := v_done + 1;
  end loop;
  return v_done;
end $$;
comment on function cortex.refresh_memory_lexicons(int) is
  'Scheduled (hourly): recounts the term statistics of every tenant holding at least p_min_documents shared active memories (or counted before); returns how many tenants were counted.';
revoke execute on function cortex.refresh_memory_lexicons(int) from public, anon, authenticated, service_role;

create or replace function cortex.memory_rare_lexemes(
  p_tenant_id uuid, p_config regconfig, p_text text, p_words int, p_budget int
) returns text[]
-- plpgsql, not sql: it runs once per write, and a SQL function with a SET clause is parsed and
-- planned on every call; plpgsql keeps the plan for the connection.
language plpgsql stable parallel safe set search_path = '' as $$
begin
  -- Rarest first (a word never counted first of all, the longest of those first): a restatement,
  -- even with a typo or two, shares some of them with what it restates.
  return (
  with lex as (
    select t.lexeme, coalesce(l.ndoc, 0) as df
    from pg_catalog.unnest(pg_catalog.tsvector_to_array(pg_catalog.to_tsvector(p_config, coalesce(p_text, '')))) t (lexeme)
    left join cortex.memory_lexemes l on l.tenant_id = p_tenant_id and l.lexeme = t.lexeme
  ),
  ranked as (
    select x.lexeme, sum(x.df) over w as upto, row_number() over w as pos
    from lex x
    window w as (order by x.df, pg_catalog.length(x.lexeme) desc, x.lexeme)
  )
  select pg_catalog.array_agg(r.lexeme order by r.pos)
  from ranked r
  where r.pos <= p_words and (r.upto <= p_budget or r.pos = 1));
end $$;
comment on function cortex.memory_rare_lexemes(uuid, regconfig, text, int, int) is
  'The p_words rarest lexemes of p_text in a tenant (cortex.memory_lexemes; a lexeme never counted first), rarest first, as many as keep the expected matches under p_budget (at least one); null for a text without lexemes.';
grant execute on function cortex.memory_rare_lexemes(uuid, regconfig, text, int, int) to authenticated, service_role;

-- Definer: `@@` and pg_trgm's similarity are not leakproof, so under RLS the planner may not use
-- them as index conditions. The tenant and the scope come from the request's claims, never from
-- an argument.
create or replace function cortex.memory_near_duplicate(p_kind text, p_private boolean, p_title text, p_body text)
returns uuid
-- One generic plan for every call (plan_cache_mode): the full-text index is the only one that can
-- answer `@@`, so it is the plan whatever the words, and planning the statement anew on each write
-- (EXECUTE, or custom plans) cost a tenth of a write.
language plpgsql volatile security definer set search_path = '' set plan_cache_mode = force_generic_plan as $$
declare
  -- Candidates: memories holding the text's words with digits, or two of its 8 rarest words
  -- (below); of those, the 50 holding the most of the rarest words (the oldest, for a text with
  -- digits) are compared. A word not yet
  -- counted (new since the hourly count, or in a tenant too small to count) looks rare however
  -- common it has become: without these bounds a burst of similar texts made each probe read and
  -- compare thousands. (A number in thousands of memories, a year alone, still widens the set read.)
  c_words constant int := 8;
  c_budget constant int := 500;
  c_compared constant int := 50;
  v_tenant uuid := cortex.require_tenant();
  v_scope text := case when p_private then cortex.current_agent() else '' end;
  v_text text := btrim(p_title) || ' ' || coalesce(p_body, '');
  v_cfg cortex.memory_settings;
  v_lexemes text[];
  v_query text;
  v_ratio real;
  v_id uuid;
begin
  select * into v_cfg from cortex.memory_settings s where s.tenant_id = v_tenant;
  -- Lengths within this ratio: a tenth below the threshold, as slack for repeated trigrams.
  v_ratio := greatest(0.5, coalesce(v_cfg.dedup_trigram, 0.9) - 0.1);
  -- Near-duplicates have the same numbers, written the same way: when the text has words with a
  -- digit in them, the candidates are the memories holding every one of them, so the index, not
  -- similarity, tells "order 1041 shipped" from its thousand siblings ("5 pm" and "5pm" are left
  -- apart: the worker's embedding test still finds those). Otherwise they hold two of the rarest
  -- words (one when the text has one): a near-duplicate holds nearly all of them, and a word not
  -- yet counted can be in thousands of recent memories (a new name, a burst of templated notes),
  -- which a pair of words narrows in the index before any row is read.
  select string_agg(cortex.tsquery_quote(d), ' & ') into v_query
  from unnest(tsvector_to_array(to_tsvector(coalesce(v_cfg.text_config, 'pg_catalog.english'), v_text))) d
  where d ~ '[0-9]';
  if v_query is null then
    v_lexemes := cortex.memory_rare_lexemes(v_tenant, coalesce(v_cfg.text_config, 'pg_catalog.english'), v_text,
                                            c_words, c_budget);
    if v_lexemes is null then
      return null;
    end if;
    select coalesce(string_agg('(' || cortex.tsquery_quote(a.w) || ' & ' || cortex.tsquery_quote(b.w) || ')', ' | '),
                    cortex.tsquery_quote(v_lexemes[1]))
    into v_query
    from unnest(v_lexemes) with ordinality a (w, i)
    join unnest(v_lexemes) with ordinality b (w, j) on a.i < b.j;
  end if;
  -- The candidates first, by the full-text index alone (given the kind and scope too, the
  -- planner preferred the unique index on them and tested every fact of the tenant).
  with c as materialized (
    select n.id, n.title, n.body, n.created_at, n.status, n.ref_kind, n.kind, n.scope, n.fts
    from cortex.memory_nodes n
    where n.tenant_id = v_tenant and n.fts @@ v_query::tsquery
  ),
  -- Texts this similar are of about the same length, and share most of the rare words: both are
  -- cheap tests (similarity builds both trigram sets, most of a probe's time), so they pick the few
  -- that similarity compares. A near-duplicate holds (nearly) all of the words.
  compared as (
    select c.id, c.title || ' ' || c.body as text, c.created_at
    from c
    where c.status = 'active' and c.ref_kind is null and c.kind = p_kind and c.scope = v_scope
      and length(c.title || ' ' || c.body) between floor(length(v_text) * v_ratio) and ceil(length(v_text) / v_ratio)
    -- (Without rare words, for a text with digits: the oldest.)
    order by coalesce(length(c.fts) - length(ts_delete(c.fts, v_lexemes)), 0) desc, c.created_at, c.id
    limit c_compared
  )
  select n.id into v_id
  from compared n
  where extensions.similarity(n.text, v_text) >= coalesce(v_cfg.dedup_trigram, 0.9)
    and cortex.memory_numbers(n.text) = cortex.memory_numbers(v_text)
    and cortex.memory_negated(n.text) = cortex.memory_negated(v_text)
  order by extensions.similarity(n.text, v_text) desc, n.created_at, n.id
  limit 1;
  return v_id;
end $$;
comment on function cortex.memory_near_duplicate(text, boolean, text, text) is
  'The trigram de-duplication test: the active written node of this kind in the caller''s scope (shared, or the calling agent''s private ones) whose title + body is at least memory_settings.dedup_trigram similar and has the same numbers and negation, most similar first; null when none. '
  'Candidates: the memories holding every word of the text with a digit in it, or, for a text without one, two of its 8 rarest words (cortex.memory_rare_lexemes; one when it has one), found through the full-text index, of a length within (threshold - 0.1) of the text''s; of those, the 50 holding the most of the rare words (then the oldest; only the oldest for a text with digits) are compared. Tenant and agent from the claims (28000 without).';
revoke execute on function cortex.memory_near_duplicate(text, boolean, text, text) from public, anon, service_role;
grant execute on function cortex.memory_near_duplicate(text, boolean, text, text) to authenticated;

-- cortex.memory_edge_json: defined with traversal (20261122002050_graph_traversal.sql).

create or replace function cortex.memory_not_found(p_id uuid, p_field text default 'memory_id') returns void
language plpgsql set search_path = '' as $$
begin
  raise exception 'memory % not found', p_id
    using errcode = 'P0002', column = p_field,
          hint = 'a memory is visible to the agents of its tenant, a private one only to its agent';
end $$;
comment on function cortex.memory_not_found(uuid, text) is 'Raises the one "unknown memory" error (SQLSTATE P0002 naming p_field).';

create or replace function cortex.memory_check_as_of(p_as_of timestamptz) returns void
language plpgsql stable set search_path = '' as $$
begin
  -- The clock, not the transaction start: a caller's "now" is a few microseconds later.
  if p_as_of > pg_catalog.clock_timestamp() then
    raise exception 'as_of cannot be in the future' using errcode = '22023', column = 'as_of',
      detail = format('got %s', p_as_of);
  end if;
end $$;
comment on function cortex.memory_check_as_of(timestamptz) is
  'SQLSTATE 22023 naming as_of when it is in the future (what was true then is only known up to now).';

create or replace function cortex.memory_check_fields(
  p_title text, p_body text, p_importance real, p_confidence real, p_tags text[], p_visibility text,
  p_key text, p_metadata jsonb
) returns void
language plpgsql immutable set search_path = '' as $$
begin
  if p_title is null or btrim(p_title) = '' then
    raise exception 'title is required' using errcode = '22023', column = 'title';
  end if;
  if length(btrim(p_title)) > 500 then
    raise exception 'title must be at most 500 characters' using errcode = '22023', column = 'title';
  end if;
  if length(p_body) > 20000 then
    raise exception 'body must be at most 20000 characters' using errcode = '22023', column = 'body';
  end if;
  if p_importance is not null and (p_importance < 0 or p_importance > 1 or p_importance = 'NaN') then
    raise exception 'importance must be between 0 and 1' using errcode = '22023', column = 'importance';
  end if;
  if p_confidence is not null and (p_confidence < 0 or p_confidence > 1 or p_confidence = 'NaN') then
    raise exception 'confidence must be between 0 and 1' using errcode = '22023', column = 'confidence';
  end if;
  if cardinality(p_tags) > 50 or exists (select from unnest(p_tags) t where length(t) > 100) then
    raise exception 'at most 50 tags of at most 100 characters each' using errcode = '22023', column = 'tags';
  end if;
  perform cortex.check_enum('visibility', p_visibility, cortex.memory_visibilities());
  if p_key is not null and (btrim(p_key) = '' or length(p_key) > 200) then
    raise exception 'key must be 1 to 200 characters' using errcode = '22023', column = 'key';
  end if;
  if p_metadata is not null and jsonb_typeof(p_metadata) <> 'object' then
    raise exception 'metadata must be a JSON object' using errcode = '22023', column = 'metadata';
  end if;
  if octet_length(p_metadata::text) > 16384 then
    raise exception 'metadata must be at most 16384 bytes as JSON' using errcode = '22023', column = 'metadata';
  end if;
end $$;
comment on function cortex.memory_check_fields(text, text, real, real, text[], text, text, jsonb) is
  'Validates the fields of a memory to write (title, body, importance, confidence, tags, visibility, key, metadata): SQLSTATE 22023 naming the first bad field, before anything is written.';

create or replace function cortex.memory_check_links(p_tenant_id uuid, p_links jsonb) returns jsonb
language plpgsql stable set search_path = '' as $$
declare
  v_link jsonb;
  v_i int := 0;
  v_key text;
  v_target uuid;
  v_weight real;
  v_out jsonb := '[]';
begin
  perform cortex.guard_tenant(p_tenant_id);
  if p_links is null or p_links = 'null' then
    return '[]';
  end if;
  if jsonb_typeof(p_links) <> 'array' then
    raise exception 'links must be an array of {target_id, relation, weight}' using errcode = '22023', column = 'links';
  end if;
  if jsonb_array_length(p_links) > 100 then
    raise exception 'at most 100 links' using errcode = '22023', column = 'links';
  end if;
  for v_link in select l from jsonb_array_elements(p_links) l loop
    if jsonb_typeof(v_link) <> 'object' then
      raise exception 'a link must be an object {target_id, relation, weight}'
        using errcode = '22023', column = format('links[%s]', v_i);
    end if;
    for v_key in select jsonb_object_keys(v_link) loop
      if v_key not in ('target_id', 'relation', 'weight') then
        raise exception 'unknown field "%" of a link; a link has target_id, relation and weight', left(v_key, 100)
          using errcode = '22023', column = format('links[%s].%s', v_i, left(v_key, 100));
      end if;
    end loop;
    if jsonb_typeof(v_link -> 'target_id') is distinct from 'string'
       or (v_link ->> 'target_id') !~* '^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$' then
      raise exception 'target_id must be a memory id (uuid)' using errcode = '22023', column = format('links[%s].target_id', v_i);
    end if;
    v_target := (v_link ->> 'target_id')::uuid;
    -- RLS: another tenant's node, or another agent's private one, is not there.
    if not exists (select from cortex.memory_nodes n where n.tenant_id = p_tenant_id and n.id = v_target) then
      perform cortex.memory_not_found(v_target, format('links[%s].target_id', v_i));
    end if;
    if jsonb_typeof(v_link -> 'relation') is distinct from 'string' then
      raise exception 'relation is required' using errcode = '22023', column = format('links[%s].relation', v_i);
    end if;
    perform cortex.check_enum(format('links[%s].relation', v_i), v_link ->> 'relation', cortex.edge_relations());
    if v_link ? 'weight' and jsonb_typeof(v_link -> 'weight') <> 'null' then
      if jsonb_typeof(v_link -> 'weight') <> 'number' or (v_link ->> 'weight')::numeric not between 0 and 1 then
        raise exception 'weight must be a number between 0 and 1' using errcode = '22023', column = format('links[%s].weight', v_i);
      end if;
      v_weight := (v_link ->> 'weight')::real;
    else
      v_weight := 0.5;
    end if;
    v_out := v_out || jsonb_build_array(jsonb_build_object(
      'i', v_i, 'target_id', v_target, 'relation', v_link ->> 'relation', 'weight', v_weight));
    v_i := v_i + 1;
  end loop;
  -- One row per (target, relation), the greatest weight: an insert may touch an edge once.
  select coalesce(jsonb_agg(jsonb_build_object('i', g.i, 'target_id', g.target_id, 'relation', g.relation,
                                               'weight', g.weight) order by g.i), '[]')
  into v_out
  from (select min((l ->> 'i')::int) as i, (l ->> 'target_id')::uuid as target_id, l ->> 'relation' as relation,
               max((l ->> 'weight')::real) as weight
        from jsonb_array_elements(v_out) l group by 2, 3) g;
  return v_out;
end $$;
comment on function cortex.memory_check_links(uuid, jsonb) is
  'Validates links [{target_id, relation, weight}] before any write: the target must be a node visible to the caller in the tenant (P0002 naming links[i].target_id), the relation in cortex.edge_relations() (22023 naming links[i].relation), weight 0..1 (default 0.5). Returns them one per (target, relation) with the greatest weight and the index i of the first.';

create or replace function cortex.memory_link(p_tenant_id uuid, p_source uuid, p_links jsonb) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_self int;
  v_edges jsonb;
begin
  perform cortex.guard_tenant(p_tenant_id);
  select (l ->> 'i')::int into v_self from jsonb_array_elements(p_links) l
  where (l ->> 'target_id')::uuid = p_source limit 1;
  if v_self is not null then
    raise exception 'a memory cannot link to itself' using errcode = '22023', column = format('links[%s].target_id', v_self),
      hint = 'the new memory was a duplicate of the link''s target';
  end if;
  with written as (
    insert into cortex.memory_edges as e (tenant_id, source_id, relation, target_id, weight, created_by)
    select p_tenant_id, p_source, l ->> 'relation', (l ->> 'target_id')::uuid, (l ->> 'weight')::real,
           cortex.current_agent()
    from jsonb_array_elements(p_links) l
    on conflict (tenant_id, source_id, relation, target_id) do update set weight = greatest(e.weight, excluded.weight)
    returning e.*
  )
  select coalesce(jsonb_agg(cortex.memory_edge_json(w) order by w.relation, w.target_id), '[]') into v_edges from written w;
  return v_edges;
end $$;
comment on function cortex.memory_link(uuid, uuid, jsonb) is
  'Writes the checked links (cortex.memory_check_links) from p_source; an existing edge keeps the greater weight. 22023 naming links[i].target_id for a link to the node itself. Returns the edges (edge json).';

grant execute on function cortex.memory_not_found(uuid, text), cortex.memory_check_as_of(timestamptz),
  cortex.memory_check_fields(text, text, real, real, text[], text, text, jsonb),
  cortex.memory_check_links(uuid, jsonb), cortex.memory_link(uuid, uuid, jsonb) to authenticated, service_role;

-- The write: de-duplicate, supersede, insert, link -------------------------------------------------

create or replace function cortex.memory_write(
  p_tenant_id uuid, p_kind text, p_title text, p_body text, p_importance real, p_confidence real, p_tags text[],
  p_visibility text, p_source_agent text, p_key text, p_contact_id uuid, p_valid_from timestamptz,
  p_permanent boolean, p_metadata jsonb, p_links jsonb, p_supersede uuid, p_dedup boolean
) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_scope text := case when p_visibility = 'private' then p_source_agent else '' end;
  v_hash text := cortex.memory_content_hash(p_title, p_body);
  v_valid_from timestamptz := coalesce(p_valid_from, now());
  v_tags text[] := coalesce(p_tags, '{}');
  v_attempt int := 0;
  v_same uuid;          -- the node this write turned out to be (a duplicate's original, or the new one)
  v_same_key text;
  v_dedup text;
  v_created boolean;
  v_old uuid[];         -- the nodes it supersedes
  v_holder uuid;
  v_constraint text;
  v_links jsonb;
  v_node cortex.memory_nodes;
begin
  perform cortex.guard_tenant(p_tenant_id);
  loop
    v_attempt := v_attempt + 1;
    begin
      v_same := null; v_same_key := null; v_dedup := null; v_created := false; v_old := '{}';
      -- 1. Duplicates, cheapest test first.
      if p_dedup then
        select n.id, n.key into v_same, v_same_key from cortex.memory_nodes n
        where n.tenant_id = p_tenant_id and n.scope = v_scope and n.kind = p_kind and n.content_hash = v_hash
          and n.status = 'active' and n.ref_kind is null
        for update;
        if v_same is not null then
          v_dedup := 'exact';
        else
          v_same := cortex.memory_near_duplicate(p_kind, p_visibility = 'private', p_title, p_body);
          if v_same is not null then
            -- Locked, and still active once locked (a concurrent writer may have superseded it).
            select n.id, n.key into v_same, v_same_key from cortex.memory_nodes n
            where n.tenant_id = p_tenant_id and n.id = v_same and n.status = 'active'
            for update;
            -- A near-duplicate in another key slot is another fact: only an exact one is refused.
            if p_key is not null and v_same_key is not null and v_same_key <> p_key then
              v_same := null;
              v_same_key := null;
            end if;
            v_dedup := case when v_same is not null then 'trigram' end;
          end if;
        end if;
      end if;
      if v_same is not null and p_key is not null and v_same_key is not null and v_same_key <> p_key then
        raise exception 'the same memory already holds another key' using errcode = '23505', column = 'key',
          detail = format('memory %s holds key "%s"', v_same, left(v_same_key, 200)),
          hint = 'supersede that memory, or write this one without a key';
      end if;

      -- 2. What it supersedes: the given node, and the holder of its key slot.
      if p_supersede is not null and p_supersede is distinct from v_same then
        v_old := v_old || p_supersede;
      end if;
      if p_key is not null and v_same_key is distinct from p_key then
        select n.id into v_holder from cortex.memory_nodes n
        where n.tenant_id = p_tenant_id and n.scope = v_scope and n.key = p_key and n.status = 'active'
        for update;
        if found and v_holder is distinct from v_same and not (v_holder = any (v_old)) then
          v_old := v_old || v_holder;
        end if;
      end if;
      if cardinality(v_old) > 0 then
        -- Without an explicit valid_from, a version is valid from its write: never before the one it
        -- replaces, even when that one's transaction began later (concurrent writers of a slot).
        if p_valid_from is null then
          v_valid_from := greatest(now(), (select max(n.valid_from) from cortex.memory_nodes n
                                           where n.tenant_id = p_tenant_id and n.id = any (v_old)));
        end if;
        if exists (select from cortex.memory_nodes n
                   where n.tenant_id = p_tenant_id and n.id = any (v_old) and n.valid_from > v_valid_from) then
          raise exception 'valid_from is before that of the memory it supersedes'
            using errcode = '22023', column = 'valid_from',
                  hint = 'a newer version of a memory must become valid after the one it replaces';
        end if;
        update cortex.memory_nodes n
        set status = 'superseded', valid_to = least(coalesce(n.valid_to, v_valid_from), v_valid_from)
        where n.tenant_id = p_tenant_id and n.id = any (v_old);
      end if;

      -- 3. A new node, unless it duplicates one (the unique index decides between concurrent writers).
      if v_same is null then
        insert into cortex.memory_nodes as n (tenant_id, kind, title, body, importance, confidence, source_agent,
                                              visibility, tags, contact_id, key, permanent, valid_from, metadata)
        values (p_tenant_id, p_kind, p_title, coalesce(p_body, ''), coalesce(p_importance, 0.5),
                coalesce(p_confidence, 0.8), p_source_agent, p_visibility, v_tags, p_contact_id, p_key,
                coalesce(p_permanent, false), v_valid_from, coalesce(p_metadata, '{}'))
        on conflict (tenant_id, scope, kind, content_hash) where status = 'active' and ref_kind is null do nothing
        returning n.id into v_same;
        if v_same is not null then
          v_created := true;
        else
          select n.id, n.key into v_same, v_same_key from cortex.memory_nodes n
          where n.tenant_id = p_tenant_id and n.scope = v_scope and n.kind = p_kind and n.content_hash = v_hash
            and n.status = 'active' and n.ref_kind is null
          for update;
          if v_same is null then
            -- The row that won was superseded meanwhile: undo this attempt (the handler below
            -- rolls its subtransaction back) and try again.
            raise exception 'retry' using errcode = '23505', constraint = 'memory_nodes_key';
          end if;
          if p_key is not null and v_same_key is not null and v_same_key <> p_key then
            raise exception 'the same memory already holds another key' using errcode = '23505', column = 'key',
              detail = format('memory %s holds key "%s"', v_same, left(v_same_key, 200));
          end if;
          v_dedup := 'exact';
        end if;
      end if;

      -- 4. A duplicate reinforces the original (and takes the key slot if it had none).
      if not v_created then
        if cardinality(array(select distinct t from unnest((select n.tags from cortex.memory_nodes n
                                                            where n.tenant_id = p_tenant_id and n.id = v_same)
                                                           || v_tags) t)) > 50 then
          raise exception 'the memory would have more than 50 tags' using errcode = '22023', column = 'tags';
        end if;
        update cortex.memory_nodes n
        set importance = least(1, greatest(n.importance, coalesce(p_importance, n.importance)) + 0.05),
            confidence = greatest(n.confidence, coalesce(p_confidence, n.confidence)),
            tags = n.tags || v_tags,
            permanent = n.permanent or coalesce(p_permanent, false),
            key = coalesce(n.key, p_key)
        where n.tenant_id = p_tenant_id and n.id = v_same;
        perform cortex.record_access(p_tenant_id, array[v_same]);
      end if;
      exit;
    exception when unique_violation then
      -- Another writer took the key slot after our probe: the next attempt supersedes its node.
      get stacked diagnostics v_constraint = constraint_name;
      if v_constraint = 'memory_nodes_key' and v_attempt < 5 then
        continue;
      end if;
      raise;
    end;
  end loop;

  -- 5. Why the old ones ended, and the caller's links.
  if cardinality(v_old) > 0 then
    insert into cortex.memory_edges as e (tenant_id, source_id, relation, target_id, weight, created_by)
    select p_tenant_id, v_same, 'supersedes', o, 1, cortex.current_agent() from unnest(v_old) o
    on conflict (tenant_id, source_id, relation, target_id) do update set weight = 1;
  end if;
  v_links := cortex.memory_link(p_tenant_id, v_same, coalesce(p_links, '[]'));
  select * into v_node from cortex.memory_nodes n where n.tenant_id = p_tenant_id and n.id = v_same;
  return jsonb_build_object('memory', cortex.memory_node_json(v_node), 'created', v_created,
                            'deduplicated', v_dedup, 'superseded', to_jsonb(v_old), 'links', v_links);
end $$;
comment on function cortex.memory_write(uuid, text, text, text, real, real, text[], text, text, text, uuid, timestamptz, boolean, jsonb, jsonb, uuid, boolean) is
  'The one write path of remember and supersede_memory (their checks done): de-duplicates (exact, then trigram; p_dedup), supersedes p_supersede and the holder of the key slot (status superseded, valid_to = valid_from of the new one, a supersedes edge), inserts the node, reinforces a duplicate instead (importance + 0.05, greatest confidence, tags united, an access), writes the links. Retries when a concurrent writer takes the key slot. Returns {memory, created, deduplicated, superseded, links}.';
grant execute on function cortex.memory_write(uuid, text, text, text, real, real, text[], text, text, text, uuid, timestamptz, boolean, jsonb, jsonb, uuid, boolean)
  to authenticated, service_role;

create or replace function cortex.memory_source_agent(p_tenant_id uuid, p_agent text, p_visibility text) returns text
language plpgsql stable set search_path = '' as $$
begin
  perform cortex.check_agent(p_tenant_id, p_agent, 'agent');
  perform cortex.guard_acting_agent(p_tenant_id, coalesce(p_agent, cortex.current_agent()), 'agent');
  if p_visibility = 'private' and p_agent <> cortex.current_agent() then
    raise exception 'a private memory belongs to the agent that writes it' using errcode = '22023', column = 'visibility',
      hint = 'an admin may write shared memories for another agent, not private ones';
  end if;
  return coalesce(p_agent, cortex.current_agent());
end $$;
comment on function cortex.memory_source_agent(uuid, text, text) is
  'The source agent of a memory being written: the caller, or p_agent when the caller is an admin (cortex.guard_acting_agent, 42501 naming agent). Private memories are always the caller''s own (22023 naming visibility).';
grant execute on function cortex.memory_source_agent(uuid, text, text) to authenticated, service_role;

create or replace function cortex.memory_check_contact(p_tenant_id uuid, p_contact_id uuid) returns void
language plpgsql stable set search_path = '' as $$
begin
  perform cortex.guard_tenant(p_tenant_id);
  if p_contact_id is not null
     and not exists (select from cortex.contacts c where c.tenant_id = p_tenant_id and c.id = p_contact_id) then
    perform cortex.contact_not_found(p_contact_id);
  end if;
end $$;
comment on function cortex.memory_check_contact(uuid, uuid) is 'P0002 naming contact_id unless the contact belongs to the tenant (or is null).';
grant execute on function cortex.memory_check_contact(uuid, uuid) to authenticated, service_role;

-- API: writes ------------------------------------------------------------------------------------

create or replace function public.remember(
  kind text,
  title text,
  body text default '',
  importance real default null,
  confidence real default null,
  tags text[] default null,
  visibility text default 'shared',
  key text default null,
  contact_id uuid default null,
  valid_from timestamptz default null,
  permanent boolean default false,
  metadata jsonb default null,
  links jsonb default null,
  agent text default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.require_tenant();
  v_visibility text := coalesce(remember.visibility, 'shared');
  v_agent text;
  v_links jsonb;
begin
  perform cortex.require_writer();
  if remember.kind in ('agent', 'contact') then
    raise exception '% nodes are mirrored from the %s table; they cannot be written', remember.kind, remember.kind
      using errcode = '22023', column = 'kind', hint = 'write a fact, decision, event, preference, pattern, goal, observation, person or system';
  end if;
  if remember.kind is null then
    raise exception 'kind is required' using errcode = '22023', column = 'kind';
  end if;
  perform cortex.check_enum('kind', remember.kind, cortex.memory_kinds() || array['person', 'system']);
  perform cortex.memory_check_fields(remember.title, remember.body, remember.importance, remember.confidence,
                                     remember.tags, v_visibility, remember.key, remember.metadata);
  v_agent := cortex.memory_source_agent(v_tenant, remember.agent, v_visibility);
  perform cortex.memory_check_contact(v_tenant, remember.contact_id);
  v_links := cortex.memory_check_links(v_tenant, remember.links);
  return cortex.memory_write(v_tenant, remember.kind, btrim(remember.title), coalesce(remember.body, ''),
                             remember.importance, remember.confidence, remember.tags, v_visibility, v_agent,
                             remember.key, remember.contact_id, remember.valid_from, remember.permanent,
                             remember.metadata, v_links, null, true);
end $$;
comment on function public.remember(text, text, text, real, real, text[], text, text, uuid, timestamptz, boolean, jsonb, jsonb, text) is
  'Writes a memory (kind fact, decision, event, preference, pattern, goal, observation, person or system). An exact or near duplicate (trigram, same numbers and negation) reinforces the existing node instead (created=false, deduplicated exact|trigram). With a key, the node holding that key in the same scope is superseded in the same transaction. links [{target_id, relation, weight}] are checked before anything is written. agent: an admin writes for another agent. Returns {memory, created, deduplicated, superseded, links}.';
grant execute on function public.remember(text, text, text, real, real, text[], text, text, uuid, timestamptz, boolean, jsonb, jsonb, text) to authenticated;

create or replace function public.supersede_memory(
  memory_id uuid,
  title text,
  body text default null,
  kind text default null,
  importance real default null,
  confidence real default null,
  tags text[] default null,
  visibility text default null,
  key text default null,
  contact_id uuid default null,
  valid_from timestamptz default null,
  permanent boolean default null,
  metadata jsonb default null,
  links jsonb default null,
  agent text default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.require_tenant();
  v_old cortex.memory_nodes;
  v_kind text;
  v_visibility text;
  v_agent text;
  v_links jsonb;
  v_result jsonb;
begin
  perform cortex.require_writer();
  select * into v_old from cortex.memory_nodes n
  where n.tenant_id = v_tenant and n.id = supersede_memory.memory_id
  for update;
  if not found then
    perform cortex.memory_not_found(supersede_memory.memory_id);
  end if;
  if v_old.ref_kind is not null then
    raise exception 'a % node mirrors seed 000''s records and cannot be superseded', v_old.kind
      using errcode = '22023', column = 'memory_id', hint = 'change the record itself (the contact, the agent)';
  end if;
  if v_old.status <> 'active' then
    raise exception 'memory % is %, only an active memory can be superseded', v_old.id, v_old.status
      using errcode = '55000', column = 'memory_id', hint = 'supersede the memory that replaced it';
  end if;
  v_kind := coalesce(supersede_memory.kind, v_old.kind);
  if v_kind in ('agent', 'contact') then
    raise exception '% nodes are mirrored from seed 000; they cannot be written', v_kind
      using errcode = '22023', column = 'kind';
  end if;
  perform cortex.check_enum('kind', v_kind, cortex.memory_kinds() || array['person', 'system']);
  v_visibility := coalesce(supersede_memory.visibility, v_old.visibility);
  perform cortex.memory_check_fields(supersede_memory.title, supersede_memory.body, supersede_memory.importance,
                                     supersede_memory.confidence, supersede_memory.tags, v_visibility,
                                     supersede_memory.key, supersede_memory.metadata);
  v_agent := cortex.memory_source_agent(v_tenant, supersede_memory.agent, v_visibility);
  perform cortex.memory_check_contact(v_tenant, supersede_memory.contact_id);
  v_links := cortex.memory_check_links(v_tenant, supersede_memory.links);
  v_result := cortex.memory_write(
    v_tenant, v_kind, btrim(supersede_memory.title), coalesce(supersede_memory.body, v_old.body),
    supersede_memory.importance, supersede_memory.confidence, coalesce(supersede_memory.tags, v_old.tags),
    v_visibility, v_agent, coalesce(supersede_memory.key, v_old.key),
    coalesce(supersede_memory.contact_id, v_old.contact_id), supersede_memory.valid_from, supersede_memory.permanent,
    supersede_memory.metadata, v_links, v_old.id, false);
  select * into v_old from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = v_old.id;
  return jsonb_build_object('memory', v_result -> 'memory', 'superseded', cortex.memory_node_json(v_old),
                            'links', v_result -> 'links');
end $$;
comment on function public.supersede_memory(uuid, text, text, text, real, real, text[], text, text, uuid, timestamptz, boolean, jsonb, jsonb, text) is
  'Replaces an active memory by a new version in one transaction: the old one gets status superseded and valid_to = the new valid_from, with a supersedes edge new -> old. The new node keeps the old one''s kind, body, key, contact_id, visibility and tags unless given. 404 for an unknown memory, 409 (55000) when it is not active, 422 for a mirrored record. Returns {memory, superseded, links}.';
grant execute on function public.supersede_memory(uuid, text, text, text, real, real, text[], text, text, uuid, timestamptz, boolean, jsonb, jsonb, text) to authenticated;

create or replace function public.update_memory(memory_id uuid, patch jsonb) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.require_tenant();
  v_node cortex.memory_nodes;
  v_key text;
  v_allowed text[] := array['title', 'body', 'importance', 'confidence', 'tags', 'metadata', 'permanent',
                            'needs_review', 'valid_to'];
  v_valid_to timestamptz;
  v_tags text[];
  v_constraint text;
begin
  perform cortex.require_writer();
  if patch is null or jsonb_typeof(patch) <> 'object' then
    raise exception 'patch must be a JSON object' using errcode = '22023', column = 'patch';
  end if;
  for v_key in select jsonb_object_keys(patch) loop
    if not (v_key = any (v_allowed)) then
      raise exception 'unknown field "%"; updatable fields are: %', left(v_key, 100), array_to_string(v_allowed, ', ')
        using errcode = '22023', column = left(v_key, 100);
    end if;
    if v_key <> 'valid_to' and jsonb_typeof(patch -> v_key) = 'null' then
      raise exception '% cannot be null', v_key using errcode = '22023', column = v_key;
    end if;
  end loop;
  foreach v_key in array array['title', 'body'] loop
    if patch ? v_key and jsonb_typeof(patch -> v_key) <> 'string' then
      raise exception '% must be a string', v_key using errcode = '22023', column = v_key;
    end if;
  end loop;
  foreach v_key in array array['importance', 'confidence'] loop
    if patch ? v_key and jsonb_typeof(patch -> v_key) <> 'number' then
      raise exception '% must be a number between 0 and 1', v_key using errcode = '22023', column = v_key;
    end if;
  end loop;
  foreach v_key in array array['permanent', 'needs_review'] loop
    if patch ? v_key and jsonb_typeof(patch -> v_key) <> 'boolean' then
      raise exception '% must be true or false', v_key using errcode = '22023', column = v_key;
    end if;
  end loop;
  if patch ? 'tags' then
    if jsonb_typeof(patch -> 'tags') <> 'array'
       or exists (select from jsonb_array_elements(patch -> 'tags') t where jsonb_typeof(t) <> 'string') then
      raise exception 'tags must be an array of strings' using errcode = '22023', column = 'tags';
    end if;
    v_tags := array(select jsonb_array_elements_text(patch -> 'tags'));
  end if;
  if patch ? 'valid_to' and jsonb_typeof(patch -> 'valid_to') <> 'null' then
    begin
      v_valid_to := (patch ->> 'valid_to')::timestamptz;
    exception when others then
      raise exception 'valid_to must be a timestamp' using errcode = '22023', column = 'valid_to';
    end;
  end if;
  perform cortex.memory_check_fields(
    coalesce(patch ->> 'title', 'unchanged'), patch ->> 'body',
    case when patch ? 'importance' then (patch ->> 'importance')::real end,
    case when patch ? 'confidence' then (patch ->> 'confidence')::real end,
    v_tags, null, null, patch -> 'metadata');

  select * into v_node from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = update_memory.memory_id
  for update;
  if not found then
    perform cortex.memory_not_found(update_memory.memory_id);
  end if;
  if (patch ? 'title' or patch ? 'body' or patch ? 'valid_to') and v_node.ref_kind is not null then
    raise exception 'a % node mirrors seed 000''s records: its content follows them', v_node.kind
      using errcode = '22023', column = case when patch ? 'title' then 'title' when patch ? 'body' then 'body' else 'valid_to' end,
            hint = 'change the record itself (the contact, the agent, the interaction)';
  end if;
  if (patch ? 'title' or patch ? 'body') and v_node.status <> 'active' then
    raise exception 'memory % is %: its content is history', v_node.id, v_node.status
      using errcode = '55000', column = 'memory_id', hint = 'only an active memory''s title and body can change';
  end if;
  if v_valid_to is not null and v_valid_to < v_node.valid_from then
    raise exception 'valid_to is before valid_from' using errcode = '22023', column = 'valid_to',
      detail = format('valid_from is %s', v_node.valid_from);
  end if;

  begin
    update cortex.memory_nodes n set
      title = case when patch ? 'title' then btrim(patch ->> 'title') else n.title end,
      body = case when patch ? 'body' then patch ->> 'body' else n.body end,
      importance = case when patch ? 'importance' then (patch ->> 'importance')::real else n.importance end,
      confidence = case when patch ? 'confidence' then (patch ->> 'confidence')::real else n.confidence end,
      tags = case when patch ? 'tags' then v_tags else n.tags end,
      metadata = case when patch ? 'metadata' then patch -> 'metadata' else n.metadata end,
      permanent = case when patch ? 'permanent' then (patch ->> 'permanent')::boolean else n.permanent end,
      needs_review = case when patch ? 'needs_review' then (patch ->> 'needs_review')::boolean else n.needs_review end,
      review_reason = case when patch ? 'needs_review' and not (patch ->> 'needs_review')::boolean then null
                           else n.review_reason end,
      valid_to = case when patch ? 'valid_to' then v_valid_to else n.valid_to end
    where n.tenant_id = v_tenant and n.id = v_node.id
    returning n.* into v_node;
  exception when unique_violation then
    get stacked diagnostics v_constraint = constraint_name;
    if v_constraint = 'memory_nodes_exact' then
      raise exception 'an active memory of this kind with the same content exists'
        using errcode = '23505', column = case when patch ? 'title' then 'title' else 'body' end,
              detail = format('memory %s', (select n.id from cortex.memory_nodes n
                                            where n.tenant_id = v_tenant and n.scope = v_node.scope
                                              and n.kind = v_node.kind and n.status = 'active' and n.ref_kind is null
                                              and n.content_hash = cortex.memory_content_hash(
                                                coalesce(patch ->> 'title', v_node.title),
                                                coalesce(patch ->> 'body', v_node.body)))),
              hint = 'supersede or forget one of the two';
    end if;
    raise;
  end;
  return cortex.memory_node_json(v_node);
end $$;
comment on function public.update_memory(uuid, jsonb) is
  'Patches a memory: title, body, importance, confidence, tags, metadata, permanent, needs_review (false clears review_reason), valid_to (null clears). Unknown keys are 22023 naming the key; new content is embedded and linked again (the trigger resets it); content equal to another active memory is 409. Mirrored records keep their title, body and validity.';
grant execute on function public.update_memory(uuid, jsonb) to authenticated;

create or replace function public.forget_memory(memory_id uuid, reason text default null) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.require_tenant();
  v_agent text;
  v_node cortex.memory_nodes;
begin
  v_agent := cortex.require_writer();
  if length(reason) > 1000 then
    raise exception 'reason must be at most 1000 characters' using errcode = '22023', column = 'reason';
  end if;
  select * into v_node from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = forget_memory.memory_id
  for update;
  if not found then
    perform cortex.memory_not_found(forget_memory.memory_id);
  end if;
  if v_node.ref_kind is not null then
    raise exception 'a % node mirrors seed 000''s records and cannot be forgotten', v_node.kind
      using errcode = '22023', column = 'memory_id',
            hint = 'erasure of a person goes through the contact; records stay in the graph';
  end if;
  if v_node.status = 'archived' then
    return cortex.memory_node_json(v_node);  -- forgotten already: nothing changes
  end if;
  update cortex.memory_nodes n
  set status = 'archived', valid_to = coalesce(n.valid_to, greatest(now(), n.valid_from)),
      metadata = n.metadata || jsonb_strip_nulls(jsonb_build_object(
        'forgotten_at', now(), 'forgotten_by', v_agent, 'forgotten_reason', reason))
  where n.tenant_id = v_tenant and n.id = v_node.id
  returning n.* into v_node;
  return cortex.memory_node_json(v_node);
end $$;
comment on function public.forget_memory(uuid, text) is
  'Forgets a memory: status archived, valid_to set (now unless it ended already), the reason, time and agent in metadata. Never deletes; idempotent. Mirrored records (agent, contact, interaction and handoff nodes) cannot be forgotten (22023 naming memory_id).';
grant execute on function public.forget_memory(uuid, text) to authenticated;

-- API: reads -------------------------------------------------------------------------------------

create or replace function public.get_memory(memory_id uuid, as_of timestamptz default null, include_edges boolean default true)
returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.require_tenant();
  v_node cortex.memory_nodes;
  v_edges jsonb;
begin
  perform cortex.memory_check_as_of(as_of);
  select * into v_node from cortex.memory_nodes n where n.tenant_id = v_tenant and n.id = get_memory.memory_id;
  if not found or (as_of is not null and not (v_node.valid_from <= as_of
                                                and (v_node.valid_to is null or v_node.valid_to > as_of))) then
    perform cortex.memory_not_found(get_memory.memory_id);
  end if;
  if coalesce(include_edges, true) then
    -- Both directions, strongest first, at most 200 (a contact's node may have thousands of events).
    select coalesce(jsonb_agg(x.j order by (x.j ->> 'current_weight')::real desc, x.j ->> 'relation'), '[]')
    into v_edges
    from (select cortex.memory_edge_json(e) as j
          from cortex.memory_edges e
          where e.tenant_id = v_tenant and (e.source_id = v_node.id or e.target_id = v_node.id)
            and (as_of is null or e.created_at <= as_of)
          order by e.weight desc, e.last_reinforced_at desc
          limit 200) x;
  end if;
  perform cortex.record_access(v_tenant, array[v_node.id]);
  return cortex.memory_node_json(v_node) || case when v_edges is null then '{}' else jsonb_build_object('edges', v_edges) end;
end $$;
comment on function public.get_memory(uuid, timestamptz, boolean) is
  'One memory or entity node with its visible edges in both directions (edge json, current_weight decayed now; the 200 strongest). as_of: 404 unless the node was valid then (valid_from <= as_of < valid_to), edges as they existed then; a future as_of is 22023. Records the access.';
grant execute on function public.get_memory(uuid, timestamptz, boolean) to authenticated;

create or replace function public.list_memories(
  kinds text[] default null,
  agent text default null,
  contact_id uuid default null,
  tags text[] default null,
  status text default null,
  since timestamptz default null,
  "until" timestamptz default null,
  as_of timestamptz default null,
  include_superseded boolean default false,
  needs_review boolean default null,
  "limit" int default 50,
  cursor text default null
) returns jsonb
language plpgsql volatile set search_path = ''
-- The optional filters make a generic plan useless: plan each call with its real values.
set plan_cache_mode = force_custom_plan as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.require_tenant();
  v_kind text;
  v_tags text[];
  v_cursor_at timestamptz;
  v_cursor_id uuid;
  v_rows cortex.memory_nodes[];
  v_n int;
begin
  perform cortex.memory_check_as_of(as_of);
  foreach v_kind in array coalesce(kinds, '{}') loop
    perform cortex.check_enum('kinds', v_kind, cortex.node_kinds());
  end loop;
  perform cortex.check_enum('status', status, cortex.memory_statuses());
  perform cortex.check_agent(v_tenant, agent, 'agent');
  if "limit" is null or "limit" not between 1 and 200 then
    raise exception 'limit must be between 1 and 200' using errcode = '22023', column = 'limit';
  end if;
  if since is not null and "until" is not null and "until" < since then
    raise exception 'until is before since' using errcode = '22023', column = 'until';
  end if;
  if tags is not null then
    v_tags := array(select lower(btrim(t)) from unnest(tags) t where btrim(t) <> '');
  end if;
  if cursor is not null then
    if cursor !~ '^[0-9]{1,18}_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' then
      raise exception 'cursor is not one this API returned' using errcode = '22023', column = 'cursor';
    end if;
    v_cursor_at := 'epoch'::timestamptz + split_part(cursor, '_', 1)::bigint * interval '1 microsecond';
    v_cursor_id := split_part(cursor, '_', 2)::uuid;
  end if;

  select array(
    select n from cortex.memory_nodes n
    where n.tenant_id = v_tenant
      and (kinds is null or n.kind = any (kinds))
      and (agent is null or n.source_agent = agent)
      and (contact_id is null or n.contact_id = contact_id)
      and (v_tags is null or n.tags @> v_tags)
      and (since is null or n.created_at >= since)
      and ("until" is null or n.created_at < "until")
      and (needs_review is null or n.needs_review = needs_review)
      -- A status asked for is that status; "as of" a time, validity decides (a superseded or
      -- forgotten node was the truth then); else the active ones, plus superseded when asked.
      and case when status is not null then n.status = status
               when as_of is not null then true
               when include_superseded then n.status <> 'archived'
               else n.status = 'active' end
      and (as_of is null or (n.valid_from <= as_of and (n.valid_to is null or n.valid_to > as_of)))
      and (v_cursor_at is null or (n.created_at, n.id) < (v_cursor_at, v_cursor_id))
    order by n.created_at desc, n.id desc
    limit "limit" + 1) into v_rows;
  v_n := least(cardinality(v_rows), "limit");
  perform cortex.record_access(v_tenant, array(select (v_rows[i]).id from generate_series(1, v_n) i));
  return jsonb_build_object(
    'items', coalesce((select jsonb_agg(cortex.memory_node_json(v_rows[i]) order by i) from generate_series(1, v_n) i), '[]'),
    'next_cursor', case when cardinality(v_rows) > "limit" then
      ((extract(epoch from (v_rows[v_n]).created_at) * 1000000)::bigint)::text || '_' || (v_rows[v_n]).id::text end);
end $$;
comment on function public.list_memories(text[], text, uuid, text[], text, timestamptz, timestamptz, timestamptz, boolean, boolean, int, text) is
  'Lists memory and entity nodes, newest first (keyset pagination on created_at, id: pass next_cursor back as cursor). Filters: kinds, agent (source), contact_id, tags (all of), status, since/until (created_at), needs_review. By default only active nodes; include_superseded adds superseded ones; as_of T: the nodes valid at T whatever their status now (future T is 22023). limit 1..200. Records the access of the nodes served.';
grant execute on function public.list_memories(text[], text, uuid, text[], text, timestamptz, timestamptz, timestamptz, boolean, boolean, int, text) to authenticated;
