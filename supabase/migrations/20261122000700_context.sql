-- Working context: a pre-generated briefing per contact, and get_context, which assembles it
-- at levels 0-3 under a hard token budget (estimate: ceil(chars / 4) of the content's JSON).

create table cortex.contact_context (
  tenant_id uuid not null,
  contact_id uuid not null,
  summary text not null,
  key_facts text[] not null default '{}',
  current_status text,
  recommended_tone text,
  open_threads jsonb not null default '[]' check (jsonb_typeof(open_threads) = 'array'),
  churn_risk_score double precision check (churn_risk_score between 0 and 1),
  upsell_potential_score double precision check (upsell_potential_score between 0 and 1),
  risk_factors text[] not null default '{}',
  opportunity_factors text[] not null default '{}',
  last_handoff_id uuid,
  last_handoff_summary text,
  last_handoff jsonb,
  interaction_count_at_generation int not null default 0,
  generated_at timestamptz not null default now(),
  expires_at timestamptz,
  -- Set when something made this context out of date (a handoff, a failed refresh, a sweep).
  stale_since timestamptz,
  token_count int,
  model text,
  failure_count int not null default 0,
  last_error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant_id, contact_id),
  foreign key (tenant_id, contact_id) references cortex.contacts (tenant_id, id) on delete cascade
);
comment on table cortex.contact_context is 'Generated working memory per contact; stale when the interaction count changed, after 24 h, past expires_at, or when marked.';
create index contact_context_generated on cortex.contact_context (tenant_id, generated_at);
create trigger contact_context_updated_at before update on cortex.contact_context
  for each row execute function cortex.touch_updated_at();

alter table cortex.contact_context enable row level security;
create policy "Context is visible to agents of their tenant" on cortex.contact_context
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
grant select on cortex.contact_context to authenticated;

-- Text helpers -------------------------------------------------------------------------------

create or replace function cortex.fit_words(p_text text, p_max_chars int) returns text
language plpgsql immutable set search_path = '' as $$
declare v_cut text;
begin
  if p_text is null or length(p_text) <= p_max_chars then
    return p_text;
  end if;
  if p_max_chars < 2 then
    return null;
  end if;
  -- Cut at the last whitespace that leaves room for the ellipsis; never inside a word.
  v_cut := left(p_text, p_max_chars - 1);
  if substr(p_text, p_max_chars, 1) !~ '\s' then
    v_cut := regexp_replace(v_cut, '\S+$', '');
  end if;
  v_cut := rtrim(v_cut, E' \t\n\r\f\v');
  if v_cut = '' then
    return null;
  end if;
  return v_cut || '…';
end $$;
comment on function cortex.fit_words(text, int) is 'p_text shortened to at most p_max_chars at a word boundary (with …), or null when not even one word fits.';

create or replace function cortex.iso(p_ts timestamptz) returns text
language sql immutable set search_path = '' as $$
  select to_char(p_ts at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;
comment on function cortex.iso(timestamptz) is 'Compact ISO-8601 UTC timestamp (2025-01-28T14:30:00Z).';

create or replace function cortex.estimate_tokens(p_content jsonb) returns int
language sql immutable set search_path = '' as $$
  select ceil(length(p_content::text) / 4.0)::int
$$;
comment on function cortex.estimate_tokens(jsonb) is 'Token estimate used for every budget: ceil(chars / 4) of the JSON text.';

grant execute on function cortex.fit_words(text, int), cortex.iso(timestamptz), cortex.estimate_tokens(jsonb)
  to authenticated, service_role;

-- Staleness and refresh ----------------------------------------------------------------------

create or replace function cortex.context_is_stale(x cortex.contact_context, p_interaction_count int)
returns boolean
language sql stable set search_path = '' as $$
  select x.contact_id is null
      or x.stale_since is not null
      or x.interaction_count_at_generation is distinct from p_interaction_count
      or x.generated_at < now() - interval '24 hours'
      or (x.expires_at is not null and x.expires_at <= now())
$$;
comment on function cortex.context_is_stale(cortex.contact_context, int) is
  'True when there is no context, it was marked stale, the interaction count changed since generation, it is older than 24 h, or past expires_at.';

grant execute on function cortex.context_is_stale(cortex.contact_context, int) to authenticated;

-- Definer: marks context stale and queues its regeneration. A writing agent may force it (the
-- rule of public.refresh_context); any agent of the tenant, read-only ones too, may only ask for
-- the regeneration of a context that is already stale (what get_context does on a stale read).
create or replace function cortex.request_context_refresh(
  p_tenant_id uuid, p_contact_id uuid, p_reason text, p_run_at timestamptz default now()
) returns bigint
language plpgsql volatile security definer set search_path = '' as $$
declare
  v_count int;
  x cortex.contact_context;
begin
  if cortex.guard_tenant(p_tenant_id) then
    select c.interaction_count into v_count from cortex.contacts c where c.tenant_id = p_tenant_id and c.id = p_contact_id;
    if not found then
      perform cortex.contact_not_found(p_contact_id);
    end if;
    if not cortex.agent_can_write() then
      select * into x from cortex.contact_context cx where cx.tenant_id = p_tenant_id and cx.contact_id = p_contact_id;
      if not cortex.context_is_stale(x, v_count) then
        perform cortex.require_writer();  -- 42501 for a read-only agent, 28000 without an agent
      end if;
    end if;
  end if;
  -- Lock order (docs/architecture.md): the contact row first, then its context row, then the job.
  perform from cortex.contacts where tenant_id = p_tenant_id and id = p_contact_id for no key update;
  update cortex.contact_context set stale_since = now()
  where tenant_id = p_tenant_id and contact_id = p_contact_id and stale_since is null;
  -- Three tries, five minutes apart at first (seed 000: retry in 5 minutes, alert after 3 failures).
  return cortex.enqueue_job(p_tenant_id, 'generate_context',
    jsonb_build_object('contact_id', p_contact_id, 'reason', p_reason), p_contact_id::text, p_run_at, 3, 300);
end $$;
comment on function cortex.request_context_refresh(uuid, uuid, text, timestamptz) is
  'Marks a contact''s context stale and queues one generate_context job for it (deduplicated; 3 attempts, 5 min apart). '
  'An API caller must belong to p_tenant_id (cortex.guard_tenant) and name a contact of it (P0002); a read-only agent may only '
  'queue the regeneration of a context that is already stale (else SQLSTATE 42501).';
revoke execute on function cortex.request_context_refresh(uuid, uuid, text, timestamptz) from public, anon;
grant execute on function cortex.request_context_refresh(uuid, uuid, text, timestamptz) to authenticated;

-- What a context generator (local or Claude) needs: the contact, recent interactions, the old context.
create or replace function cortex.context_material(p_tenant_id uuid, p_contact_id uuid, p_limit int default 20)
returns jsonb
language plpgsql stable set search_path = '' as $$
declare
  c cortex.contacts;
  x cortex.contact_context;
begin
  select * into c from cortex.contacts where tenant_id = p_tenant_id and id = p_contact_id;
  if not found then
    perform cortex.contact_not_found(p_contact_id);
  end if;
  select * into x from cortex.contact_context where tenant_id = p_tenant_id and contact_id = p_contact_id;
  return jsonb_build_object(
    'contact', jsonb_build_object('id', c.id, 'name', c.name, 'email', c.email, 'company_name', c.company_name,
      'stage', c.stage, 'source', c.source, 'first_touch_at', c.first_touch_at, 'last_touch_at', c.last_touch_at,
      'tags', to_jsonb(c.tags), 'owner_agent', c.owner_agent, 'owner_human_id', c.owner_human_id),
    'interaction_count', c.interaction_count,
    'recent_interactions', coalesce((
      select jsonb_agg(jsonb_build_object('id', i.id, 'date', cortex.iso(i.occurred_at), 'agent', i.agent,
               'type', i.type, 'direction', i.direction, 'subject', left(i.subject, 200),
               'summary', coalesce(i.summary, left(i.raw_content, 300)), 'sentiment', i.sentiment,
               'intent', i.intent, 'key_points', to_jsonb(i.key_points), 'thread_id', i.thread_id)
             order by i.occurred_at desc, i.id)
      from (select * from cortex.interactions i where i.tenant_id = p_tenant_id and i.contact_id = p_contact_id
            order by i.occurred_at desc, i.id limit p_limit) i), '[]'),
    'existing_context', case when x.contact_id is null then null
      else jsonb_build_object('summary', x.summary, 'key_facts', to_jsonb(x.key_facts),
                              'generated_at', cortex.iso(x.generated_at)) end,
    'last_handoff', x.last_handoff);
end $$;
comment on function cortex.context_material(uuid, uuid, int) is
  'Input for context generation: the contact, its newest interactions, the existing context and the interaction count it reflects.';
grant execute on function cortex.context_material(uuid, uuid, int) to authenticated;

create or replace function cortex.store_context(
  p_tenant_id uuid, p_contact_id uuid, p_context jsonb, p_usage jsonb, p_interaction_count int
) returns jsonb
language plpgsql volatile security definer set search_path = '' as $$
declare
  v_prev timestamptz;
  v_row cortex.contact_context;
  v_agent text := coalesce(cortex.current_agent(), 'system');
  v_sig jsonb := coalesce(p_context -> 'signals', '{}');
begin
  -- The rules of public.refresh_context: a writing agent of the tenant (its usage, below, is
  -- held to the caller by record_token_usage).
  perform cortex.guard_writer(p_tenant_id);
  if p_context is null or jsonb_typeof(p_context) <> 'object' or nullif(btrim(p_context ->> 'summary'), '') is null then
    raise exception 'context must be an object with a summary' using errcode = '22023', column = 'context';
  end if;
  -- Lock order (docs/architecture.md): the contact row first, then its context row.
  perform from cortex.contacts where tenant_id = p_tenant_id and id = p_contact_id for no key update;
  if not found then
    perform cortex.contact_not_found(p_contact_id);
  end if;
  select generated_at into v_prev from cortex.contact_context where tenant_id = p_tenant_id and contact_id = p_contact_id;

  insert into cortex.contact_context as x (
    tenant_id, contact_id, summary, key_facts, current_status, recommended_tone, open_threads,
    churn_risk_score, upsell_potential_score, risk_factors, opportunity_factors,
    interaction_count_at_generation, generated_at, expires_at, stale_since, token_count, model,
    failure_count, last_error)
  values (
    p_tenant_id, p_contact_id, left(p_context ->> 'summary', 4000),
    coalesce((select array_agg(left(k, 500)) from jsonb_array_elements_text(coalesce(p_context -> 'key_facts', '[]')) k), '{}'),
    left(p_context ->> 'current_status', 500), left(p_context ->> 'recommended_tone', 500),
    coalesce(case when jsonb_typeof(p_context -> 'open_threads') = 'array' then p_context -> 'open_threads' end,
             case when jsonb_typeof(v_sig -> 'open_threads') = 'array' then v_sig -> 'open_threads' end, '[]'),
    least(greatest((v_sig ->> 'churn_risk')::float8, 0), 1),
    least(greatest((v_sig ->> 'upsell_potential')::float8, 0), 1),
    coalesce((select array_agg(k) from jsonb_array_elements_text(coalesce(v_sig -> 'risk_factors', '[]')) k), '{}'),
    coalesce((select array_agg(k) from jsonb_array_elements_text(coalesce(v_sig -> 'opportunity_factors', '[]')) k), '{}'),
    coalesce(p_interaction_count, 0), now(), (p_context ->> 'expires_at')::timestamptz, null,
    cortex.estimate_tokens(p_context), p_usage ->> 'model', 0, null)
  on conflict (tenant_id, contact_id) do update set
    summary = excluded.summary, key_facts = excluded.key_facts, current_status = excluded.current_status,
    recommended_tone = excluded.recommended_tone, open_threads = excluded.open_threads,
    churn_risk_score = excluded.churn_risk_score, upsell_potential_score = excluded.upsell_potential_score,
    risk_factors = excluded.risk_factors, opportunity_factors = excluded.opportunity_factors,
    interaction_count_at_generation = excluded.interaction_count_at_generation,
    generated_at = excluded.generated_at, expires_at = excluded.expires_at, stale_since = null,
    token_count = excluded.token_count, model = excluded.model, failure_count = 0, last_error = null
  returning x.* into v_row;

  if p_usage is not null then
    perform cortex.record_token_usage(p_tenant_id, coalesce(p_usage ->> 'agent', v_agent), p_usage ->> 'model',
      coalesce(p_usage ->> 'operation', 'generate_context'), (p_usage ->> 'input_tokens')::int,
      (p_usage ->> 'output_tokens')::int, p_contact_id, null);
  end if;
  return jsonb_build_object('contact_id', p_contact_id, 'regenerated', true,
    'previous_generated_at', cortex.iso(v_prev), 'new_generated_at', cortex.iso(v_row.generated_at),
    'token_count', v_row.token_count);
end $$;
comment on function cortex.store_context(uuid, uuid, jsonb, jsonb, int) is
  'Stores a freshly generated context (clearing staleness and failures) and records its model call; returns the refresh response. '
  'An API caller must be a writing agent of p_tenant_id (cortex.guard_writer) and records usage for itself unless admin. '
  'Locks the contact row before the context row (the lock order in docs/architecture.md).';
revoke execute on function cortex.store_context(uuid, uuid, jsonb, jsonb, int) from public, anon;
grant execute on function cortex.store_context(uuid, uuid, jsonb, jsonb, int) to authenticated;

create or replace function cortex.record_context_failure(p_tenant_id uuid, p_contact_id uuid, p_error text)
returns void
language plpgsql volatile security definer set search_path = '' as $$
begin
  perform cortex.guard_writer(p_tenant_id);
  -- Lock order (docs/architecture.md): the contact row first, then its context row.
  perform from cortex.contacts where tenant_id = p_tenant_id and id = p_contact_id for no key update;
  update cortex.contact_context
  set failure_count = failure_count + 1, last_error = left(p_error, 2000), stale_since = coalesce(stale_since, now())
  where tenant_id = p_tenant_id and contact_id = p_contact_id;
end $$;
comment on function cortex.record_context_failure(uuid, uuid, text) is
  'Counts a failed context generation; the cached context stays and is served as stale. An API caller must be a writing agent of p_tenant_id (cortex.guard_writer).';
revoke execute on function cortex.record_context_failure(uuid, uuid, text) from public, anon;
grant execute on function cortex.record_context_failure(uuid, uuid, text) to authenticated;

-- get_context --------------------------------------------------------------------------------

create or replace function cortex.context_budget(p_tenant_id uuid, p_agent text, p_level int) returns int
language sql stable set search_path = '' as $$
  select case p_level
    when 0 then 60 when 1 then 350 when 2 then 900
    else coalesce((select ac.max_input_tokens from cortex.agent_config ac
                   where ac.tenant_id = p_tenant_id and ac.agent = p_agent), 2000)
  end
$$;
comment on function cortex.context_budget(uuid, text, int) is 'Token budget of a context level: 60, 350, 900, or the agent''s max_input_tokens for level 3.';
grant execute on function cortex.context_budget(uuid, text, int) to authenticated;

-- The assembly itself: what get_context returns for one level, without the envelope. Used by
-- the pre-rendering below (levels 0-2, at write time) and by get_context for level 3.
create or replace function cortex.context_content(
  c cortex.contacts, x cortex.contact_context, p_level int, p_budget int
) returns jsonb
language plpgsql stable set search_path = '' as $$
declare
  v_level int := p_level;
  v_budget int := p_budget;
  v_max int;
  v_header jsonb;
  v_ctx jsonb;
  v_signals jsonb;
  v_handoff jsonb;
  v_items jsonb[] := '{}';
  v_item_len int[] := '{}';
  v_content jsonb;
  v_len int;
  v_over int;
  v_drop int;
  v_sum int;
  v_total_items int := 0;
  v_truncated boolean := false;
  v_guard int := 0;
begin
  v_max := v_budget * 4;

  -- Every field is pre-fitted to a sane size; the loop below enforces the budget exactly.
  v_header := jsonb_strip_nulls(jsonb_build_object(
    'name', cortex.fit_words(c.name, 60), 'company', cortex.fit_words(c.company_name, 60),
    'email', case when length(c.email) <= 80 then c.email end, 'stage', c.stage,
    'last_touch', cortex.iso(c.last_touch_at), 'last_touch_agent', c.last_touch_agent));

  if v_level >= 1 then
    if x.contact_id is not null then
      v_signals := jsonb_strip_nulls(jsonb_build_object(
        'churn_risk', round(x.churn_risk_score::numeric, 2), 'upsell_potential', round(x.upsell_potential_score::numeric, 2),
        'risk_factors', (select coalesce(jsonb_agg(cortex.fit_words(f, 120)) filter (where cortex.fit_words(f, 120) is not null), '[]')
                         from unnest(x.risk_factors[1:3]) f),
        'opportunity_factors', (select coalesce(jsonb_agg(cortex.fit_words(f, 120)) filter (where cortex.fit_words(f, 120) is not null), '[]')
                                from unnest(x.opportunity_factors[1:3]) f)));
      v_ctx := jsonb_strip_nulls(jsonb_build_object(
        'summary', cortex.fit_words(x.summary, case v_level when 1 then 900 else 1200 end),
        'key_facts', (select coalesce(jsonb_agg(cortex.fit_words(f, 200) order by n)
                                        filter (where cortex.fit_words(f, 200) is not null), '[]')
                      from unnest(x.key_facts[1:6]) with ordinality as k(f, n)),
        'current_status', cortex.fit_words(x.current_status, 200),
        'recommended_tone', cortex.fit_words(x.recommended_tone, 200),
        'open_threads', (select coalesce(jsonb_agg(t), '[]') from (
                           select t from jsonb_array_elements(x.open_threads) t limit 3) s),
        'signals', v_signals));
      v_handoff := x.last_handoff;
    else
      -- Never generated yet: a plain-facts stand-in built from the log, served as stale.
      v_ctx := jsonb_build_object(
        'summary', cortex.fit_words(concat_ws(' ',
          coalesce(c.name, c.email) || coalesce(' at ' || c.company_name, '') || ' (' || c.stage || ').',
          c.interaction_count || ' interaction(s) logged.',
          (select 'Latest: ' || i.summary from cortex.interactions i
           where i.tenant_id = c.tenant_id and i.contact_id = c.id and i.summary is not null
           order by i.occurred_at desc limit 1)), 900),
        'key_facts', '[]'::jsonb,
        'current_status', 'Working context is being generated');
    end if;
  end if;

  if v_level >= 2 then
    select coalesce(array_agg(it order by rn), '{}'), coalesce(array_agg(length(it::text) + 2 order by rn), '{}')
    into v_items, v_item_len
    from (
      select jsonb_strip_nulls(jsonb_build_object('id', i.id, 'agent', i.agent, 'type', i.type,
               'summary', cortex.fit_words(coalesce(i.summary, i.subject), 300), 'sentiment', i.sentiment,
               'date', cortex.iso(i.occurred_at))) as it,
             row_number() over (order by i.occurred_at desc, i.id) as rn
      from cortex.interactions i
      where i.tenant_id = c.tenant_id and i.contact_id = c.id
      order by i.occurred_at desc, i.id
      limit case when v_level = 2 then 10 else 500 end
    ) s;
    v_total_items := c.interaction_count;
  end if;

  loop
    v_guard := v_guard + 1;
    v_content := jsonb_build_object('header', v_header);
    if v_level >= 1 then
      v_content := v_content || jsonb_build_object('context', v_ctx, 'last_handoff', v_handoff);
    end if;
    if v_level >= 2 then
      v_content := v_content || jsonb_build_object('recent_interactions', to_jsonb(v_items));
    end if;
    v_len := length(v_content::text);
    exit when v_len <= v_max or v_guard > 200;
    v_truncated := true;
    v_over := v_len - v_max;
    -- Drop the least important thing still there, oldest interactions first.
    if cardinality(v_items) > 0 then
      v_drop := 0; v_sum := 0;
      while v_drop < cardinality(v_items) and v_sum < v_over loop
        v_sum := v_sum + v_item_len[cardinality(v_items) - v_drop];
        v_drop := v_drop + 1;
      end loop;
      v_items := v_items[1:cardinality(v_items) - greatest(v_drop, 1)];
      v_item_len := v_item_len[1:cardinality(v_item_len) - greatest(v_drop, 1)];
    elsif v_level >= 1 and jsonb_array_length(coalesce(v_ctx -> 'open_threads', '[]')) > 0 then
      v_ctx := v_ctx || jsonb_build_object('open_threads', (v_ctx -> 'open_threads') - (-1));
    elsif v_level >= 1 and v_handoff is not null then
      v_handoff := null;
    elsif v_level >= 1 and v_ctx ? 'signals' then
      v_ctx := v_ctx - 'signals';
    elsif v_level >= 1 and jsonb_array_length(coalesce(v_ctx -> 'key_facts', '[]')) > 2 then
      v_ctx := v_ctx || jsonb_build_object('key_facts', (v_ctx -> 'key_facts') - (-1));
    elsif v_level >= 1 and v_ctx ? 'recommended_tone' then
      v_ctx := v_ctx - 'recommended_tone';
    elsif v_level >= 1 and jsonb_array_length(coalesce(v_ctx -> 'key_facts', '[]')) > 0 then
      v_ctx := v_ctx || jsonb_build_object('key_facts', (v_ctx -> 'key_facts') - (-1));
    elsif v_level >= 1 and v_ctx ? 'current_status' then
      v_ctx := v_ctx - 'current_status';
    elsif v_level >= 1 and length(v_ctx ->> 'summary') > 40 then
      v_ctx := jsonb_strip_nulls(v_ctx || jsonb_build_object('summary',
        cortex.fit_words(v_ctx ->> 'summary', greatest(length(v_ctx ->> 'summary') - v_over - 8, length(v_ctx ->> 'summary') / 2))));
    elsif v_level >= 1 and v_ctx ? 'summary' then
      v_ctx := v_ctx - 'summary';
    elsif v_header ? 'last_touch_agent' then v_header := v_header - 'last_touch_agent';
    elsif v_header ? 'last_touch' then v_header := v_header - 'last_touch';
    elsif v_header ? 'company' then v_header := v_header - 'company';
    elsif v_header ? 'email' then v_header := v_header - 'email';
    elsif v_header ? 'stage' then v_header := v_header - 'stage';
    elsif v_header ? 'name' and length(v_header ->> 'name') > 8 then
      v_header := jsonb_strip_nulls(v_header || jsonb_build_object('name',
        cortex.fit_words(v_header ->> 'name', length(v_header ->> 'name') / 2)));
    elsif v_header ? 'name' then v_header := v_header - 'name';
    else
      exit;
    end if;
  end loop;

  return v_content || jsonb_build_object(
    'token_count', ceil(v_len / 4.0)::int, 'truncated', v_truncated,
    'interactions_total', case when v_level >= 2 then v_total_items end);
end $$;
comment on function cortex.context_content(cortex.contacts, cortex.contact_context, int, int) is
  'Assembles a contact''s working context at one level under a token budget (estimate: ceil(chars / 4) of the content''s JSON): header, context, last_handoff and recent_interactions as the level asks, plus token_count, truncated and interactions_total. Least important items are dropped first; no field is cut mid-word.';
grant execute on function cortex.context_content(cortex.contacts, cortex.contact_context, int, int) to authenticated;

-- Precomputed reads ---------------------------------------------------------------------------
-- Levels 0-2 are rendered when what they show changes, so get_context reads one row. Every
-- write to a contact, its interactions or its context names the contact in a transaction-local
-- setting (cortex.context_dirty, statement triggers); at commit a deferred trigger renders each
-- named contact once, in key order. The staleness inputs are copied beside the rendering, so
-- the staleness check needs no other row. A read in the writing transaction itself (the contact
-- is still named) assembles, so it sees its own writes.

create table cortex.context_levels (
  tenant_id uuid not null,
  contact_id uuid not null,
  level_0 jsonb not null,
  level_1 jsonb not null,
  level_2 jsonb not null,
  -- Copies of the staleness inputs (contacts.interaction_count and contact_context's fields).
  interaction_count int not null,
  has_context boolean not null,
  interaction_count_at_generation int,
  generated_at timestamptz,
  expires_at timestamptz,
  stale_since timestamptz,
  rendered_at timestamptz not null default now(),
  primary key (tenant_id, contact_id),
  foreign key (tenant_id, contact_id) references cortex.contacts (tenant_id, id) on delete cascade
);
comment on table cortex.context_levels is
  'get_context levels 0-2 of each contact, rendered at write time (the whole response but is_stale and refresh_queued), with copies of the staleness inputs; kept current by triggers on contacts, interactions and contact_context.';

alter table cortex.context_levels enable row level security;
create policy "Rendered context is visible to agents of their tenant" on cortex.context_levels
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
grant select on cortex.context_levels to authenticated;

create or replace function cortex.render_context_levels(p_tenant_id uuid, p_contact_id uuid) returns void
language plpgsql volatile set search_path = '' as $$
declare
  c cortex.contacts;
  x cortex.contact_context;
begin
  select * into c from cortex.contacts ct where ct.tenant_id = p_tenant_id and ct.id = p_contact_id;
  if not found then
    delete from cortex.context_levels l where l.tenant_id = p_tenant_id and l.contact_id = p_contact_id;
    return;
  end if;
  select * into x from cortex.contact_context cx where cx.tenant_id = p_tenant_id and cx.contact_id = p_contact_id;
  insert into cortex.context_levels as l (tenant_id, contact_id, level_0, level_1, level_2, interaction_count,
    has_context, interaction_count_at_generation, generated_at, expires_at, stale_since, rendered_at)
  values (p_tenant_id, p_contact_id,
    cortex.context_content(c, x, 0, cortex.context_budget(p_tenant_id, null, 0)) || jsonb_build_object(
      'contact_id', c.id, 'level', 0, 'token_budget', cortex.context_budget(p_tenant_id, null, 0),
      'generated_at', cortex.iso(x.generated_at), 'is_stale', false, 'refresh_queued', false),
    cortex.context_content(c, x, 1, cortex.context_budget(p_tenant_id, null, 1)) || jsonb_build_object(
      'contact_id', c.id, 'level', 1, 'token_budget', cortex.context_budget(p_tenant_id, null, 1),
      'generated_at', cortex.iso(x.generated_at), 'is_stale', false, 'refresh_queued', false),
    cortex.context_content(c, x, 2, cortex.context_budget(p_tenant_id, null, 2)) || jsonb_build_object(
      'contact_id', c.id, 'level', 2, 'token_budget', cortex.context_budget(p_tenant_id, null, 2),
      'generated_at', cortex.iso(x.generated_at), 'is_stale', false, 'refresh_queued', false),
    c.interaction_count, x.contact_id is not null, x.interaction_count_at_generation, x.generated_at,
    x.expires_at, x.stale_since, clock_timestamp())
  on conflict (tenant_id, contact_id) do update set
    level_0 = excluded.level_0, level_1 = excluded.level_1, level_2 = excluded.level_2,
    interaction_count = excluded.interaction_count, has_context = excluded.has_context,
    interaction_count_at_generation = excluded.interaction_count_at_generation,
    generated_at = excluded.generated_at, expires_at = excluded.expires_at, stale_since = excluded.stale_since,
    rendered_at = excluded.rendered_at;
end $$;
comment on function cortex.render_context_levels(uuid, uuid) is
  'Renders get_context levels 0-2 of one contact into cortex.context_levels (with copies of the staleness inputs); removes the row when the contact is gone. Called at commit by cortex.render_dirty_contexts, and for backfills.';
revoke execute on function cortex.render_context_levels(uuid, uuid) from public, anon, authenticated;

-- Statement trigger (AFTER ... REFERENCING ... FOR EACH STATEMENT): adds the contacts whose
-- rendered context the statement may have changed to cortex.context_dirty ('tenant:contact'
-- keys, sorted, space-separated), a transaction-local setting. Takes no lock.
create or replace function cortex.mark_context_dirty() returns trigger
language plpgsql set search_path = '' as $$
declare
  v_keys text[];
begin
  if tg_table_name = 'contacts' and tg_op = 'INSERT' then
    v_keys := array(select n.tenant_id || ':' || n.id from new_rows n);
  elsif tg_table_name = 'contacts' then
    -- Only the fields the rendering shows (owner, tags and custom fields are not in it).
    v_keys := array(
      select n.tenant_id || ':' || n.id from new_rows n
      join old_rows o on o.tenant_id = n.tenant_id and o.id = n.id
      where (n.name, n.company_name, n.email, n.stage, n.last_touch_at, n.last_touch_agent, n.interaction_count)
            is distinct from
            (o.name, o.company_name, o.email, o.stage, o.last_touch_at, o.last_touch_agent, o.interaction_count));
  elsif tg_op = 'DELETE' then
    v_keys := array(select distinct o.tenant_id || ':' || o.contact_id from old_rows o);
  else
    v_keys := array(select distinct n.tenant_id || ':' || n.contact_id from new_rows n);
  end if;
  if cardinality(v_keys) > 0 then
    perform set_config('cortex.context_dirty', (
      select string_agg(k, ' ' order by k)
      from (select unnest(string_to_array(nullif(current_setting('cortex.context_dirty', true), ''), ' '))
            union select unnest(v_keys)) s (k)), true);
  end if;
  return null;
end $$;
comment on function cortex.mark_context_dirty() is
  'Statement trigger on contacts, interactions and contact_context: names the contacts whose rendered context may have changed in the transaction-local setting cortex.context_dirty, for cortex.render_dirty_contexts at commit.';

-- Definer: API roles cannot write context_levels; their writes fire this at commit.
create or replace function cortex.render_dirty_contexts() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  v_dirty text := current_setting('cortex.context_dirty', true);
  v_key text;
begin
  -- The first deferred event of the transaction renders every named contact; the rest find none.
  if v_dirty is null or v_dirty = '' then
    return null;
  end if;
  perform set_config('cortex.context_dirty', '', true);
  -- Keys are sorted, so concurrent renders lock context_levels rows in one order.
  foreach v_key in array string_to_array(v_dirty, ' ') loop
    perform cortex.render_context_levels(split_part(v_key, ':', 1)::uuid, split_part(v_key, ':', 2)::uuid);
  end loop;
  return null;
end $$;
comment on function cortex.render_dirty_contexts() is
  'Deferred constraint trigger (at commit): renders get_context levels 0-2 of every contact named in cortex.context_dirty, once each, in key order, then clears the setting.';
revoke execute on function cortex.render_dirty_contexts() from public, anon, authenticated;

create trigger contacts_context_dirty_insert after insert on cortex.contacts
  referencing new table as new_rows for each statement execute function cortex.mark_context_dirty();
create trigger contacts_context_dirty_update after update on cortex.contacts
  referencing old table as old_rows new table as new_rows for each statement execute function cortex.mark_context_dirty();
create trigger interactions_context_dirty_insert after insert on cortex.interactions
  referencing new table as new_rows for each statement execute function cortex.mark_context_dirty();
create trigger interactions_context_dirty_update after update on cortex.interactions
  referencing new table as new_rows for each statement execute function cortex.mark_context_dirty();
create trigger interactions_context_dirty_delete after delete on cortex.interactions
  referencing old table as old_rows for each statement execute function cortex.mark_context_dirty();
create trigger contact_context_dirty_insert after insert on cortex.contact_context
  referencing new table as new_rows for each statement execute function cortex.mark_context_dirty();
create trigger contact_context_dirty_update after update on cortex.contact_context
  referencing new table as new_rows for each statement execute function cortex.mark_context_dirty();
create trigger contact_context_dirty_delete after delete on cortex.contact_context
  referencing old table as old_rows for each statement execute function cortex.mark_context_dirty();

create constraint trigger contacts_render_context after insert or update on cortex.contacts
  deferrable initially deferred for each row execute function cortex.render_dirty_contexts();
create constraint trigger interactions_render_context after insert or update or delete on cortex.interactions
  deferrable initially deferred for each row execute function cortex.render_dirty_contexts();
create constraint trigger contact_context_render_context after insert or update or delete on cortex.contact_context
  deferrable initially deferred for each row execute function cortex.render_dirty_contexts();

-- Contacts that exist before this migration ran.
select cortex.render_context_levels(c.tenant_id, c.id) from cortex.contacts c;

create or replace function public.get_context(contact_id uuid, level int default 1) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  -- Also a known, enabled agent (the unknown-agent JWT reads nothing). Called once, here: as a
  -- condition of the query below it cost three times as much (its plan was made again each call).
  v_tenant uuid := cortex.require_tenant();
  v_level int := get_context.level;
  v_dirty text := current_setting('cortex.context_dirty', true);
  v_result jsonb;
  c cortex.contacts;
  x cortex.contact_context;
  v_stale boolean;
  v_budget int;
  v_content jsonb;
  v_queued boolean := false;
begin
  -- Levels 0-2: the rendering of the last write (one row), unless this transaction wrote the
  -- contact itself and it is not rendered yet.
  if v_level between 0 and 2 and (v_dirty is null or v_dirty = '' or strpos(v_dirty, get_context.contact_id::text) = 0) then
    -- Rendered as a fresh reply: a fresh read hands it over untouched (no JSON is rebuilt).
    select case v_level when 0 then l.level_0 when 1 then l.level_1 else l.level_2 end,
           -- The same test as cortex.context_is_stale, on the copies.
           not l.has_context or l.stale_since is not null
             or l.interaction_count_at_generation is distinct from l.interaction_count
             or l.generated_at < now() - interval '24 hours'
             or (l.expires_at is not null and l.expires_at <= now())
    into v_result, v_stale
    from cortex.context_levels l
    where l.tenant_id = v_tenant and l.contact_id = get_context.contact_id;
    if v_result is not null then
      if not v_stale then
        return v_result;
      end if;
      if not exists (
          select from cortex.jobs j where j.tenant_id = v_tenant and j.kind = 'generate_context'
            and j.dedup_key = get_context.contact_id::text and j.status in ('queued', 'running')) then
        perform cortex.request_context_refresh(v_tenant, get_context.contact_id, 'stale_read');
        v_queued := true;
      end if;
      return v_result || jsonb_build_object('is_stale', true, 'refresh_queued', v_queued);
    end if;
  end if;

  if v_level is null or v_level not between 0 and 3 then
    raise exception 'level must be 0, 1, 2 or 3' using errcode = '22023', column = 'level';
  end if;

  -- Level 3 (the agent's own budget), or not rendered yet: assemble now.
  select * into c from cortex.contacts ct where ct.tenant_id = v_tenant and ct.id = get_context.contact_id;
  if not found then
    perform cortex.contact_not_found(get_context.contact_id);
  end if;
  select * into x from cortex.contact_context cx where cx.tenant_id = v_tenant and cx.contact_id = c.id;
  v_stale := cortex.context_is_stale(x, c.interaction_count);
  if v_stale and not exists (
      select from cortex.jobs j where j.tenant_id = v_tenant and j.kind = 'generate_context'
        and j.dedup_key = c.id::text and j.status in ('queued', 'running')) then
    perform cortex.request_context_refresh(v_tenant, c.id, 'stale_read');
    v_queued := true;
  end if;
  v_budget := cortex.context_budget(v_tenant, cortex.current_agent(), v_level);
  v_content := cortex.context_content(c, x, v_level, v_budget);
  return v_content || jsonb_build_object(
    'contact_id', c.id, 'level', v_level, 'token_budget', v_budget,
    'generated_at', cortex.iso(x.generated_at), 'is_stale', v_stale, 'refresh_queued', v_queued);
end $$;
comment on function public.get_context(uuid, int) is
  'Working context of a contact at level 0 (header), 1 (+ summary), 2 (+ 10 recent interactions) or 3 (+ history to the agent''s max_input_tokens), never over the level''s token budget: least important items are dropped first and no field is cut mid-word. Levels 0-2 are read as rendered at the last write (cortex.context_levels); level 3 is assembled. Stale context is served with is_stale=true and a refresh is queued.';
grant execute on function public.get_context(uuid, int) to authenticated;

create or replace function public.refresh_context(
  contact_id uuid, context jsonb default null, usage jsonb default null, interaction_count int default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_prev timestamptz;
  v_job bigint;
begin
  perform cortex.require_writer();
  if not exists (select from cortex.contacts c where c.tenant_id = v_tenant and c.id = refresh_context.contact_id) then
    perform cortex.contact_not_found(refresh_context.contact_id);
  end if;
  if refresh_context.context is not null then
    return cortex.store_context(v_tenant, refresh_context.contact_id, refresh_context.context,
      case when usage is null then null else usage || jsonb_build_object('agent', cortex.current_agent()) end,
      refresh_context.interaction_count);
  end if;
  select cx.generated_at into v_prev from cortex.contact_context cx
  where cx.tenant_id = v_tenant and cx.contact_id = refresh_context.contact_id;
  v_job := cortex.request_context_refresh(v_tenant, refresh_context.contact_id, 'requested');
  return jsonb_build_object('contact_id', refresh_context.contact_id, 'regenerated', false, 'queued', true,
    'job_id', v_job, 'previous_generated_at', cortex.iso(v_prev), 'new_generated_at', null, 'token_count', null);
end $$;
comment on function public.refresh_context(uuid, jsonb, jsonb, int) is
  'Forces regeneration of a contact''s context: stores the given generated context at once, or (without one) marks it stale and queues the worker.';
grant execute on function public.refresh_context(uuid, jsonb, jsonb, int) to authenticated;
