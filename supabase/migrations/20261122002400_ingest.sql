-- File ingest (issue 8, seed 001 "File Ingest"): files an agent already keeps (MEMORY.md, AGENTS.md,
-- memory/*.md, notes, logs, exports) become memories of the graph.
--
-- Python reads and chunks a file (functions/cortex/ingest/chunking.py: markdown by heading, the
-- other formats by lines or top-level items) and hands the chunks to public.ingest_chunks, which
-- classifies each chunk (cortex.classify_chunk: the seed's keyword heuristics plus a date rule),
-- writes it through public.remember (so it is de-duplicated exactly and by trigram against the
-- existing nodes, then embedded and auto-linked by the index sweep like any memory), and records
-- the file in cortex.ingest_files with its report, all in one transaction: a file is never half
-- ingested. A file is ingested once per (tenant, agent, content hash): the same file again returns
-- the first report and writes nothing.
-- A bad file (binary, too large, broken encoding, unknown extension, a bad chunk) is recorded by
-- public.fail_ingest with its error, and no node is written.

-- Vocabularies -----------------------------------------------------------------------------------

create or replace function cortex.ingest_formats() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['md', 'txt', 'json', 'yaml', 'csv', 'log'];
end $$;
comment on function cortex.ingest_formats() is 'File formats ingest reads (by file extension; .markdown is md, .yml is yaml).';

create or replace function cortex.ingest_statuses() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['pending', 'processed', 'failed'];
end $$;
comment on function cortex.ingest_statuses() is
  'Statuses of an ingested file: pending (being ingested, inside the ingesting transaction), processed, failed.';

create or replace function cortex.ingest_sources() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['api', 'cli', 'folder'];
end $$;
comment on function cortex.ingest_sources() is
  'Where an ingested file came from: api (POST /api/v1/ingest or PostgREST), cli (cortex ingest), folder (the drop folder).';

grant execute on function cortex.ingest_formats(), cortex.ingest_statuses(), cortex.ingest_sources()
  to authenticated, service_role;

-- The log ----------------------------------------------------------------------------------------

create table cortex.ingest_files (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  id uuid not null default gen_random_uuid(),
  -- The agent the file was ingested for (the memories' source agent).
  agent text not null,
  -- The agent that asked (an admin may ingest for another agent).
  created_by text,
  file_name text not null check (length(file_name) between 1 and 255),
  -- SHA-256 of the file's bytes (hex); null only for a failed file that could not be read whole.
  sha256 text check (sha256 ~ '^[0-9a-f]{64}$'),
  -- Null for a failed file of an unknown format.
  format text check (format = any (cortex.ingest_formats())),
  source text not null default 'api' check (source = any (cortex.ingest_sources())),
  size_bytes bigint check (size_bytes >= 0),
  status text not null default 'pending' check (status = any (cortex.ingest_statuses())),
  -- {chunks, created, duplicates, by_kind, errors: [{field, message}], nodes: [{index, id, kind, title, created,
  --  deduplicated}]}
  report jsonb not null default '{}' check (jsonb_typeof(report) = 'object'),
  created_at timestamptz not null default clock_timestamp(),
  finished_at timestamptz,
  primary key (tenant_id, id),
  foreign key (tenant_id, agent) references cortex.agents (tenant_id, name) on delete cascade,
  check (status <> 'processed' or (sha256 is not null and format is not null and finished_at is not null))
);
comment on table cortex.ingest_files is
  'The ingest log: one row per file handed to ingest (its name, content hash, format, source, status) with its report (chunks, nodes created, duplicates, errors). A processed file is unique per tenant, agent and content hash.';
-- Idempotency: one processed row per content per agent (the same file again is a no-op).
create unique index ingest_files_once on cortex.ingest_files (tenant_id, agent, sha256) where status = 'processed';
create index ingest_files_recent on cortex.ingest_files (tenant_id, created_at desc);

alter table cortex.ingest_files enable row level security;
create policy "Ingested files are visible to agents of their tenant" on cortex.ingest_files
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
create policy "Writing agents log files they ingest for themselves, admins for any agent" on cortex.ingest_files
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write())
              and (agent = (select cortex.current_agent()) or (select cortex.caller_is_admin())));
create policy "Writing agents finish the files they log" on cortex.ingest_files
  for update to authenticated
  using (tenant_id = (select cortex.current_tenant())
         and (agent = (select cortex.current_agent()) or (select cortex.caller_is_admin())))
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write()));
grant select, insert, update on cortex.ingest_files to authenticated;

-- Classification ---------------------------------------------------------------------------------

create or replace function cortex.classify_chunk(p_text text) returns text
language sql immutable parallel safe set search_path = '' as $$
  -- The seed's keywords in the seed's order, as whole words (with their plural and inflected
  -- forms), then the date rule, then fact. ARE: \m and \M are word boundaries.
  select case
    when t ~ '\m(decided|decide|decides|decision|decisions|chose|chosen|choose|picked)\M' then 'decision'
    when t ~ '\m(goal|goals|target|targets|aim|aims|aiming)\M' then 'goal'
    when t ~ '\m(prefers|prefer|preferred|preference|preferences|likes|hates)\M' then 'preference'
    -- AGENTS.md's rules and conventions are patterns too (rule, convention, never, must).
    when t ~ '\m(pattern|patterns|lesson|lessons|always|rule|rules|convention|conventions|never|must)\M' then 'pattern'
    when t ~ '\m(happened|deployed|merged)\M' then 'event'
    when t ~ '\m(noticed|observed|observation|observations)\M' or t ~ '\msaw that\M' then 'observation'
    -- A date: ISO (2024-03-01), numeric (01/03/2024, 3.1.2024), or a month name with a day
    -- ("March 3", "3 March", "Mar 3rd, 2024").
    when t ~ '\m\d{4}-\d{1,2}-\d{1,2}\M'
      or t ~ '\m\d{1,2}[/.]\d{1,2}[/.]\d{2,4}\M'
      or t ~ '\m(jan|january|feb|february|mar|march|apr|april|may|jun|june|jul|july|aug|august|sep|sept|september|oct|october|nov|november|dec|december)\.?\s+\d{1,2}(st|nd|rd|th)?\M'
      or t ~ '\m\d{1,2}(st|nd|rd|th)?\s+(jan|january|feb|february|mar|march|apr|april|may|jun|june|jul|july|aug|august|sep|sept|september|oct|october|nov|november|dec|december)\M'
      then 'event'
    else 'fact'
  end
  from (select lower(coalesce(p_text, '')) as t) s
$$;
comment on function cortex.classify_chunk(text) is
  'The kind of memory a chunk of text is, by seed 001''s heuristics, first match wins: decided/chose/picked -> decision; goal/target/aim -> goal; prefers/likes/hates -> preference; pattern/lesson/always (and rule/convention/never/must: AGENTS.md''s rules) -> pattern; happened/deployed/merged -> event; noticed/observed/"saw that" -> observation; then a date (ISO, numeric, or a month name with a day) -> event; else fact. Whole words, case ignored.';
grant execute on function cortex.classify_chunk(text) to authenticated, service_role;

-- Helpers ----------------------------------------------------------------------------------------

create or replace function cortex.ingest_check_file(p_file_name text, p_format text, p_source text, p_sha256 text)
returns void
language plpgsql immutable set search_path = '' as $$
begin
  if p_file_name is null or btrim(p_file_name) = '' then
    raise exception 'file_name is required' using errcode = '22023', column = 'file_name';
  end if;
  if length(p_file_name) > 255 then
    raise exception 'file_name must be at most 255 characters' using errcode = '22023', column = 'file_name';
  end if;
  perform cortex.check_enum('format', p_format, cortex.ingest_formats());
  if p_source is null then
    raise exception 'source is required' using errcode = '22023', column = 'source';
  end if;
  perform cortex.check_enum('source', p_source, cortex.ingest_sources());
  if p_sha256 is not null and p_sha256 !~ '^[0-9a-f]{64}$' then
    raise exception 'sha256 must be 64 lowercase hex digits' using errcode = '22023', column = 'sha256';
  end if;
end $$;
comment on function cortex.ingest_check_file(text, text, text, text) is
  'Validates an ingested file''s name (1..255 characters), format (cortex.ingest_formats()), source and sha256 (hex): 22023 naming the field.';

create or replace function cortex.ingest_check_chunks(p_chunks jsonb) returns void
language plpgsql immutable set search_path = '' as $$
declare
  v_chunk jsonb;
  v_i int := 0;
  v_key text;
  v_at text;
begin
  if p_chunks is null or jsonb_typeof(p_chunks) <> 'array' then
    raise exception 'chunks must be an array of {title, body, kind, section, line}' using errcode = '22023', column = 'chunks';
  end if;
  if jsonb_array_length(p_chunks) = 0 then
    raise exception 'the file has no content to ingest' using errcode = '22023', column = 'chunks';
  end if;
  if jsonb_array_length(p_chunks) > 2000 then
    raise exception 'at most 2000 chunks per file (got %)', jsonb_array_length(p_chunks)
      using errcode = '22023', column = 'chunks', hint = 'split the file';
  end if;
  for v_chunk in select c from jsonb_array_elements(p_chunks) c loop
    v_at := format('chunks[%s]', v_i);
    if jsonb_typeof(v_chunk) <> 'object' then
      raise exception 'a chunk must be an object {title, body, kind, section, line}' using errcode = '22023', column = v_at;
    end if;
    for v_key in select jsonb_object_keys(v_chunk) loop
      if v_key not in ('title', 'body', 'kind', 'section', 'line', 'classified_by') then
        raise exception 'unknown field "%" of a chunk; a chunk has title, body, kind, section, line and classified_by',
          left(v_key, 100) using errcode = '22023', column = v_at || '.' || left(v_key, 100);
      end if;
    end loop;
    if jsonb_typeof(v_chunk -> 'title') is distinct from 'string' or btrim(v_chunk ->> 'title') = '' then
      raise exception 'a chunk needs a title' using errcode = '22023', column = v_at || '.title';
    end if;
    if length(btrim(v_chunk ->> 'title')) > 500 then
      raise exception 'a chunk''s title must be at most 500 characters' using errcode = '22023', column = v_at || '.title';
    end if;
    foreach v_key in array array['body', 'kind', 'section', 'classified_by'] loop
      if v_chunk ? v_key and jsonb_typeof(v_chunk -> v_key) not in ('string', 'null') then
        raise exception '% must be a string', v_key using errcode = '22023', column = v_at || '.' || v_key;
      end if;
    end loop;
    if length(v_chunk ->> 'body') > 20000 then
      raise exception 'a chunk''s body must be at most 20000 characters' using errcode = '22023', column = v_at || '.body';
    end if;
    if length(v_chunk ->> 'section') > 500 or length(v_chunk ->> 'classified_by') > 50 then
      raise exception 'section (500) or classified_by (50 characters) too long' using errcode = '22023',
        column = v_at || case when length(v_chunk ->> 'section') > 500 then '.section' else '.classified_by' end;
    end if;
    if v_chunk ? 'line' and jsonb_typeof(v_chunk -> 'line') not in ('number', 'null') then
      raise exception 'line must be a number' using errcode = '22023', column = v_at || '.line';
    end if;
    if v_chunk ->> 'kind' is not null then
      perform cortex.check_enum(v_at || '.kind', v_chunk ->> 'kind', cortex.memory_kinds());
    end if;
    v_i := v_i + 1;
  end loop;
end $$;
comment on function cortex.ingest_check_chunks(jsonb) is
  'Validates the chunks of a file before anything is written: an array of 1..2000 objects {title (1..500), body (<= 20000), kind (a memory kind, optional), section, line, classified_by}; 22023 naming chunks[i].field.';

grant execute on function cortex.ingest_check_file(text, text, text, text), cortex.ingest_check_chunks(jsonb)
  to authenticated, service_role;

-- API --------------------------------------------------------------------------------------------

create or replace function public.ingest_chunks(
  file_name text,
  format text,
  chunks jsonb,
  sha256 text default null,
  agent text default null,
  source text default 'api',
  size_bytes bigint default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.require_tenant();
  v_agent text;
  v_sha text;
  v_existing cortex.ingest_files;
  v_file_id uuid;
  v_agent_node uuid;
  v_links jsonb;
  v_chunk jsonb;
  v_i int := 0;
  v_kind text;
  v_by text;
  v_result jsonb;
  v_nodes jsonb := '[]';
  v_created int := 0;
  v_duplicates int := 0;
  v_by_kind jsonb := '{}';
  v_report jsonb;
begin
  perform cortex.require_writer();
  perform cortex.ingest_check_file(ingest_chunks.file_name, ingest_chunks.format, ingest_chunks.source,
                                   ingest_chunks.sha256);
  if ingest_chunks.format is null then
    raise exception 'format is required' using errcode = '22023', column = 'format',
      hint = 'one of ' || array_to_string(cortex.ingest_formats(), ', ');
  end if;
  perform cortex.ingest_check_chunks(ingest_chunks.chunks);
  v_agent := cortex.memory_source_agent(v_tenant, ingest_chunks.agent, 'shared');
  -- A PostgREST caller may not have the file's bytes: its chunks stand for the content.
  v_sha := coalesce(ingest_chunks.sha256,
                    encode(pg_catalog.sha256(convert_to(ingest_chunks.chunks::text, 'UTF8')), 'hex'));

  -- The same content for the same agent is ingested once; concurrent uploads of it queue here.
  perform pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('ingest:' || v_tenant || ':' || v_agent || ':' || v_sha, 0));
  select * into v_existing from cortex.ingest_files f
  where f.tenant_id = v_tenant and f.agent = v_agent and f.sha256 = v_sha and f.status = 'processed';
  if found then
    return v_existing.report || jsonb_build_object('already_ingested', true, 'file_id', v_existing.id,
                                                   'status', 'processed');
  end if;

  insert into cortex.ingest_files (tenant_id, agent, created_by, file_name, sha256, format, source, size_bytes)
  values (v_tenant, v_agent, cortex.current_agent(), btrim(ingest_chunks.file_name), v_sha, ingest_chunks.format,
          ingest_chunks.source, ingest_chunks.size_bytes)
  returning id into v_file_id;

  -- Each chunk applies to the agent the file belongs to (its MEMORY.md, its AGENTS.md).
  select n.id into v_agent_node from cortex.memory_nodes n
  where n.tenant_id = v_tenant and n.ref_kind = 'agent' and n.ref_id = v_agent;
  v_links := case when v_agent_node is null then null
                  else jsonb_build_array(jsonb_build_object('target_id', v_agent_node, 'relation', 'applies_to',
                                                            'weight', 0.6)) end;

  for v_chunk in select c from jsonb_array_elements(ingest_chunks.chunks) c loop
    v_kind := coalesce(v_chunk ->> 'kind',
                       cortex.classify_chunk(concat_ws(E'\n', v_chunk ->> 'section', v_chunk ->> 'title',
                                                       v_chunk ->> 'body')));
    v_by := case when v_chunk ->> 'kind' is null then 'heuristic' else coalesce(v_chunk ->> 'classified_by', 'caller') end;
    v_result := public.remember(
      kind => v_kind,
      title => btrim(v_chunk ->> 'title'),
      body => coalesce(v_chunk ->> 'body', ''),
      tags => array['ingested'],
      metadata => jsonb_strip_nulls(jsonb_build_object(
        'ingest', jsonb_build_object('file_id', v_file_id, 'file_name', btrim(ingest_chunks.file_name),
                                     'chunk', v_i, 'line', v_chunk -> 'line', 'section', v_chunk ->> 'section',
                                     'classified_by', v_by))),
      links => v_links,
      agent => v_agent);
    if (v_result ->> 'created')::boolean then
      v_created := v_created + 1;
    else
      v_duplicates := v_duplicates + 1;
    end if;
    v_by_kind := jsonb_set(v_by_kind, array[v_kind], to_jsonb(coalesce((v_by_kind ->> v_kind)::int, 0) + 1));
    v_nodes := v_nodes || jsonb_build_array(jsonb_build_object(
      'index', v_i, 'id', v_result -> 'memory' -> 'id', 'kind', v_kind, 'title', v_result -> 'memory' -> 'title',
      'created', v_result -> 'created', 'deduplicated', v_result -> 'deduplicated', 'classified_by', v_by));
    v_i := v_i + 1;
  end loop;

  v_report := jsonb_build_object(
    'file_id', v_file_id, 'file_name', btrim(ingest_chunks.file_name), 'format', ingest_chunks.format,
    'sha256', v_sha, 'agent', v_agent, 'status', 'processed', 'chunks', v_i, 'created', v_created,
    'duplicates', v_duplicates, 'by_kind', v_by_kind, 'errors', '[]'::jsonb, 'nodes', v_nodes);
  update cortex.ingest_files f set status = 'processed', report = v_report, finished_at = clock_timestamp()
  where f.tenant_id = v_tenant and f.id = v_file_id;
  return v_report || jsonb_build_object('already_ingested', false);
end $$;
comment on function public.ingest_chunks(text, text, jsonb, text, text, text, bigint) is
  'Ingests one file''s chunks [{title, body, kind?, section?, line?}] in one transaction: each chunk without a kind is classified by cortex.classify_chunk (section + title + body), written through remember (de-duplicated against existing nodes: a duplicate is reinforced, not re-created) with an applies_to edge to the agent''s node, and the file is logged in cortex.ingest_files with its report. Idempotent per (agent, sha256): the same content again returns the first report with already_ingested = true. sha256 defaults to the hash of the chunks. agent: an admin ingests for another agent. Returns {file_id, file_name, format, sha256, agent, status, chunks, created, duplicates, by_kind, errors, nodes, already_ingested}.';
grant execute on function public.ingest_chunks(text, text, jsonb, text, text, text, bigint) to authenticated;

create or replace function public.fail_ingest(
  file_name text,
  error text,
  field text default null,
  format text default null,
  sha256 text default null,
  agent text default null,
  source text default 'api',
  size_bytes bigint default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.require_tenant();
  v_agent text;
  v_id uuid;
  v_report jsonb;
begin
  perform cortex.require_writer();
  perform cortex.ingest_check_file(fail_ingest.file_name, fail_ingest.format, fail_ingest.source, fail_ingest.sha256);
  if fail_ingest.error is null or btrim(fail_ingest.error) = '' then
    raise exception 'error is required' using errcode = '22023', column = 'error';
  end if;
  v_agent := cortex.memory_source_agent(v_tenant, fail_ingest.agent, 'shared');
  v_id := gen_random_uuid();
  v_report := jsonb_build_object(
    'file_id', v_id, 'file_name', btrim(fail_ingest.file_name), 'format', fail_ingest.format,
    'sha256', fail_ingest.sha256, 'agent', v_agent, 'status', 'failed', 'chunks', 0, 'created', 0, 'duplicates', 0,
    'by_kind', '{}'::jsonb, 'nodes', '[]'::jsonb,
    'errors', jsonb_build_array(jsonb_strip_nulls(jsonb_build_object('field', fail_ingest.field,
                                                                     'message', left(fail_ingest.error, 2000)))));
  insert into cortex.ingest_files (tenant_id, id, agent, created_by, file_name, sha256, format, source, size_bytes,
                                   status, report, finished_at)
  values (v_tenant, v_id, v_agent, cortex.current_agent(), btrim(fail_ingest.file_name), fail_ingest.sha256,
          fail_ingest.format, fail_ingest.source, fail_ingest.size_bytes, 'failed', v_report, clock_timestamp());
  return v_report;
end $$;
comment on function public.fail_ingest(text, text, text, text, text, text, text, bigint) is
  'Logs a file that could not be ingested (binary, too large, broken encoding, unknown format, a bad chunk) with its error in cortex.ingest_files (status failed); no memory is written. Returns the report {file_id, file_name, status: failed, chunks: 0, created: 0, duplicates: 0, errors: [{field, message}]}.';
grant execute on function public.fail_ingest(text, text, text, text, text, text, text, bigint) to authenticated;

create or replace function cortex.ingest_file_json(f cortex.ingest_files) returns jsonb
language sql stable set search_path = '' as $$
  select jsonb_build_object('id', f.id, 'agent', f.agent, 'created_by', f.created_by, 'file_name', f.file_name,
                            'sha256', f.sha256, 'format', f.format, 'source', f.source, 'size_bytes', f.size_bytes,
                            'status', f.status, 'report', f.report, 'created_at', f.created_at,
                            'finished_at', f.finished_at)
$$;
comment on function cortex.ingest_file_json(cortex.ingest_files) is 'An ingest log row as the API shows it.';
grant execute on function cortex.ingest_file_json(cortex.ingest_files) to authenticated, service_role;

create or replace function public.list_ingest_files(
  status text default null,
  agent text default null,
  sha256 text default null,
  "limit" int default 50
) returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.require_tenant();
  v_items jsonb;
begin
  perform cortex.check_enum('status', list_ingest_files.status, cortex.ingest_statuses());
  if list_ingest_files."limit" is null or list_ingest_files."limit" not between 1 and 500 then
    raise exception 'limit must be between 1 and 500' using errcode = '22023', column = 'limit';
  end if;
  select coalesce(jsonb_agg(cortex.ingest_file_json(f) - 'report'
                            || jsonb_build_object('report', f.report - 'nodes') order by f.created_at desc, f.id), '[]')
  into v_items
  from (select * from cortex.ingest_files f
        where f.tenant_id = v_tenant
          and (list_ingest_files.status is null or f.status = list_ingest_files.status)
          and (list_ingest_files.agent is null or f.agent = list_ingest_files.agent)
          and (list_ingest_files.sha256 is null or f.sha256 = list_ingest_files.sha256)
        order by f.created_at desc, f.id
        limit list_ingest_files."limit") f;
  return jsonb_build_object('items', v_items);
end $$;
comment on function public.list_ingest_files(text, text, text, int) is
  'The ingest log of the tenant, newest first (filters: status, agent, sha256; limit 1..500); each report without its node list. Returns {items: [...]}.';
grant execute on function public.list_ingest_files(text, text, text, int) to authenticated;

create or replace function public.get_ingest_file(file_id uuid) returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_variable
declare
  v_tenant uuid := cortex.require_tenant();
  v_row cortex.ingest_files;
begin
  select * into v_row from cortex.ingest_files f where f.tenant_id = v_tenant and f.id = get_ingest_file.file_id;
  if not found then
    raise exception 'ingested file % not found', get_ingest_file.file_id using errcode = 'P0002', column = 'file_id';
  end if;
  return cortex.ingest_file_json(v_row);
end $$;
comment on function public.get_ingest_file(uuid) is 'One file of the ingest log with its full report (nodes included); P0002 naming file_id when unknown.';
grant execute on function public.get_ingest_file(uuid) to authenticated;
