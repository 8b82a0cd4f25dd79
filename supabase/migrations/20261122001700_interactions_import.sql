-- Backfill: existing logs imported through one set-based function (import_interactions), never by
-- raw inserts. Each interaction keeps when it happened (occurred_at); ordering, recency, last touch
-- and contexts use occurred_at, so an imported old interaction never becomes "the latest".
-- Rows are stored with their analysis pending and one summarise_interaction job each: the import
-- itself calls no model. Idempotent by (contact, type, external_id): a re-import inserts nothing.

-- A database migrated before occurred_at was added to …000500_interactions (in place) gets the
-- column here, filled from created_at; a fresh one already has it and this does nothing.
do $$
begin
  if not exists (select from information_schema.columns
                 where table_schema = 'cortex' and table_name = 'interactions' and column_name = 'occurred_at') then
    alter table cortex.interactions add column occurred_at timestamptz;
    update cortex.interactions set occurred_at = created_at;
    alter table cortex.interactions alter column occurred_at set not null,
      add constraint interactions_occurred_at_check check (occurred_at <= created_at + interval '5 minutes');
    drop index if exists cortex.interactions_contact;
    create index interactions_contact on cortex.interactions (tenant_id, contact_id, occurred_at desc);
  end if;
end $$;

-- occurred_at: created_at unless the writer gave it, and then as fixed as every recorded field.
create or replace function cortex.interactions_occurred_at() returns trigger
language plpgsql set search_path = '' as $$
begin
  if tg_op = 'INSERT' then
    new.occurred_at := coalesce(new.occurred_at, new.created_at);
  elsif new.occurred_at is distinct from old.occurred_at then
    raise exception 'interactions are append-only: their recorded fields cannot change'
      using errcode = '55000', hint = 'log a new interaction instead';
  end if;
  return new;
end $$;
comment on function cortex.interactions_occurred_at() is
  'Trigger: occurred_at defaults to created_at (the time of logging) and never changes afterwards.';
create trigger interactions_occurred_at before insert or update of occurred_at on cortex.interactions
  for each row execute function cortex.interactions_occurred_at();

-- An ISO 8601 timestamp (a zone, else UTC), or null when the text is not one. Words PostgreSQL
-- would accept ('now', 'epoch', 'infinity') are not timestamps of an event.
create or replace function cortex.import_timestamp(p_text text) returns timestamptz
language plpgsql stable set search_path = '' as $$
begin
  if p_text !~ '^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?)?([Zz]|[+-]\d{2}(:?\d{2})?)?$' then
    return null;
  end if;
  if p_text ~ '([Zz]|[+-]\d{2}(:?\d{2})?)$' and p_text ~ '[T ]' then
    return p_text::timestamptz;
  end if;
  return p_text::timestamp at time zone 'UTC';
exception when others then
  return null;
end $$;
comment on function cortex.import_timestamp(text) is
  'An ISO 8601 timestamp as timestamptz (UTC when it has no zone), or null when the text is not one.';

-- The first thing wrong with one import item ({field, message}), or null. Contact existence is
-- checked by import_interactions (a join); everything else a row needs is checked here, so an
-- item that passes cannot fail at insert.
create or replace function cortex.import_item_error(p_item jsonb, p_at timestamptz, p_caller text, p_now timestamptz)
returns jsonb
language plpgsql stable set search_path = '' as $$
declare
  v_fields constant text[] := array['contact_id', 'contact_email', 'type', 'occurred_at', 'external_id', 'agent',
    'human_id', 'direction', 'subject', 'raw_content', 'summary', 'key_points', 'sentiment', 'intent',
    'campaign_id', 'thread_id', 'metadata'];
  v_lengths constant text[] := array['external_id', 'human_id', 'campaign_id', 'thread_id', 'subject', 'raw_content'];
  v_max constant int[] := array[200, 200, 200, 200, 1000, 1000000];
  v_key text;
  v_agent text;
  v_n int;
begin
  if jsonb_typeof(p_item) is distinct from 'object' then
    return jsonb_build_object('field', 'item', 'message', 'each item must be a JSON object');
  end if;
  if (p_item - v_fields) <> '{}' then
    select k into v_key from jsonb_object_keys(p_item - v_fields) k order by k limit 1;
    return jsonb_build_object('field', left(v_key, 100),
      'message', 'unknown field; allowed: ' || array_to_string(v_fields, ', '));
  end if;
  foreach v_key in array v_fields loop
    if v_key not in ('key_points', 'metadata') and jsonb_typeof(p_item -> v_key) not in ('string', 'null') then
      return jsonb_build_object('field', v_key, 'message', v_key || ' must be a string');
    end if;
  end loop;
  if jsonb_typeof(p_item -> 'metadata') not in ('object', 'null') then
    return jsonb_build_object('field', 'metadata', 'message', 'metadata must be a JSON object');
  end if;
  if jsonb_typeof(p_item -> 'key_points') not in ('array', 'null')
     or (jsonb_typeof(p_item -> 'key_points') = 'array' and exists (
           select from jsonb_array_elements(p_item -> 'key_points') e where jsonb_typeof(e) <> 'string')) then
    return jsonb_build_object('field', 'key_points', 'message', 'key_points must be an array of strings');
  end if;

  if nullif(btrim(p_item ->> 'contact_id'), '') is null and nullif(btrim(p_item ->> 'contact_email'), '') is null then
    return jsonb_build_object('field', 'contact_id', 'message', 'contact_id or contact_email is required');
  end if;
  if p_item ->> 'contact_id' !~* '^\s*[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\s*$' then
    return jsonb_build_object('field', 'contact_id', 'message', 'contact_id must be a UUID');
  end if;
  if nullif(p_item ->> 'type', '') is null then
    return jsonb_build_object('field', 'type', 'message', 'type is required');
  end if;
  if not (p_item ->> 'type' = any (cortex.interaction_types())) then
    return jsonb_build_object('field', 'type',
      'message', 'type must be one of: ' || array_to_string(cortex.interaction_types(), ', '));
  end if;
  if nullif(btrim(p_item ->> 'external_id'), '') is null then
    return jsonb_build_object('field', 'external_id',
      'message', 'external_id is required for an import (a re-import of the same row is then a duplicate)');
  end if;
  if nullif(p_item ->> 'occurred_at', '') is null then
    return jsonb_build_object('field', 'occurred_at', 'message', 'occurred_at is required for an import');
  end if;
  if p_at is null then
    return jsonb_build_object('field', 'occurred_at',
      'message', 'occurred_at must be an ISO 8601 timestamp (e.g. 2024-03-01T09:30:00Z; without a zone it is UTC)');
  end if;
  if p_at > p_now + interval '5 minutes' then
    return jsonb_build_object('field', 'occurred_at', 'message', 'occurred_at is in the future');
  end if;
  if p_at < '1970-01-01T00:00:00Z' then
    return jsonb_build_object('field', 'occurred_at', 'message', 'occurred_at must be after 1970-01-01');
  end if;
  v_agent := coalesce(p_item ->> 'agent', p_caller);
  if v_agent <> p_caller and v_agent <> 'human' then
    return jsonb_build_object('field', 'agent',
      'message', format('agent must be the calling agent ("%s") or "human"', p_caller));
  end if;
  if v_agent = 'human' and nullif(p_item ->> 'human_id', '') is null then
    return jsonb_build_object('field', 'human_id', 'message', 'human_id is required when agent is "human"');
  end if;
  if p_item ->> 'direction' not in ('inbound', 'outbound') then
    return jsonb_build_object('field', 'direction', 'message', 'direction must be one of: inbound, outbound');
  end if;
  if p_item ->> 'sentiment' <> all (cortex.sentiments()) then
    return jsonb_build_object('field', 'sentiment',
      'message', 'sentiment must be one of: ' || array_to_string(cortex.sentiments(), ', '));
  end if;
  if p_item ->> 'intent' <> all (cortex.intents()) then
    return jsonb_build_object('field', 'intent',
      'message', 'intent must be one of: ' || array_to_string(cortex.intents(), ', '));
  end if;
  if p_item ? 'summary' and p_item ->> 'summary' is not null and btrim(p_item ->> 'summary') = '' then
    return jsonb_build_object('field', 'summary', 'message', 'summary must not be blank');
  end if;
  for v_n in 1 .. cardinality(v_lengths) loop
    if length(p_item ->> v_lengths[v_n]) > v_max[v_n] then
      return jsonb_build_object('field', v_lengths[v_n],
        'message', format('%s must be at most %s characters', v_lengths[v_n], v_max[v_n]));
    end if;
  end loop;
  return null;
end $$;
comment on function cortex.import_item_error(jsonb, timestamptz, text, timestamptz) is
  'The first problem of one import item as {field, message} (unknown or mistyped fields, enums, lengths, required contact, type, external_id and occurred_at, agent rules), or null.';

grant execute on function cortex.import_timestamp(text), cortex.import_item_error(jsonb, timestamptz, text, timestamptz)
  to authenticated, service_role;

-- Definer (API roles cannot insert jobs): one summarise_interaction job per pending interaction of
-- the caller's own tenant, set-based. Same rules as the public functions: a writing agent's
-- claims are required, and only pending interactions of that tenant are queued.
create or replace function cortex.enqueue_import_summaries(p_interaction_ids uuid[], p_requested_by text)
returns int
language plpgsql volatile security definer set search_path = '' as $$
declare
  v_tenant uuid := cortex.require_tenant();
  v_n int;
begin
  perform cortex.require_writer();
  insert into cortex.jobs (tenant_id, kind, payload, dedup_key)
  select i.tenant_id, 'summarise_interaction',
         jsonb_build_object('interaction_id', i.id, 'agent', i.agent, 'requested_by', p_requested_by,
                            'source', 'import'),
         i.id::text
  -- By primary key, one probe per id: the partial index of pending rows (which the planner may
  -- prefer) holds every row still waiting for its summary, all of an import's so far.
  from unnest(p_interaction_ids) u (id)
  join cortex.interactions i on i.tenant_id = v_tenant and i.id = u.id
  where i.analysis_status = 'pending'
  order by i.occurred_at desc
  on conflict (tenant_id, kind, dedup_key) where dedup_key is not null and status in ('queued', 'running')
  do nothing;
  get diagnostics v_n = row_count;
  if v_n > 0 then
    perform pg_notify('cortex_jobs', 'summarise_interaction');
  end if;
  return v_n;
end $$;
comment on function cortex.enqueue_import_summaries(uuid[], text) is
  'Queues one summarise_interaction job per pending interaction (of the calling writer''s tenant) among the ids; returns how many were queued.';
revoke execute on function cortex.enqueue_import_summaries(uuid[], text) from public, anon;
grant execute on function cortex.enqueue_import_summaries(uuid[], text) to authenticated;

-- Deferred rendering -----------------------------------------------------------------------------
-- A write renders its contacts' get_context levels 0-2 at commit (…000700_context.sql). An import
-- touches hundreds of contacts per call and that rendering cost more than storing the rows, so
-- an import defers it: the contacts' rendered rows are deleted in the import's transaction (a
-- contact without one is "not rendered yet": get_context assembles it, fresh, with the usual
-- staleness) and a render_contexts job renders them afterwards. The render triggers stay as they
-- are; only the import's own keys are taken out of cortex.context_dirty.

-- Definer: API roles cannot write context_levels nor queue jobs.
create or replace function cortex.defer_context_render(p_contact_ids uuid[], p_reason text) returns bigint
language plpgsql volatile security definer set search_path = '' as $$
declare
  v_tenant uuid := cortex.require_tenant();
  v_ids uuid[];
  v_dirty text := current_setting('cortex.context_dirty', true);
begin
  perform cortex.require_writer();
  -- Lock order (docs/architecture.md): the contact rows first, by id (the import holds them
  -- already), then their rendered rows, in key order.
  select array_agg(c.id order by c.id) into v_ids from (
    select c.id from cortex.contacts c
    where c.tenant_id = v_tenant and c.id = any (p_contact_ids)
    order by c.id for no key update) c;
  if v_ids is null then
    return null;
  end if;
  -- Not rendered at this transaction's commit: its other dirty contacts still are.
  if v_dirty <> '' then
    perform set_config('cortex.context_dirty', coalesce((
      select string_agg(s.k, ' ' order by s.k) from (
        select unnest(string_to_array(v_dirty, ' ')) except select v_tenant::text || ':' || unnest(v_ids)) s (k)),
      ''), true);
  end if;
  perform from cortex.context_levels l
  where l.tenant_id = v_tenant and l.contact_id = any (v_ids) order by l.contact_id for update;
  delete from cortex.context_levels l where l.tenant_id = v_tenant and l.contact_id = any (v_ids);
  return cortex.enqueue_job(v_tenant, 'render_contexts',
    jsonb_build_object('contact_ids', to_jsonb(v_ids), 'reason', left(p_reason, 100)), null, now(), 5, 10);
end $$;
comment on function cortex.defer_context_render(uuid[], text) is
  'Moves the rendering of the given contacts'' get_context levels 0-2 (of the calling writer''s tenant) from this transaction''s commit to the worker: deletes their cortex.context_levels rows (reads assemble until re-rendered) and queues one render_contexts job; returns its id (null when no contact matched). Locks the contacts, then their rendered rows (the lock order).';
revoke execute on function cortex.defer_context_render(uuid[], text) from public, anon;
grant execute on function cortex.defer_context_render(uuid[], text) to authenticated;

-- The worker's side (render_contexts jobs): renders each contact that has no rendered row.
create or replace function cortex.render_pending_contexts(p_tenant_id uuid, p_contact_ids uuid[]) returns int
language plpgsql volatile set search_path = '' as $$
declare
  v_id uuid;
  v_rendered int := 0;
begin
  foreach v_id in array coalesce((select array_agg(distinct u order by u) from unnest(p_contact_ids) u), '{}') loop
    -- Lock order: the contact row, then its rendered row. Holding the contact, no other write of
    -- it can commit (and render) in between, and what is read next is the latest committed state.
    perform from cortex.contacts c where c.tenant_id = p_tenant_id and c.id = v_id for no key update;
    -- Gone contacts have lost their rendered row with them; a row that exists was rendered by a
    -- later write's commit or an earlier job, and is current.
    continue when not found or exists (
      select from cortex.context_levels l where l.tenant_id = p_tenant_id and l.contact_id = v_id);
    perform cortex.render_context_levels(p_tenant_id, v_id);
    v_rendered := v_rendered + 1;
  end loop;
  return v_rendered;
end $$;
comment on function cortex.render_pending_contexts(uuid, uuid[]) is
  'Worker (render_contexts jobs): renders get_context levels 0-2 of each given contact of the tenant that has no cortex.context_levels row (deferred by cortex.defer_context_render), in id order, each after locking its contact; returns how many were rendered. Idempotent.';
revoke execute on function cortex.render_pending_contexts(uuid, uuid[]) from public, anon, authenticated, service_role;

create or replace function public.import_interactions(items jsonb) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_caller text := cortex.require_writer();
  v_now timestamptz := clock_timestamp();
  v_total int;
  v_rows jsonb;
  v_errors jsonb;
  v_valid int;
  v_inserted int;
  v_pending uuid[];
  v_refresh uuid[];
  v_touched uuid[];
  v_contact uuid;
  v_queued int := 0;
begin
  if items is null or jsonb_typeof(items) <> 'array' then
    raise exception 'items must be a JSON array of interactions' using errcode = '22023', column = 'items';
  end if;
  v_total := jsonb_array_length(items);
  if v_total > 5000 then
    raise exception 'at most 5,000 interactions per import call (got %)', v_total
      using errcode = '22023', column = 'items', hint = 'split the file into batches';
  end if;

  -- 1. Check every item and find its contact (by id, or by normalised email); one pass.
  -- Both CTEs are MATERIALIZED: inlined, the planner copies the function calls into every place
  -- that reads `at` and `err` (import_item_error ran five times per item, import_timestamp six).
  with parsed as materialized (
    select (e.n - 1)::int as idx, e.x as item,
           case when jsonb_typeof(e.x -> 'occurred_at') = 'string'
                then cortex.import_timestamp(e.x ->> 'occurred_at') end as at
    from jsonb_array_elements(items) with ordinality as e(x, n)
  ), checked as materialized (
    select p.idx, p.item, p.at, cortex.import_item_error(p.item, p.at, v_caller, v_now) as err from parsed p
  ), resolved as (
    select ch.idx, ch.item, ch.at, ch.err, coalesce(ci.id, ce.id) as contact_id, ci.email as id_email,
           nullif(btrim(ch.item ->> 'contact_id'), '') is not null as by_id
    from checked ch
    left join cortex.contacts ci on ci.tenant_id = v_tenant
      and ci.id = case when ch.err is null then (nullif(btrim(ch.item ->> 'contact_id'), ''))::uuid end
    left join cortex.contacts ce on ce.tenant_id = v_tenant
      and ce.email = case when ch.err is null and nullif(btrim(ch.item ->> 'contact_id'), '') is null
                          then lower(btrim(ch.item ->> 'contact_email')) end
  ), judged as (
    select r.idx, r.item, r.at, r.contact_id, coalesce(r.err,
      case when r.contact_id is null then jsonb_build_object(
             'field', case when r.by_id then 'contact_id' else 'contact_email' end,
             'message', 'unknown contact; create it first with POST /api/v1/contacts (upsert_contact)')
           when nullif(btrim(r.item ->> 'contact_email'), '') is not null and r.by_id
                and r.id_email <> lower(btrim(r.item ->> 'contact_email')) then jsonb_build_object(
             'field', 'contact_email', 'message', 'contact_email is not the email of contact_id') end) as err
    from resolved r
  )
  select coalesce(jsonb_agg(j.item || jsonb_build_object('idx', j.idx, 'contact_id', j.contact_id,
                              'occurred_at', j.at)
                            order by j.idx) filter (where j.err is null), '[]'),
         coalesce(jsonb_agg(jsonb_build_object('index', j.idx) || j.err order by j.idx)
                  filter (where j.err is not null), '[]')
  into v_rows, v_errors
  from judged j;
  v_valid := jsonb_array_length(v_rows);

  -- 2. Lock the contacts in one order (by id), as every writer of contact counters does first
  --    (FOR NO KEY UPDATE, the lock order of docs/architecture.md: foreign-key checks of other
  --    writers' inserts take KEY SHARE on these rows and must not queue behind an import).
  perform from cortex.contacts c
  where c.tenant_id = v_tenant
    and c.id in (select (r ->> 'contact_id')::uuid from jsonb_array_elements(v_rows) r)
  order by c.id
  for no key update;

  -- 3. Insert what is new (a repeated (contact, type, external_id) is a duplicate) and move the
  --    contacts' counters and touch times by occurred_at, in one statement.
  with src as (
    select s.* from jsonb_to_recordset(v_rows) as s(
      idx int, contact_id uuid, type text, occurred_at timestamptz, external_id text, agent text, human_id text,
      direction text, subject text, raw_content text, summary text, key_points jsonb, sentiment text, intent text,
      campaign_id text, thread_id text, metadata jsonb)
  ), ins as (
    insert into cortex.interactions as i (tenant_id, contact_id, agent, human_id, type, direction, subject,
      raw_content, external_id, campaign_id, thread_id, metadata, occurred_at,
      summary, key_points, sentiment, intent, analysis_status, analysed_at)
    select v_tenant, s.contact_id, coalesce(s.agent, v_caller), s.human_id, s.type, s.direction, s.subject,
           s.raw_content, btrim(s.external_id), s.campaign_id, s.thread_id,
           case when jsonb_typeof(s.metadata) = 'object' then s.metadata else '{}' end, s.occurred_at,
           -- A caller's own summary is its analysis (as with log_interaction); else the worker's job.
           left(s.summary, 2000),
           case when s.summary is not null then coalesce((select array_agg(left(k, 500))
             from jsonb_array_elements_text(case jsonb_typeof(s.key_points) when 'array' then s.key_points end) k), '{}') end,
           case when s.summary is not null then coalesce(s.sentiment, 'neutral') end,
           case when s.summary is not null then coalesce(s.intent, 'other') end,
           case when s.summary is not null then 'done' else 'pending' end,
           case when s.summary is not null then v_now end
    from src s
    order by s.occurred_at, s.idx
    on conflict (tenant_id, contact_id, type, external_id) where external_id is not null do nothing
    returning i.id, i.contact_id, i.agent, i.occurred_at, i.created_at, i.analysis_status, i.type, i.sentiment,
              i.intent
  ), touched as (
    update cortex.contacts c set
      interaction_count = c.interaction_count + a.n,
      first_touch_at = least(coalesce(c.first_touch_at, a.first_at), a.first_at),
      last_touch_at = greatest(coalesce(c.last_touch_at, a.last_at), a.last_at),
      last_touch_agent = case when c.last_touch_at > a.last_at then c.last_touch_agent else a.last_agent end
    from (select ins.contact_id, count(*)::int as n, min(ins.occurred_at) as first_at,
                 max(ins.occurred_at) as last_at,
                 (array_agg(ins.agent order by ins.occurred_at desc, ins.created_at desc))[1] as last_agent
          from ins group by ins.contact_id) a
    where c.tenant_id = v_tenant and c.id = a.contact_id
    returning c.id
  )
  select count(*)::int,
         array_agg(ins.id) filter (where ins.analysis_status = 'pending'),
         array_agg(distinct ins.contact_id) filter (where ins.analysis_status = 'done'
           and ins.occurred_at > v_now - interval '24 hours'
           and cortex.is_significant(ins.type, ins.sentiment, ins.intent)),
         (select array_agg(t.id) from touched t)
  into v_inserted, v_pending, v_refresh, v_touched
  from ins;

  -- 4. Summaries follow in the background, one job per row, attributed to the row's agent.
  if v_pending is not null then
    v_queued := cortex.enqueue_import_summaries(v_pending, v_caller);
  end if;
  -- Recent significant rows that came with their analysis refresh context at once, as a log does.
  foreach v_contact in array coalesce(v_refresh, '{}') loop
    perform cortex.request_context_refresh(v_tenant, v_contact, 'interaction');
  end loop;
  -- 5. The touched contacts' rendered levels are dropped and rendered by the worker, not at
  --    commit (about 1 ms a contact, more than the rows themselves); reads assemble until then.
  if v_touched is not null then
    perform cortex.defer_context_render(v_touched, 'import');
  end if;

  return jsonb_build_object('received', v_total, 'inserted', v_inserted, 'duplicates', v_valid - v_inserted,
                            'failed', v_total - v_valid, 'summaries_queued', v_queued, 'errors', v_errors);
end $$;
comment on function public.import_interactions(jsonb) is
  'Backfill: stores an array of interactions (each with external_id and occurred_at; contact by contact_id or contact_email) in one call. Idempotent by (contact, type, external_id). A bad item is reported in errors as {index, field, message} and writes nothing; the others are stored with analysis pending and one summarise job each. The touched contacts'' rendered context levels are rendered by a render_contexts job afterwards (cortex.defer_context_render; reads assemble until then). Returns {received, inserted, duplicates, failed, summaries_queued, errors}.';
grant execute on function public.import_interactions(jsonb) to authenticated;
