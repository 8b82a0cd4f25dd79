-- Contacts: every person or company the agents talk to. One row per (tenant, normalised email).

create or replace function cortex.contact_stages() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['prospect', 'qualified', 'opportunity', 'customer', 'churning', 'lost', 'recovered'];
end $$;
comment on function cortex.contact_stages() is 'The allowed contact stages, the lifecycle (used by the table''s check constraint and every function''s validation).';

create table cortex.contacts (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  id uuid not null default gen_random_uuid(),
  email text not null check (email = lower(btrim(email)) and email ~ '^[^@\s]+@[^@\s]+\.[^@\s]+$' and length(email) <= 320),
  name text check (length(name) <= 500),
  company_name text check (length(company_name) <= 500),
  phone text check (length(phone) <= 50),
  stage text not null default 'prospect' check (stage = any (cortex.contact_stages())),
  source text check (length(source) <= 100),
  owner_agent text,
  owner_human_id text check (length(owner_human_id) <= 200),
  tags text[] not null default '{}' check (cardinality(tags) <= 100),
  custom_fields jsonb not null default '{}' check (jsonb_typeof(custom_fields) = 'object'),
  interaction_count int not null default 0 check (interaction_count >= 0),
  first_touch_at timestamptz,
  last_touch_at timestamptz,
  last_touch_agent text,
  converted_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  -- What the fuzzy search matches against (name, email, company), kept by Postgres.
  search_text text generated always as (
    lower(coalesce(name, '') || ' ' || email || ' ' || coalesce(company_name, ''))) stored,
  primary key (tenant_id, id),
  unique (tenant_id, email),
  foreign key (tenant_id, owner_agent) references cortex.agents (tenant_id, name)
);
comment on table cortex.contacts is 'People and companies the agents talk to; upserted by (tenant, normalised email).';
create index contacts_tenant_stage on cortex.contacts (tenant_id, stage);
create index contacts_tenant_owner on cortex.contacts (tenant_id, owner_agent);
create index contacts_tenant_last_touch on cortex.contacts (tenant_id, last_touch_at desc nulls last);
create index contacts_tags on cortex.contacts using gin (tenant_id, tags);
-- GiST, not GIN: it answers "nearest by word similarity" (KNN) straight from the index, so a
-- fuzzy search reads a page of candidates instead of every contact of the tenant. A 256-byte
-- signature (default 12) makes the index far less lossy for name + email + company strings;
-- stage as second column serves "search within a stage" from the index as well.
create index contacts_search on cortex.contacts
  using gist (tenant_id, stage, search_text extensions.gist_trgm_ops(siglen = 256));

create or replace function cortex.contacts_before_write() returns trigger
language plpgsql set search_path = '' as $$
begin
  new.email := lower(btrim(new.email));
  new.tags := coalesce((select array_agg(distinct t order by t) from unnest(new.tags) t where t <> ''), '{}');
  if new.stage = 'customer' and new.converted_at is null then
    new.converted_at := now();
  end if;
  return new;
end $$;
comment on function cortex.contacts_before_write() is 'Trigger: normalises email and tags, stamps converted_at when a contact becomes a customer.';
-- Only updates that set what it normalises: counter and touch-time updates (one per logged or
-- imported interaction) leave email, tags, stage and converted_at as they were.
create trigger contacts_before_write before insert or update of email, tags, stage, converted_at on cortex.contacts
  for each row execute function cortex.contacts_before_write();
create trigger contacts_updated_at before update on cortex.contacts
  for each row execute function cortex.touch_updated_at();

alter table cortex.contacts enable row level security;
create policy "Contacts are visible to agents of their tenant" on cortex.contacts
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
create policy "Writing agents add contacts to their tenant" on cortex.contacts
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write()));
create policy "Writing agents change contacts of their tenant" on cortex.contacts
  for update to authenticated
  using (tenant_id = (select cortex.current_tenant()))
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write()));
grant select, insert, update on cortex.contacts to authenticated;

-- Validation helpers shared by every API function -------------------------------------------

create or replace function cortex.normalise_email(p_email text) returns text
language plpgsql immutable set search_path = '' as $$
declare e text := lower(btrim(p_email));
begin
  if e is null or e = '' then
    raise exception 'email is required' using errcode = '22023', column = 'email';
  end if;
  if e !~ '^[^@\s]+@[^@\s]+\.[^@\s]+$' or length(e) > 320 then
    raise exception 'email is not a valid address' using errcode = '22023', column = 'email',
      detail = format('got "%s"', left(p_email, 100));
  end if;
  return e;
end $$;
comment on function cortex.normalise_email(text) is 'Lower-cased, trimmed email, or SQLSTATE 22023 naming the email field.';

-- Security invoker: under RLS an API caller sees its own tenant's agents only, and the guard
-- refuses any other tenant id outright, so an answer never tells whether a name exists elsewhere.
create or replace function cortex.check_agent(p_tenant_id uuid, p_agent text, p_field text) returns text
language plpgsql stable set search_path = '' as $$
begin
  perform cortex.guard_tenant(p_tenant_id);
  if p_agent is not null and not exists (
      select from cortex.agents a where a.tenant_id = p_tenant_id and a.name = p_agent) then
    raise exception 'unknown agent "%"', left(p_agent, 100) using errcode = '22023', column = p_field;
  end if;
  return p_agent;
end $$;
comment on function cortex.check_agent(uuid, text, text) is
  'Returns the agent name if it exists in the tenant (or null), else SQLSTATE 22023 naming p_field (owner_agent, agent, ...). '
  'An API caller may ask about its own tenant only (cortex.guard_tenant: 28000 without a tenant claim, 42501 for another tenant).';

create or replace function cortex.contact_json(c cortex.contacts) returns jsonb
language sql stable set search_path = '' as $$
  select jsonb_build_object(
    'id', c.id, 'email', c.email, 'name', c.name, 'company_name', c.company_name, 'phone', c.phone,
    'stage', c.stage, 'source', c.source, 'owner_agent', c.owner_agent, 'owner_human_id', c.owner_human_id,
    'tags', to_jsonb(c.tags), 'custom_fields', c.custom_fields, 'interaction_count', c.interaction_count,
    'first_touch_at', c.first_touch_at, 'last_touch_at', c.last_touch_at, 'last_touch_agent', c.last_touch_agent,
    'converted_at', c.converted_at, 'created_at', c.created_at, 'updated_at', c.updated_at)
$$;
comment on function cortex.contact_json(cortex.contacts) is 'The API representation of a contact.';

create or replace function cortex.contact_not_found(p_id uuid) returns void
language plpgsql set search_path = '' as $$
begin
  raise exception 'contact % not found', p_id
    using errcode = 'P0002', column = 'contact_id',
          hint = 'create the contact first with POST /api/v1/contacts (upsert_contact)';
end $$;
comment on function cortex.contact_not_found(uuid) is 'Raises the one "unknown contact" error (SQLSTATE P0002, with how to create it).';

grant execute on function cortex.normalise_email(text),
  cortex.check_agent(uuid, text, text), cortex.contact_stages(), cortex.contact_json(cortex.contacts),
  cortex.contact_not_found(uuid) to authenticated, service_role;

-- API ----------------------------------------------------------------------------------------

create or replace function public.upsert_contact(
  email text,
  name text default null,
  company_name text default null,
  phone text default null,
  stage text default null,
  source text default null,
  owner_agent text default null,
  owner_human_id text default null,
  tags text[] default null,
  custom_fields jsonb default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_email text;
  v_row cortex.contacts;
  v_id uuid;
  v_created boolean;
begin
  perform cortex.require_writer();
  v_email := cortex.normalise_email(upsert_contact.email);
  perform cortex.check_enum('stage', upsert_contact.stage, cortex.contact_stages());
  perform cortex.check_agent(v_tenant, upsert_contact.owner_agent, 'owner_agent');
  if upsert_contact.custom_fields is not null and jsonb_typeof(upsert_contact.custom_fields) <> 'object' then
    raise exception 'custom_fields must be a JSON object' using errcode = '22023', column = 'custom_fields';
  end if;

  insert into cortex.contacts as c (tenant_id, email, name, company_name, phone, stage, source,
                                    owner_agent, owner_human_id, tags, custom_fields)
  values (v_tenant, v_email, upsert_contact.name, upsert_contact.company_name, upsert_contact.phone,
          coalesce(upsert_contact.stage, 'prospect'), upsert_contact.source, upsert_contact.owner_agent,
          upsert_contact.owner_human_id, coalesce(upsert_contact.tags, '{}'),
          coalesce(upsert_contact.custom_fields, '{}'))
  on conflict (tenant_id, email) do update set
    -- Given fields overwrite, absent ones keep their value; tags accumulate, custom_fields merge.
    name = coalesce(excluded.name, c.name),
    company_name = coalesce(upsert_contact.company_name, c.company_name),
    phone = coalesce(upsert_contact.phone, c.phone),
    stage = coalesce(upsert_contact.stage, c.stage),
    source = coalesce(c.source, upsert_contact.source),
    owner_agent = coalesce(upsert_contact.owner_agent, c.owner_agent),
    owner_human_id = coalesce(upsert_contact.owner_human_id, c.owner_human_id),
    tags = c.tags || coalesce(upsert_contact.tags, '{}'),
    custom_fields = c.custom_fields || coalesce(upsert_contact.custom_fields, '{}')
  returning c.id, (c.xmax = 0) into v_id, v_created;
  select * into v_row from cortex.contacts c where c.tenant_id = v_tenant and c.id = v_id;
  return cortex.contact_json(v_row) || jsonb_build_object('created', v_created);
end $$;
comment on function public.upsert_contact(text, text, text, text, text, text, text, text, text[], jsonb) is
  'Creates or updates the contact with this email (normalised). Given fields overwrite, tags accumulate, custom_fields merge; the first source is kept. Returns the contact and created=true|false.';
grant execute on function public.upsert_contact(text, text, text, text, text, text, text, text, text[], jsonb) to authenticated;

create or replace function public.get_contact(contact_id uuid) returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_column
declare v_row cortex.contacts;
begin
  perform cortex.require_tenant();
  select * into v_row from cortex.contacts c
  where c.tenant_id = (select cortex.current_tenant()) and c.id = get_contact.contact_id;
  if not found then
    perform cortex.contact_not_found(get_contact.contact_id);
  end if;
  return cortex.contact_json(v_row);
end $$;
comment on function public.get_contact(uuid) is 'One contact of the caller''s tenant; SQLSTATE P0002 when unknown.';
grant execute on function public.get_contact(uuid) to authenticated;

create or replace function public.update_contact(contact_id uuid, patch jsonb) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_row cortex.contacts;
  v_key text;
  v_allowed text[] := array['email', 'name', 'company_name', 'phone', 'stage', 'source', 'owner_agent',
                            'owner_human_id', 'tags', 'custom_fields'];
begin
  perform cortex.require_writer();
  if patch is null or jsonb_typeof(patch) <> 'object' then
    raise exception 'patch must be a JSON object' using errcode = '22023', column = 'patch';
  end if;
  for v_key in select jsonb_object_keys(patch) loop
    if not (v_key = any (v_allowed)) then
      raise exception 'unknown field "%"; updatable fields are: %', left(v_key, 100), array_to_string(v_allowed, ', ')
        using errcode = '22023', column = v_key;
    end if;
  end loop;
  if patch ? 'email' then perform cortex.normalise_email(patch ->> 'email'); end if;
  if patch ? 'stage' then
    if jsonb_typeof(patch -> 'stage') <> 'string' then
      raise exception 'stage cannot be null' using errcode = '22023', column = 'stage';
    end if;
    perform cortex.check_enum('stage', patch ->> 'stage', cortex.contact_stages());
  end if;
  if patch ? 'owner_agent' then perform cortex.check_agent(v_tenant, patch ->> 'owner_agent', 'owner_agent'); end if;
  if patch ? 'tags' and jsonb_typeof(patch -> 'tags') not in ('array', 'null') then
    raise exception 'tags must be an array of strings' using errcode = '22023', column = 'tags';
  end if;
  if patch ? 'custom_fields' and jsonb_typeof(patch -> 'custom_fields') <> 'object' then
    raise exception 'custom_fields must be a JSON object' using errcode = '22023', column = 'custom_fields';
  end if;

  -- A key present in the patch sets the field (null clears it); an absent key leaves it alone.
  update cortex.contacts c set
    email = case when patch ? 'email' then cortex.normalise_email(patch ->> 'email') else c.email end,
    name = case when patch ? 'name' then patch ->> 'name' else c.name end,
    company_name = case when patch ? 'company_name' then patch ->> 'company_name' else c.company_name end,
    phone = case when patch ? 'phone' then patch ->> 'phone' else c.phone end,
    stage = case when patch ? 'stage' then patch ->> 'stage' else c.stage end,
    source = case when patch ? 'source' then patch ->> 'source' else c.source end,
    owner_agent = case when patch ? 'owner_agent' then patch ->> 'owner_agent' else c.owner_agent end,
    owner_human_id = case when patch ? 'owner_human_id' then patch ->> 'owner_human_id' else c.owner_human_id end,
    tags = case when patch ? 'tags'
                then coalesce((select array_agg(x) from jsonb_array_elements_text(
                       case when jsonb_typeof(patch -> 'tags') = 'array' then patch -> 'tags' else '[]' end) x), '{}')
                else c.tags end,
    custom_fields = case when patch ? 'custom_fields' then patch -> 'custom_fields' else c.custom_fields end
  where c.tenant_id = v_tenant and c.id = update_contact.contact_id
  returning c.* into v_row;
  if not found then
    perform cortex.contact_not_found(update_contact.contact_id);
  end if;
  return cortex.contact_json(v_row);
end $$;
comment on function public.update_contact(uuid, jsonb) is
  'Patches a contact: each key of patch sets that field (null clears it), absent keys are kept; unknown keys are rejected with SQLSTATE 22023.';
grant execute on function public.update_contact(uuid, jsonb) to authenticated;

-- The search itself runs as the owner: pg_trgm's operators are not leakproof, so under RLS the
-- planner may not use them as index conditions and would compare every row of the table. The
-- tenant comes from the request's claims, never from an argument, and is the first index column.
create or replace function cortex.search_contact_page(
  p_stage text, p_owner_agent text, p_owner_human_id text, p_tag text, p_q text, p_limit int, p_offset int
) returns jsonb
language plpgsql stable security definer set search_path = ''
-- The optional filters make a generic plan useless: plan each call with its real values.
set plan_cache_mode = force_custom_plan
-- Looser than pg_trgm's 0.6 default so that misspelt names still match; results are ranked.
set pg_trgm.word_similarity_threshold = 0.35 as $$
declare
  v_tenant uuid := cortex.require_tenant();
  v_items jsonb;
begin
  if p_q is not null and length(p_q) >= 3 then
    -- Nearest first by word similarity, from the GiST index (KNN); only matches above the threshold.
    select coalesce(jsonb_agg(cortex.contact_json(r.c) || jsonb_build_object('score', round(1 - r.dist::numeric, 3))
                              order by r.dist, (r.c).id), '[]')
    into v_items
    from (
      select c, p_q operator(extensions.<<->) c.search_text as dist
      from cortex.contacts c
      where c.tenant_id = v_tenant and p_q operator(extensions.<%) c.search_text
        and (p_stage is null or c.stage = p_stage)
        and (p_owner_agent is null or c.owner_agent = p_owner_agent)
        and (p_owner_human_id is null or c.owner_human_id = p_owner_human_id)
        and (p_tag is null or c.tags @> array[p_tag])
      order by p_q operator(extensions.<<->) c.search_text
      limit p_limit offset p_offset
    ) r;
  else
    -- Lists (and one- or two-letter searches, too short for trigrams): most recently touched first.
    select coalesce(jsonb_agg(cortex.contact_json(r.c) order by (r.c).last_touch_at desc nulls last, (r.c).id), '[]')
    into v_items
    from (
      select c from cortex.contacts c
      where c.tenant_id = v_tenant
        and (p_stage is null or c.stage = p_stage)
        and (p_owner_agent is null or c.owner_agent = p_owner_agent)
        and (p_owner_human_id is null or c.owner_human_id = p_owner_human_id)
        and (p_tag is null or c.tags @> array[p_tag])
        and (p_q is null or c.search_text like '%' || replace(replace(replace(p_q, '\', '\\'), '%', '\%'), '_', '\_') || '%')
      order by c.last_touch_at desc nulls last, c.id
      limit p_limit offset p_offset
    ) r;
  end if;
  return v_items;
end $$;
comment on function cortex.search_contact_page(text, text, text, text, text, int, int) is
  'One page of the calling tenant''s contacts (tenant from the claims): nearest by trigram word similarity when searching, else most recently touched; runs as owner so the trigram index can be used.';
revoke execute on function cortex.search_contact_page(text, text, text, text, text, int, int) from public, anon;
grant execute on function cortex.search_contact_page(text, text, text, text, text, int, int) to authenticated;

create or replace function public.search_contacts(
  stage text default null,
  owner_agent text default null,
  owner_human_id text default null,
  tag text default null,
  search text default null,
  "limit" int default 20,
  "offset" int default 0
) returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_column
declare
  v_q text := nullif(lower(btrim(search_contacts.search)), '');
begin
  perform cortex.require_tenant();
  perform cortex.check_enum('stage', search_contacts.stage, cortex.contact_stages());
  if search_contacts."limit" is null or search_contacts."limit" not between 1 and 100 then
    raise exception 'limit must be between 1 and 100' using errcode = '22023', column = 'limit';
  end if;
  if search_contacts."offset" is null or search_contacts."offset" < 0 then
    raise exception 'offset must be 0 or more' using errcode = '22023', column = 'offset';
  end if;
  if length(v_q) > 200 then
    raise exception 'search must be at most 200 characters' using errcode = '22023', column = 'search';
  end if;
  return jsonb_build_object(
    'items', cortex.search_contact_page(search_contacts.stage, search_contacts.owner_agent,
                                        search_contacts.owner_human_id, search_contacts.tag, v_q,
                                        search_contacts."limit", search_contacts."offset"),
    'limit', search_contacts."limit", 'offset', search_contacts."offset");
end $$;
comment on function public.search_contacts(text, text, text, text, text, int, int) is
  'Lists the tenant''s contacts by stage, owner, tag and a fuzzy search (pg_trgm word similarity on name, email and company), best match first.';
grant execute on function public.search_contacts(text, text, text, text, text, int, int) to authenticated;
