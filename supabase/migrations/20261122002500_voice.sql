-- Voice (issue 9, seed 004): two-tier caller memory for voice agents.
--
--   Callers are contacts, found by their E.164 phone number (a contact may now have a phone and no
--   email; a phone belongs to at most one contact per tenant). Calls are interactions of that
--   contact (type call, external_id = the platform's conversation id), so they are summarised like
--   any other and become events of the memory graph through the graph's existing triggers.
--
--   Tier 1, the caller profile (cortex.voice_callers, one row per caller): the name (the contact's
--   name: set by a call only while it is empty, so a call never overwrites it; an operator corrects
--   it explicitly), first_seen, total_interactions across all voice agents. Shared by the tenant.
--
--   Tier 2, per caller and agent (cortex.voice_caller_states): next_greeting, key_topics (3-5),
--   sentiment (seed 004's four plus engaged), conversation_summary, last_call_date,
--   conversation_count. RLS keys it on the tenant AND the agent claim: an agent reads only its own.
--
--   Voice agents (cortex.voice_agents) map the platform's agent ids to Cortex agents, one to one,
--   with the profile the greeting prompt needs (name, first_message, system_prompt), fetched from
--   the platform's agents API or registered by hand, cached for 24 h; hits and misses are counted.
--
--   Call start: public.voice_client_data decides the ElevenLabs client-data answer in one
--   function, from JSON rendered at write time (client_data columns), with no model and no network.
--   Call end: the HTTP edge verifies the post-call signature, cortex.voice_accept_call records the
--   call once per conversation id and queues a voice_post_call job; the worker extracts the name,
--   generates tier 2 (Haiku or the local generator, budgeted) and stores everything with
--   cortex.voice_store_call in one transaction.
--
--   Permanence: nothing here decays. The tiers are rows, not graph nodes with weights: the graph's
--   decay (an edge weight's half-life, read time) never applies to them.
--
-- Lock order (docs/architecture.md): the contact row, then its interaction (log_interaction), then
-- the caller's tier-1 row, then its tier-2 rows; the call row (voice_calls) is locked first of all
-- by the worker, it is the job's own row and no other writer takes it.

-- Contacts by phone ------------------------------------------------------------------------------

create or replace function cortex.phone_e164_or_null(p_phone text) returns text
language plpgsql immutable set search_path = '' as $$
declare v text;
begin
  if p_phone is null then
    return null;
  end if;
  -- Formatting a person types (spaces, dashes, dots, brackets, slashes) goes; 00 is the + of most dial plans.
  v := regexp_replace(btrim(p_phone), '[[:space:]().\-/]', '', 'g');
  if v like '00%' then
    v := '+' || substr(v, 3);
  end if;
  return case when v ~ '^\+[1-9][0-9]{6,14}$' then v end;
end $$;
comment on function cortex.phone_e164_or_null(text) is
  'The canonical E.164 form (^\+[1-9][0-9]{6,14}$) of a phone number written with formatting (spaces, dashes, dots, brackets, a leading 00), or null when it is not one. The HTTP edge validates numbers with the phonenumbers library first; this is the rule SQL itself holds every path to.';

create or replace function cortex.normalise_phone(p_phone text, p_field text default 'phone') returns text
language plpgsql immutable set search_path = '' as $$
declare v text := cortex.phone_e164_or_null(p_phone);
begin
  if p_phone is null then
    return null;
  end if;
  if btrim(p_phone) = '' then
    raise exception '% is empty', p_field using errcode = '22023', column = p_field,
      hint = 'send an E.164 number such as +16125551234, or leave the field out';
  end if;
  if v is null then
    raise exception '% must be an international (E.164) number: + and the country code, 7 to 15 digits', p_field
      using errcode = '22023', column = p_field, detail = format('got "%s"', left(p_phone, 60)),
            hint = 'for example +16125551234';
  end if;
  return v;
end $$;
comment on function cortex.normalise_phone(text, text) is
  'E.164 phone number (formatting removed), or SQLSTATE 22023 naming p_field for an empty or non-international number; null stays null.';
grant execute on function cortex.phone_e164_or_null(text), cortex.normalise_phone(text, text) to authenticated, service_role;

-- Existing free-form phones become E.164 where they can; what cannot (or a second contact with the
-- same number) keeps its text in custom_fields.phone_original, so nothing is lost.
update cortex.contacts c
set custom_fields = c.custom_fields || jsonb_build_object('phone_original', c.phone), phone = null
where c.phone is not null and cortex.phone_e164_or_null(c.phone) is null;
update cortex.contacts c
set custom_fields = c.custom_fields || jsonb_build_object('phone_original', c.phone), phone = null
from (select tenant_id, id, row_number() over (partition by tenant_id, cortex.phone_e164_or_null(phone)
                                                order by created_at, id) as rn
      from cortex.contacts where phone is not null) d
where d.tenant_id = c.tenant_id and d.id = c.id and d.rn > 1;
update cortex.contacts c set phone = cortex.phone_e164_or_null(c.phone)
where c.phone is not null and c.phone <> cortex.phone_e164_or_null(c.phone);

alter table cortex.contacts alter column email drop not null;
alter table cortex.contacts add constraint contacts_phone_e164 check (phone ~ '^\+[1-9][0-9]{6,14}$');
alter table cortex.contacts add constraint contacts_email_or_phone check (email is not null or phone is not null);
alter table cortex.contacts add constraint contacts_tenant_id_phone_key unique (tenant_id, phone);
comment on column cortex.contacts.phone is 'E.164 (+ country code and number, no formatting); unique per tenant. A voice caller is the contact with its number.';
comment on column cortex.contacts.email is 'Normalised email, unique per tenant; may be null for a contact known by phone only (a caller).';

-- The fuzzy search's text: a contact without email still has its name, phone and company.
alter table cortex.contacts drop column search_text;
alter table cortex.contacts add column search_text text generated always as (
  lower(coalesce(name, '') || ' ' || coalesce(email, '') || ' ' || coalesce(company_name, '') || ' ' || coalesce(phone, ''))) stored;
create index contacts_search on cortex.contacts
  using gist (tenant_id, stage, search_text extensions.gist_trgm_ops(siglen = 256));

create or replace function cortex.contacts_email_nfc() returns trigger
language plpgsql set search_path = '' as $$
begin
  if (tg_op = 'INSERT' or new.email is distinct from old.email) and new.email is not null then
    new.email := cortex.normalise_email(new.email);
  end if;
  return new;
end $$;
comment on function cortex.contacts_email_nfc() is
  'Trigger: the contact''s email through cortex.normalise_email (NFC, no invisible characters); a contact known by phone only has none.';

create or replace function cortex.contacts_phone_e164() returns trigger
language plpgsql set search_path = '' as $$
begin
  if tg_op = 'INSERT' or new.phone is distinct from old.phone then
    new.phone := cortex.normalise_phone(new.phone);
  end if;
  return new;
end $$;
comment on function cortex.contacts_phone_e164() is
  'Trigger: the contact''s phone in E.164 (formatting removed), or SQLSTATE 22023 naming phone; every write path goes through it.';
create trigger contacts_phone_e164 before insert or update of phone on cortex.contacts
  for each row execute function cortex.contacts_phone_e164();

-- Where a contact was named by its email, a phone-only contact is named by its number.
create or replace function cortex.contact_label(c cortex.contacts) returns text
language sql immutable set search_path = '' as $$
  select coalesce(nullif(btrim(c.name), ''), c.email, c.phone, 'contact ' || c.id::text)
$$;
comment on function cortex.contact_label(cortex.contacts) is 'How a contact is named in generated text: its name, else its email, else its phone.';
grant execute on function cortex.contact_label(cortex.contacts) to authenticated, service_role;

create or replace function cortex.contact_node_title(c cortex.contacts) returns text
language sql immutable set search_path = '' as $$
  select left(cortex.contact_label(c), 500)
$$;
comment on function cortex.contact_node_title(cortex.contacts) is 'Title of a contact''s entity node: its name, else its email, else its phone.';

create or replace function cortex.contact_node_body(c cortex.contacts) returns text
language sql immutable set search_path = '' as $$
  select concat_ws(' · ', c.email, c.phone, c.company_name, 'stage ' || c.stage,
                   case when c.owner_agent is not null then 'owner ' || c.owner_agent end)
$$;
comment on function cortex.contact_node_body(cortex.contacts) is 'Body of a contact''s entity node: email, phone, company, stage and owner.';

drop trigger graph_sync_contact_changes on cortex.contacts;
create trigger graph_sync_contact_changes after update of name, email, phone, company_name, stage, owner_agent, tags
  on cortex.contacts for each row
  when ((old.name, old.email, old.phone, old.company_name, old.stage, old.owner_agent, old.tags)
        is distinct from (new.name, new.email, new.phone, new.company_name, new.stage, new.owner_agent, new.tags))
  execute function cortex.graph_sync_contact_changes();

create or replace function cortex.handoff_fallback_summary(
  p_tenant_id uuid, p_contact_id uuid, p_from text, p_to text, p_reason text, p_reason_detail text
) returns text
language sql stable set search_path = '' as $$
  select cortex.fit_words(concat_ws(' ',
    initcap(p_from) || ' is handing ' || cortex.contact_label(c) || coalesce(' (' || c.company_name || ')', '')
      || ' to ' || p_to || ' — ' || replace(p_reason, '_', ' ')
      || coalesce(': ' || cortex.fit_words(btrim(p_reason_detail), 300), '') || '.',
    'Stage: ' || c.stage || '; ' || c.interaction_count || ' interaction(s) logged.',
    (select 'Context: ' || cortex.fit_words(x.summary, 600) from cortex.contact_context x
     where x.tenant_id = p_tenant_id and x.contact_id = p_contact_id),
    (select 'Recent: ' || string_agg(to_char(i.occurred_at at time zone 'UTC', 'YYYY-MM-DD') || ' ' || i.agent || ' '
                                     || replace(i.type, '_', ' ') || coalesce(': ' || cortex.fit_words(i.summary, 200), ''),
                                     '; ' order by i.occurred_at desc) || '.'
     from (select * from cortex.interactions i where i.tenant_id = p_tenant_id and i.contact_id = p_contact_id
           order by i.occurred_at desc limit 3) i)), 2000)
  from cortex.contacts c where c.tenant_id = p_tenant_id and c.id = p_contact_id
$$;
comment on function cortex.handoff_fallback_summary(uuid, uuid, text, text, text, text) is
  'A handoff briefing assembled without a model: who hands whom to whom and why, the stage, the last working-context summary and the three newest interaction summaries.';

create or replace function cortex.record_handoff_on_context(
  p_tenant_id uuid, p_contact_id uuid, p_handoff_id uuid, p_summary text, p_last_handoff jsonb
) returns void
language plpgsql volatile security definer set search_path = '' as $$
begin
  -- The rule of create_handoff: a writing agent of the tenant.
  perform cortex.guard_writer(p_tenant_id);
  -- Lock order (docs/architecture.md): the contact row first, then its context row.
  perform from cortex.contacts c where c.tenant_id = p_tenant_id and c.id = p_contact_id for no key update;
  insert into cortex.contact_context as x (tenant_id, contact_id, summary, current_status,
    interaction_count_at_generation, stale_since, last_handoff_id, last_handoff_summary, last_handoff)
  select c.tenant_id, c.id,
         cortex.contact_label(c) || coalesce(' at ' || c.company_name, '') || ' (' || c.stage || '). '
           || c.interaction_count || ' interaction(s) logged.',
         'Working context is being generated', c.interaction_count, now(), p_handoff_id, p_summary, p_last_handoff
  from cortex.contacts c where c.tenant_id = p_tenant_id and c.id = p_contact_id
  on conflict (tenant_id, contact_id) do update set
    last_handoff_id = excluded.last_handoff_id, last_handoff_summary = excluded.last_handoff_summary,
    last_handoff = excluded.last_handoff;
end $$;
comment on function cortex.record_handoff_on_context(uuid, uuid, uuid, text, jsonb) is
  'Sets the contact''s last_handoff (id, summary and the {from, to, reason, date} shown by get_context), creating a stale stand-in context when none exists. An API caller must be a writing agent of p_tenant_id (cortex.guard_writer).';

-- upsert_contact: by email when one is given, else by phone.
create or replace function public.upsert_contact(
  email text default null,
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
  v_phone text;
  v_row cortex.contacts;
  v_id uuid;
  v_created boolean;
begin
  perform cortex.require_writer();
  v_phone := cortex.normalise_phone(upsert_contact.phone);
  if upsert_contact.email is not null or v_phone is null then
    v_email := cortex.normalise_email(upsert_contact.email);  -- 'email is required' when neither is given
  end if;
  perform cortex.check_enum('stage', upsert_contact.stage, cortex.contact_stages());
  perform cortex.check_agent(v_tenant, upsert_contact.owner_agent, 'owner_agent');
  if upsert_contact.custom_fields is not null and jsonb_typeof(upsert_contact.custom_fields) <> 'object' then
    raise exception 'custom_fields must be a JSON object' using errcode = '22023', column = 'custom_fields';
  end if;

  if v_email is not null then
    insert into cortex.contacts as c (tenant_id, email, name, company_name, phone, stage, source,
                                      owner_agent, owner_human_id, tags, custom_fields)
    values (v_tenant, v_email, upsert_contact.name, upsert_contact.company_name, v_phone,
            coalesce(upsert_contact.stage, 'prospect'), upsert_contact.source, upsert_contact.owner_agent,
            upsert_contact.owner_human_id, coalesce(upsert_contact.tags, '{}'),
            coalesce(upsert_contact.custom_fields, '{}'))
    on conflict (tenant_id, email) do update set
      -- Given fields overwrite, absent ones keep their value; tags accumulate, custom_fields merge.
      name = coalesce(excluded.name, c.name),
      company_name = coalesce(upsert_contact.company_name, c.company_name),
      phone = coalesce(v_phone, c.phone),
      stage = coalesce(upsert_contact.stage, c.stage),
      source = coalesce(c.source, upsert_contact.source),
      owner_agent = coalesce(upsert_contact.owner_agent, c.owner_agent),
      owner_human_id = coalesce(upsert_contact.owner_human_id, c.owner_human_id),
      tags = c.tags || coalesce(upsert_contact.tags, '{}'),
      custom_fields = c.custom_fields || coalesce(upsert_contact.custom_fields, '{}')
    returning c.id, (c.xmax = 0) into v_id, v_created;
  else
    -- Known by phone only (a caller): the same rules, keyed on the number.
    insert into cortex.contacts as c (tenant_id, email, name, company_name, phone, stage, source,
                                      owner_agent, owner_human_id, tags, custom_fields)
    values (v_tenant, null, upsert_contact.name, upsert_contact.company_name, v_phone,
            coalesce(upsert_contact.stage, 'prospect'), upsert_contact.source, upsert_contact.owner_agent,
            upsert_contact.owner_human_id, coalesce(upsert_contact.tags, '{}'),
            coalesce(upsert_contact.custom_fields, '{}'))
    on conflict (tenant_id, phone) do update set
      name = coalesce(excluded.name, c.name),
      company_name = coalesce(upsert_contact.company_name, c.company_name),
      stage = coalesce(upsert_contact.stage, c.stage),
      source = coalesce(c.source, upsert_contact.source),
      owner_agent = coalesce(upsert_contact.owner_agent, c.owner_agent),
      owner_human_id = coalesce(upsert_contact.owner_human_id, c.owner_human_id),
      tags = c.tags || coalesce(upsert_contact.tags, '{}'),
      custom_fields = c.custom_fields || coalesce(upsert_contact.custom_fields, '{}')
    returning c.id, (c.xmax = 0) into v_id, v_created;
  end if;
  select * into v_row from cortex.contacts c where c.tenant_id = v_tenant and c.id = v_id;
  return cortex.contact_json(v_row) || jsonb_build_object('created', v_created);
end $$;
comment on function public.upsert_contact(text, text, text, text, text, text, text, text, text[], jsonb) is
  'Creates or updates the contact with this email (normalised), or, without an email, the one with this phone (E.164; a caller known by number only). At least one of email and phone is required. Given fields overwrite, tags accumulate, custom_fields merge; the first source is kept. Returns the contact and created=true|false.';

-- Vocabularies -----------------------------------------------------------------------------------

create or replace function cortex.voice_sentiments() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['satisfied', 'neutral', 'frustrated', 'confused', 'engaged'];
end $$;
comment on function cortex.voice_sentiments() is
  'A caller''s sentiment in a voice agent''s state (seed 004''s four, plus engaged, which its own example uses).';

create or replace function cortex.voice_profile_sources() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['platform', 'manual'];
end $$;
comment on function cortex.voice_profile_sources() is
  'Where a voice agent''s profile comes from: platform (the voice platform''s agents API, cached 24 h) or manual (registered by hand, never fetched).';

create or replace function cortex.voice_call_statuses() returns text[]
language plpgsql immutable parallel safe set search_path = '' as $$
begin
  return array['queued', 'done', 'failed'];
end $$;
comment on function cortex.voice_call_statuses() is 'A received call: queued for the worker, done (stored), failed (parked by the queue).';

grant execute on function cortex.voice_sentiments(), cortex.voice_profile_sources(), cortex.voice_call_statuses()
  to authenticated, service_role;

-- The client-data answer, rendered at write time -------------------------------------------------

create or replace function cortex.voice_render_client_data(
  p_name text, p_total_interactions int, p_conversation_count int, p_next_greeting text
) returns jsonb
language sql immutable set search_path = '' as $$
  select jsonb_build_object(
    'type', 'conversation_initiation_client_data',
    'dynamic_variables', jsonb_build_object(
      'caller_name', coalesce(p_name, ''),
      'returning_caller', coalesce(p_total_interactions, 0) > 0,
      'total_interactions', coalesce(p_total_interactions, 0),
      'agent_conversation_count', coalesce(p_conversation_count, 0)))
  || case when p_next_greeting is not null then jsonb_build_object(
       'conversation_config_override', jsonb_build_object('agent', jsonb_build_object('first_message', p_next_greeting)))
     else '{}'::jsonb end
$$;
comment on function cortex.voice_render_client_data(text, int, int, text) is
  'The ElevenLabs conversation-initiation client data for a caller: type conversation_initiation_client_data, the dynamic variables caller_name, returning_caller, total_interactions, agent_conversation_count, and, when the agent has a stored greeting, conversation_config_override.agent.first_message.';

create or replace function cortex.voice_default_client_data() returns jsonb
language sql immutable set search_path = '' as $$
  select cortex.voice_render_client_data(null, 0, 0, null)
$$;
comment on function cortex.voice_default_client_data() is
  'The empty default answer (a new caller, or anything gone wrong): the same dynamic variables, empty, and no override, so the agent''s own first message plays.';
grant execute on function cortex.voice_render_client_data(text, int, int, text), cortex.voice_default_client_data()
  to authenticated, service_role;

-- Tables -----------------------------------------------------------------------------------------

create table cortex.voice_settings (
  tenant_id uuid primary key references cortex.tenants (id) on delete cascade,
  -- The client-data webhook's secret (sent by the platform in X-Voice-Secret): only its SHA-256.
  webhook_secret_hash bytea,
  webhook_secret_prefix text check (length(webhook_secret_prefix) <= 20),
  -- The post-call webhook's HMAC secret (the platform shows it when the webhook is made) and the
  -- platform API key (xi-api-key) for its agents API: needed in clear, readable by no API role.
  post_call_secret text check (length(post_call_secret) between 8 and 500),
  platform_api_key text check (length(platform_api_key) between 8 and 500),
  post_call_secret_set boolean generated always as (post_call_secret is not null) stored,
  platform_api_key_set boolean generated always as (platform_api_key is not null) stored,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
comment on table cortex.voice_settings is
  'A tenant''s voice webhooks: the SHA-256 of the client-data secret, the post-call HMAC secret and the platform API key (column privileges: no API role reads the secrets). Set by admins (set_voice_secrets).';
create index voice_settings_secret on cortex.voice_settings (webhook_secret_hash);
create trigger voice_settings_updated_at before update on cortex.voice_settings
  for each row execute function cortex.touch_updated_at();
alter table cortex.voice_settings enable row level security;
create policy "Voice settings are visible to the admins of their tenant" on cortex.voice_settings
  for select to authenticated
  using (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_has_role(array['admin'])));
create policy "Voice settings are made by the admins of their tenant" on cortex.voice_settings
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write())
              and (select cortex.caller_has_role(array['admin'])));
create policy "Voice settings are changed by the admins of their tenant" on cortex.voice_settings
  for update to authenticated
  using (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_has_role(array['admin'])))
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write())
              and (select cortex.caller_has_role(array['admin'])));
grant select (tenant_id, webhook_secret_prefix, post_call_secret_set, platform_api_key_set, created_at, updated_at)
  on cortex.voice_settings to authenticated;
grant insert (tenant_id), update (webhook_secret_hash, webhook_secret_prefix, post_call_secret, platform_api_key)
  on cortex.voice_settings to authenticated;

create table cortex.voice_agents (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  platform_agent_id text not null check (platform_agent_id ~ '^[A-Za-z0-9_-]{1,128}$'),
  agent text not null,
  name text check (length(name) <= 200),
  first_message text check (length(first_message) <= 2000),
  system_prompt text check (length(system_prompt) <= 20000),
  profile_source text not null default 'platform' check (profile_source = any (cortex.voice_profile_sources())),
  profile_fetched_at timestamptz,
  profile_hits bigint not null default 0 check (profile_hits >= 0),
  profile_misses bigint not null default 0 check (profile_misses >= 0),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant_id, platform_agent_id),
  unique (tenant_id, agent),
  foreign key (tenant_id, agent) references cortex.agents (tenant_id, name) on delete cascade
);
comment on table cortex.voice_agents is
  'The tenant''s voice agents: a platform agent id (ElevenLabs) mapped to one Cortex agent, with its profile (name, first_message, system_prompt; from the platform''s agents API, cached 24 h, or manual) and the profile cache''s hits and misses.';
-- The post-call webhook names only the platform agent: the edge finds its tenant(s) by it.
create index voice_agents_platform on cortex.voice_agents (platform_agent_id);
create trigger voice_agents_updated_at before update on cortex.voice_agents
  for each row execute function cortex.touch_updated_at();
alter table cortex.voice_agents enable row level security;
create policy "Voice agents are visible to agents of their tenant" on cortex.voice_agents
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
create policy "Voice agents are added by the admins of their tenant" on cortex.voice_agents
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write())
              and (select cortex.caller_has_role(array['admin'])));
create policy "Voice agents are changed by the admins of their tenant" on cortex.voice_agents
  for update to authenticated
  using (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_has_role(array['admin'])))
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write())
              and (select cortex.caller_has_role(array['admin'])));
grant select, insert, update on cortex.voice_agents to authenticated;

create table cortex.voice_callers (
  tenant_id uuid not null,
  contact_id uuid not null,
  -- Follows the contact's phone (on update cascade): the one key a call starts with.
  phone text not null,
  first_seen timestamptz not null default now(),
  total_interactions int not null default 0 check (total_interactions >= 0),
  last_call_at timestamptz,
  -- The answer for an agent that has no state of its own with this caller (name only).
  client_data jsonb not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant_id, contact_id),
  unique (tenant_id, phone),
  foreign key (tenant_id, contact_id) references cortex.contacts (tenant_id, id) on delete cascade,
  foreign key (tenant_id, phone) references cortex.contacts (tenant_id, phone) on update cascade
);
comment on table cortex.voice_callers is
  'Tier 1 (seed 004''s universal profile), one row per caller: the contact (whose name is the caller''s name), first_seen, total_interactions across all voice agents, and the client-data answer rendered for agents without a state of their own. Permanent: never decays.';
create trigger voice_callers_updated_at before update on cortex.voice_callers
  for each row execute function cortex.touch_updated_at();
alter table cortex.voice_callers enable row level security;
create policy "Voice callers are visible to agents of their tenant" on cortex.voice_callers
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
grant select on cortex.voice_callers to authenticated;

create table cortex.voice_caller_states (
  tenant_id uuid not null,
  contact_id uuid not null,
  agent text not null,
  phone text not null,
  next_greeting text not null check (length(btrim(next_greeting)) between 1 and 1000),
  key_topics text[] not null check (cardinality(key_topics) between 3 and 5),
  sentiment text not null check (sentiment = any (cortex.voice_sentiments())),
  conversation_summary text not null check (length(btrim(conversation_summary)) between 1 and 500),
  last_call_date timestamptz not null,
  conversation_count int not null check (conversation_count >= 1),
  model text,
  -- The whole client-data answer for this agent and caller, rendered at write time.
  client_data jsonb not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant_id, contact_id, agent),
  -- The call-start lookup: one probe by (tenant, number, agent).
  unique (tenant_id, phone, agent),
  foreign key (tenant_id, contact_id) references cortex.voice_callers (tenant_id, contact_id) on delete cascade,
  foreign key (tenant_id, phone) references cortex.voice_callers (tenant_id, phone) on update cascade,
  foreign key (tenant_id, agent) references cortex.agents (tenant_id, name) on delete cascade
);
comment on table cortex.voice_caller_states is
  'Tier 2 (seed 004''s agent-specific state), per caller and Cortex agent: next_greeting, key_topics (3-5), sentiment, conversation_summary, last_call_date, conversation_count, and the rendered client-data answer. RLS: an agent reads only its own rows. Permanent: never decays.';
create trigger voice_caller_states_updated_at before update on cortex.voice_caller_states
  for each row execute function cortex.touch_updated_at();
alter table cortex.voice_caller_states enable row level security;
create policy "A voice agent sees only its own state with a caller" on cortex.voice_caller_states
  for select to authenticated
  using (tenant_id = (select cortex.current_tenant()) and agent = (select cortex.current_agent()));
grant select on cortex.voice_caller_states to authenticated;

create table cortex.voice_calls (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  conversation_id text not null check (conversation_id ~ '^[A-Za-z0-9_.:-]{1,200}$'),
  platform_agent_id text not null,
  agent text not null,
  phone text not null check (phone ~ '^\+[1-9][0-9]{6,14}$'),
  status text not null default 'queued' check (status = any (cortex.voice_call_statuses())),
  -- The post-call webhook's body, as received (the job reads the transcript from it).
  event jsonb not null check (jsonb_typeof(event) = 'object'),
  contact_id uuid,
  interaction_id uuid,
  result jsonb,
  received_at timestamptz not null default now(),
  processed_at timestamptz,
  primary key (tenant_id, conversation_id)
);
comment on table cortex.voice_calls is
  'Post-call webhooks received, once per conversation id (a replay is acknowledged and does nothing), and what the worker made of each. Not readable by API roles: the transcript reaches agents as the call''s interaction.';
alter table cortex.voice_calls enable row level security;
-- No policy and no grant: only the edge (as owner) and the worker write and read it.

-- Rendering -------------------------------------------------------------------------------------

create or replace function cortex.voice_render_caller(p_tenant_id uuid, p_contact_id uuid) returns void
language sql volatile set search_path = '' as $$
  update cortex.voice_callers v
  set client_data = cortex.voice_render_client_data(nullif(btrim(c.name), ''), v.total_interactions, 0, null)
  from cortex.contacts c
  where v.tenant_id = p_tenant_id and v.contact_id = p_contact_id and c.tenant_id = v.tenant_id and c.id = v.contact_id;
  update cortex.voice_caller_states s
  set client_data = cortex.voice_render_client_data(nullif(btrim(c.name), ''), v.total_interactions,
                                                    s.conversation_count, s.next_greeting)
  from cortex.voice_callers v join cortex.contacts c on c.tenant_id = v.tenant_id and c.id = v.contact_id
  where s.tenant_id = p_tenant_id and s.contact_id = p_contact_id
    and v.tenant_id = s.tenant_id and v.contact_id = s.contact_id;
$$;
comment on function cortex.voice_render_caller(uuid, uuid) is
  'Renders the client-data answers of one caller (its tier-1 row and each agent''s tier-2 row) from the contact''s name, the tier-1 counters and each state; called by every write that changes them.';

create or replace function cortex.voice_contact_renamed() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  perform cortex.voice_render_caller(new.tenant_id, new.id);
  return null;
end $$;
comment on function cortex.voice_contact_renamed() is
  'Trigger: a caller''s name changed on its contact (an operator''s correction): its client-data answers are rendered again.';
revoke execute on function cortex.voice_contact_renamed() from public, anon, authenticated, service_role;
create trigger voice_contact_renamed after update of name on cortex.contacts
  for each row when (old.name is distinct from new.name) execute function cortex.voice_contact_renamed();

-- API: the call-start decision ---------------------------------------------------------------------

create or replace function public.voice_client_data(agent_id text, caller_id text) returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_phone text := cortex.phone_e164_or_null(voice_client_data.caller_id);
  v_answer jsonb;
  v_known boolean;
begin
  -- One statement: the platform agent must be the calling Cortex agent's (the edge resolves it from
  -- the mapping; an agent key of another agent is answered as an unknown agent, null); then the
  -- agent's own state (RLS: its rows only), else the caller's profile, else the empty default.
  select va.agent is not null, coalesce(s.client_data, v.client_data, cortex.voice_default_client_data())
  into v_known, v_answer
  from cortex.voice_agents va
  left join cortex.voice_caller_states s
    on s.tenant_id = va.tenant_id and s.phone = v_phone and s.agent = va.agent
  left join cortex.voice_callers v
    on s.client_data is null and v.tenant_id = va.tenant_id and v.phone = v_phone
  where va.tenant_id = v_tenant and va.platform_agent_id = voice_client_data.agent_id
    and va.agent = cortex.current_agent();
  return case when v_known then v_answer end;
end $$;
comment on function public.voice_client_data(text, text) is
  'The ElevenLabs conversation-initiation client data for a call to platform agent agent_id from caller_id: the calling agent''s stored greeting as conversation_config_override.agent.first_message, a known name in dynamic_variables, else the empty default. No model, no network: one or two indexed reads of JSON rendered at write time. Null when agent_id is not the calling agent''s voice agent (the edge answers the default and logs why).';
grant execute on function public.voice_client_data(text, text) to authenticated;

-- API: reads --------------------------------------------------------------------------------------

create or replace function public.get_voice_caller(phone text) returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_phone text := cortex.normalise_phone(get_voice_caller.phone);
  v_result jsonb;
begin
  if v_phone is null then
    raise exception 'phone is required' using errcode = '22023', column = 'phone';
  end if;
  select jsonb_build_object(
    'phone', v.phone, 'contact_id', v.contact_id, 'name', c.name, 'first_seen', v.first_seen,
    'total_interactions', v.total_interactions, 'last_call_at', v.last_call_at,
    'agent', cortex.current_agent(),
    'state', (select jsonb_build_object(
                'agent', s.agent, 'next_greeting', s.next_greeting, 'key_topics', to_jsonb(s.key_topics),
                'sentiment', s.sentiment, 'conversation_summary', s.conversation_summary,
                'last_call_date', s.last_call_date, 'conversation_count', s.conversation_count, 'model', s.model)
              from cortex.voice_caller_states s
              where s.tenant_id = v.tenant_id and s.contact_id = v.contact_id and s.agent = cortex.current_agent()))
  into v_result
  from cortex.voice_callers v join cortex.contacts c on c.tenant_id = v.tenant_id and c.id = v.contact_id
  where v.tenant_id = v_tenant and v.phone = v_phone;
  if v_result is null then
    raise exception 'no caller with phone %', v_phone using errcode = 'P0002', column = 'phone',
      hint = 'a caller is known after its first call (the post-call webhook)';
  end if;
  return v_result;
end $$;
comment on function public.get_voice_caller(text) is
  'A caller by phone: tier 1 (name, first_seen, total_interactions, last_call_at) and the calling agent''s own tier-2 state (null when it never spoke with the caller; never another agent''s). SQLSTATE 22023 naming phone for a non-E.164 number, P0002 for an unknown caller.';
grant execute on function public.get_voice_caller(text) to authenticated;

create or replace function cortex.voice_agent_json(va cortex.voice_agents) returns jsonb
language sql stable set search_path = '' as $$
  select jsonb_build_object(
    'platform_agent_id', va.platform_agent_id, 'agent', va.agent, 'name', va.name,
    'first_message', va.first_message, 'system_prompt', va.system_prompt, 'profile_source', va.profile_source,
    'profile_fetched_at', va.profile_fetched_at,
    'profile_fresh', va.profile_source = 'manual' or va.profile_fetched_at > now() - interval '24 hours',
    'profile_hits', va.profile_hits, 'profile_misses', va.profile_misses,
    'hit_rate', case when va.profile_hits + va.profile_misses > 0
                     then round(va.profile_hits::numeric / (va.profile_hits + va.profile_misses), 3) end,
    'created_at', va.created_at, 'updated_at', va.updated_at)
$$;
comment on function cortex.voice_agent_json(cortex.voice_agents) is
  'The API representation of a voice agent, with its profile cache''s hits, misses and hit rate.';
grant execute on function cortex.voice_agent_json(cortex.voice_agents) to authenticated, service_role;

create or replace function public.list_voice_agents() returns jsonb
language plpgsql stable set search_path = '' as $$
declare v_tenant uuid := cortex.require_tenant();
begin
  return (
    select jsonb_build_object(
      'items', coalesce(jsonb_agg(cortex.voice_agent_json(va) order by va.platform_agent_id), '[]'),
      'cache', jsonb_build_object(
        'hits', coalesce(sum(va.profile_hits), 0), 'misses', coalesce(sum(va.profile_misses), 0),
        'hit_rate', case when coalesce(sum(va.profile_hits + va.profile_misses), 0) > 0
                         then round(sum(va.profile_hits)::numeric / sum(va.profile_hits + va.profile_misses), 3) end,
        'target', 0.8, 'ttl_hours', 24))
    from cortex.voice_agents va where va.tenant_id = v_tenant);
end $$;
comment on function public.list_voice_agents() is
  'The tenant''s voice agents and the profile cache''s hit rate (per agent and in all; seed 004''s target is over 80 %).';
grant execute on function public.list_voice_agents() to authenticated;

-- API: admins --------------------------------------------------------------------------------------

create or replace function public.add_voice_agent(
  platform_agent_id text, agent text, name text default null, first_message text default null,
  system_prompt text default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_id text := btrim(add_voice_agent.platform_agent_id);
  v_manual boolean := coalesce(add_voice_agent.name, add_voice_agent.first_message, add_voice_agent.system_prompt) is not null;
  v_row cortex.voice_agents;
begin
  perform cortex.require_role(array['admin'], 'map voice agents');
  if v_id is null or v_id !~ '^[A-Za-z0-9_-]{1,128}$' then
    raise exception 'platform_agent_id must be 1 to 128 letters, digits, _ or -' using errcode = '22023',
      column = 'platform_agent_id', detail = format('got "%s"', left(add_voice_agent.platform_agent_id, 100));
  end if;
  if add_voice_agent.agent is null then
    raise exception 'agent is required: the Cortex agent this voice agent is' using errcode = '22023', column = 'agent';
  end if;
  perform cortex.check_agent(v_tenant, add_voice_agent.agent, 'agent');
  if exists (select from cortex.voice_agents va where va.tenant_id = v_tenant and va.agent = add_voice_agent.agent
             and va.platform_agent_id <> v_id) then
    raise exception 'agent "%" already answers for another voice agent', add_voice_agent.agent
      using errcode = '23505', column = 'agent', hint = 'one voice agent per Cortex agent: its state is that agent''s';
  end if;
  insert into cortex.voice_agents as va (tenant_id, platform_agent_id, agent, name, first_message, system_prompt,
                                         profile_source, profile_fetched_at)
  values (v_tenant, v_id, add_voice_agent.agent, add_voice_agent.name, add_voice_agent.first_message,
          add_voice_agent.system_prompt, case when v_manual then 'manual' else 'platform' end,
          case when v_manual then now() end)
  on conflict (tenant_id, platform_agent_id) do update set
    agent = excluded.agent,
    name = case when v_manual then excluded.name else va.name end,
    first_message = case when v_manual then excluded.first_message else va.first_message end,
    system_prompt = case when v_manual then excluded.system_prompt else va.system_prompt end,
    profile_source = excluded.profile_source,
    profile_fetched_at = case when v_manual then now() else va.profile_fetched_at end
  returning va.* into v_row;
  return cortex.voice_agent_json(v_row);
end $$;
comment on function public.add_voice_agent(text, text, text, text, text) is
  'Admins: maps a voice platform agent id to a Cortex agent (one to one). With name, first_message or system_prompt the profile is registered by hand (manual, never fetched); without, it comes from the platform''s agents API at the first call (cached 24 h). Returns the voice agent.';
grant execute on function public.add_voice_agent(text, text, text, text, text) to authenticated;

create or replace function public.set_voice_secrets(
  rotate_webhook_secret boolean default false, post_call_secret text default null, platform_api_key text default null
) returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_secret text;
  v_row record;
begin
  perform cortex.require_role(array['admin'], 'set the voice webhook secrets');
  if set_voice_secrets.post_call_secret is not null and length(btrim(set_voice_secrets.post_call_secret)) not between 8 and 500 then
    raise exception 'post_call_secret must be 8 to 500 characters' using errcode = '22023', column = 'post_call_secret';
  end if;
  if set_voice_secrets.platform_api_key is not null and length(btrim(set_voice_secrets.platform_api_key)) not between 8 and 500 then
    raise exception 'platform_api_key must be 8 to 500 characters' using errcode = '22023', column = 'platform_api_key';
  end if;
  insert into cortex.voice_settings (tenant_id) values (v_tenant) on conflict do nothing;
  if coalesce(set_voice_secrets.rotate_webhook_secret, false) then
    v_secret := 'cvs_' || pg_catalog.encode(extensions.gen_random_bytes(24), 'hex');
    update cortex.voice_settings s set webhook_secret_hash = pg_catalog.sha256(pg_catalog.convert_to(v_secret, 'UTF8')),
      webhook_secret_prefix = left(v_secret, 12) where s.tenant_id = v_tenant;
  end if;
  if set_voice_secrets.post_call_secret is not null then
    update cortex.voice_settings s set post_call_secret = btrim(set_voice_secrets.post_call_secret)
    where s.tenant_id = v_tenant;
  end if;
  if set_voice_secrets.platform_api_key is not null then
    update cortex.voice_settings s set platform_api_key = btrim(set_voice_secrets.platform_api_key)
    where s.tenant_id = v_tenant;
  end if;
  select s.webhook_secret_prefix, s.post_call_secret_set, s.platform_api_key_set, s.updated_at into v_row
  from cortex.voice_settings s where s.tenant_id = v_tenant;
  return jsonb_build_object('webhook_secret', v_secret, 'webhook_secret_prefix', v_row.webhook_secret_prefix,
                            'post_call_secret_set', v_row.post_call_secret_set,
                            'platform_api_key_set', v_row.platform_api_key_set, 'updated_at', v_row.updated_at);
end $$;
comment on function public.set_voice_secrets(boolean, text, text) is
  'Admins: sets the tenant''s voice secrets. rotate_webhook_secret makes a new client-data secret (X-Voice-Secret), returned once and stored as SHA-256 only; post_call_secret is the post-call webhook''s HMAC secret; platform_api_key the xi-api-key for the agents API. Neither secret can be read back by any API role.';
grant execute on function public.set_voice_secrets(boolean, text, text) to authenticated;

-- The edge (as the owner, before it acts as anyone) ----------------------------------------------------

create or replace function cortex.voice_authenticate(p_secret text, p_platform_agent_id text) returns jsonb
language sql stable set search_path = '' as $$
  select jsonb_build_object('role', 'authenticated', 'tenant_id', s.tenant_id, 'agent', va.agent)
  from cortex.voice_settings s
  join cortex.voice_agents va on va.tenant_id = s.tenant_id and va.platform_agent_id = p_platform_agent_id
  join cortex.agents a on a.tenant_id = va.tenant_id and a.name = va.agent and a.enabled
  where s.webhook_secret_hash = cortex.hash_key(p_secret)
  limit 1
$$;
comment on function cortex.voice_authenticate(text, text) is
  'The edge''s client-data login: the claims (tenant, the Cortex agent mapped to the platform agent) for a voice webhook secret and platform agent id, or null. Owner only.';
revoke execute on function cortex.voice_authenticate(text, text) from public, anon, authenticated, service_role;

create or replace function cortex.voice_post_call_secrets(p_platform_agent_id text)
returns table (tenant_id uuid, agent text, secret text)
language sql stable set search_path = '' as $$
  select va.tenant_id, va.agent, s.post_call_secret
  from cortex.voice_agents va join cortex.voice_settings s on s.tenant_id = va.tenant_id
  where va.platform_agent_id = p_platform_agent_id and s.post_call_secret is not null
$$;
comment on function cortex.voice_post_call_secrets(text) is
  'The post-call HMAC secrets of the tenants that map this platform agent id (the webhook names no tenant; the edge keeps the one whose secret verifies the signature). Owner only.';
revoke execute on function cortex.voice_post_call_secrets(text) from public, anon, authenticated, service_role;

create or replace function cortex.voice_accept_call(
  p_tenant_id uuid, p_conversation_id text, p_platform_agent_id text, p_agent text, p_phone text, p_event jsonb
) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_inserted boolean;
  v_job bigint;
begin
  perform cortex.guard_tenant(p_tenant_id);
  insert into cortex.voice_calls (tenant_id, conversation_id, platform_agent_id, agent, phone, event)
  values (p_tenant_id, p_conversation_id, p_platform_agent_id, p_agent, cortex.normalise_phone(p_phone), p_event)
  on conflict (tenant_id, conversation_id) do nothing
  returning true into v_inserted;
  if not coalesce(v_inserted, false) then
    return jsonb_build_object('accepted', false, 'duplicate', true, 'conversation_id', p_conversation_id);
  end if;
  v_job := cortex.enqueue_job(p_tenant_id, 'voice_post_call', jsonb_build_object('conversation_id', p_conversation_id),
                              'voice:' || p_conversation_id);
  return jsonb_build_object('accepted', true, 'duplicate', false, 'conversation_id', p_conversation_id, 'job_id', v_job);
end $$;
comment on function cortex.voice_accept_call(uuid, text, text, text, text, jsonb) is
  'Records a verified post-call webhook once per conversation id and queues its voice_post_call job, in one transaction; a replay returns duplicate=true and does nothing. Owner only (the edge, after the signature check).';
revoke execute on function cortex.voice_accept_call(uuid, text, text, text, text, jsonb) from public, anon, authenticated, service_role;

-- The worker ------------------------------------------------------------------------------------------

create or replace function cortex.voice_call_material(p_tenant_id uuid, p_conversation_id text) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_call cortex.voice_calls;
  v_agent cortex.voice_agents;
  v_fresh boolean;
begin
  perform cortex.guard_tenant(p_tenant_id);
  select * into v_call from cortex.voice_calls c where c.tenant_id = p_tenant_id and c.conversation_id = p_conversation_id;
  if not found then
    return null;
  end if;
  -- The profile cache: a hit when the profile is manual or fetched in the last 24 h.
  update cortex.voice_agents va
  set profile_hits = va.profile_hits + case when va.profile_source = 'manual'
                                             or va.profile_fetched_at > now() - interval '24 hours' then 1 else 0 end,
      profile_misses = va.profile_misses + case when va.profile_source = 'manual'
                                                 or va.profile_fetched_at > now() - interval '24 hours' then 0 else 1 end
  where va.tenant_id = p_tenant_id and va.platform_agent_id = v_call.platform_agent_id
  returning va.* into v_agent;
  v_fresh := v_agent.profile_source = 'manual' or v_agent.profile_fetched_at > now() - interval '24 hours';
  return jsonb_build_object(
    'status', v_call.status, 'event', v_call.event, 'phone', v_call.phone, 'agent', v_call.agent,
    'platform_agent_id', v_call.platform_agent_id,
    'profile', jsonb_build_object('agent_id', v_call.platform_agent_id, 'agent_name', coalesce(v_agent.name, v_call.agent),
                                  'first_message', v_agent.first_message, 'system_prompt', v_agent.system_prompt),
    'profile_fresh', coalesce(v_fresh, false),
    'platform_api_key', (select s.platform_api_key from cortex.voice_settings s where s.tenant_id = p_tenant_id),
    'caller', (select jsonb_build_object('name', c.name, 'phone', c.phone, 'contact_id', c.id,
                                         'total_interactions', coalesce(v.total_interactions, 0),
                                         'first_seen', v.first_seen)
               from cortex.contacts c left join cortex.voice_callers v on v.tenant_id = c.tenant_id and v.contact_id = c.id
               where c.tenant_id = p_tenant_id and c.phone = v_call.phone),
    'state', (select jsonb_build_object('conversation_count', s.conversation_count, 'key_topics', to_jsonb(s.key_topics),
                                        'last_call_date', s.last_call_date, 'conversation_summary', s.conversation_summary)
              from cortex.voice_caller_states s
              where s.tenant_id = p_tenant_id and s.phone = v_call.phone and s.agent = v_call.agent));
end $$;
comment on function cortex.voice_call_material(uuid, text) is
  'The worker''s material for a received call: the event, the voice agent''s profile (counting the profile cache''s hit or miss) and the platform API key, the caller''s tier 1 and the agent''s previous tier 2. Owner only.';
revoke execute on function cortex.voice_call_material(uuid, text) from public, anon, authenticated, service_role;

create or replace function cortex.voice_store_profile(p_tenant_id uuid, p_platform_agent_id text, p_profile jsonb)
returns jsonb
language plpgsql volatile set search_path = '' as $$
declare v_row cortex.voice_agents;
begin
  perform cortex.guard_tenant(p_tenant_id);
  update cortex.voice_agents va
  set name = left(nullif(btrim(p_profile ->> 'name'), ''), 200),
      first_message = left(p_profile ->> 'first_message', 2000),
      system_prompt = left(p_profile ->> 'system_prompt', 20000),
      profile_fetched_at = now()
  where va.tenant_id = p_tenant_id and va.platform_agent_id = p_platform_agent_id and va.profile_source = 'platform'
  returning va.* into v_row;
  return case when v_row.tenant_id is not null then cortex.voice_agent_json(v_row) end;
end $$;
comment on function cortex.voice_store_profile(uuid, text, jsonb) is
  'Caches a voice agent''s profile fetched from the platform ({name, first_message, system_prompt}) for 24 h; a manual profile is never replaced. Owner only.';
revoke execute on function cortex.voice_store_profile(uuid, text, jsonb) from public, anon, authenticated, service_role;

create or replace function cortex.voice_store_call(
  p_tenant_id uuid, p_conversation_id text, p_name text, p_state jsonb, p_transcript text, p_usage jsonb
) returns jsonb
language plpgsql volatile set search_path = '' as $$
declare
  v_call cortex.voice_calls;
  v_contact cortex.contacts;
  v_name text := nullif(btrim(p_name), '');
  v_named boolean := false;
  v_interaction jsonb;
  v_caller cortex.voice_callers;
  v_count int;
  v_started timestamptz;
  v_topics text[];
begin
  perform cortex.guard_tenant(p_tenant_id);
  select * into v_call from cortex.voice_calls c
  where c.tenant_id = p_tenant_id and c.conversation_id = p_conversation_id for update;
  if not found then
    raise exception 'call % not found', p_conversation_id using errcode = 'P0002', column = 'conversation_id';
  end if;
  if v_call.status = 'done' then
    return v_call.result || jsonb_build_object('skipped', 'already stored');
  end if;
  -- The state the model wrote, checked before anything is stored (the table's checks hold too).
  if p_state is null or jsonb_typeof(p_state) <> 'object' or jsonb_typeof(p_state -> 'key_topics') <> 'array' then
    raise exception 'state must be an object with key_topics' using errcode = '22023', column = 'state';
  end if;
  select coalesce(array_agg(left(btrim(t), 200)), '{}') into v_topics
  from jsonb_array_elements_text(p_state -> 'key_topics') t where btrim(t) <> '';
  perform cortex.check_enum('sentiment', p_state ->> 'sentiment', cortex.voice_sentiments());
  v_started := coalesce(to_timestamp((v_call.event #>> '{data,metadata,start_time_unix_secs}')::double precision),
                        v_call.received_at);

  -- The claims of the voice agent for the rest of this transaction: the call is logged as its work.
  perform pg_catalog.set_config('request.jwt.claims',
    jsonb_build_object('role', 'authenticated', 'tenant_id', p_tenant_id, 'agent', v_call.agent)::text, true);

  -- 1. The contact (lock order: first), made on the first call. A call names it only while it has no name.
  insert into cortex.contacts (tenant_id, phone, name, source)
  values (p_tenant_id, v_call.phone, v_name, 'voice')
  on conflict (tenant_id, phone) do nothing
  returning true into v_named;
  v_named := coalesce(v_named, false) and v_name is not null;
  select * into v_contact from cortex.contacts c where c.tenant_id = p_tenant_id and c.phone = v_call.phone
  for no key update;
  if v_name is not null and nullif(btrim(v_contact.name), '') is null then
    update cortex.contacts c set name = v_name where c.tenant_id = p_tenant_id and c.id = v_contact.id
    returning c.* into v_contact;
    v_named := true;
  end if;

  -- 2. The call as an interaction of the contact (summarised by the worker like any other).
  v_interaction := public.log_interaction(
    contact_id => v_contact.id, type => 'call', direction => 'inbound',
    subject => left('Voice call with ' || coalesce((select va.name from cortex.voice_agents va
      where va.tenant_id = p_tenant_id and va.platform_agent_id = v_call.platform_agent_id), v_call.agent), 1000),
    raw_content => p_transcript, external_id => v_call.conversation_id, agent => v_call.agent,
    metadata => jsonb_build_object('voice', jsonb_build_object(
      'conversation_id', v_call.conversation_id, 'platform_agent_id', v_call.platform_agent_id,
      'phone', v_call.phone, 'duration_secs', v_call.event #> '{data,metadata,call_duration_secs}')));

  -- 3. Tier 1.
  insert into cortex.voice_callers as v (tenant_id, contact_id, phone, first_seen, total_interactions, last_call_at,
                                         client_data)
  values (p_tenant_id, v_contact.id, v_call.phone, least(v_started, now()), 1, v_started, '{}')
  on conflict (tenant_id, contact_id) do update set
    total_interactions = v.total_interactions + 1,
    last_call_at = greatest(v.last_call_at, excluded.last_call_at)
  returning v.* into v_caller;

  -- 4. Tier 2 for this agent.
  insert into cortex.voice_caller_states as s (tenant_id, contact_id, agent, phone, next_greeting, key_topics, sentiment,
    conversation_summary, last_call_date, conversation_count, model, client_data)
  values (p_tenant_id, v_contact.id, v_call.agent, v_call.phone, btrim(p_state ->> 'next_greeting'), v_topics,
          p_state ->> 'sentiment', btrim(p_state ->> 'conversation_summary'), v_started, 1,
          coalesce(p_usage ->> 'model', p_state ->> 'model'), '{}')
  on conflict (tenant_id, contact_id, agent) do update set
    next_greeting = excluded.next_greeting, key_topics = excluded.key_topics, sentiment = excluded.sentiment,
    conversation_summary = excluded.conversation_summary,
    last_call_date = greatest(s.last_call_date, excluded.last_call_date),
    conversation_count = s.conversation_count + 1, model = excluded.model
  returning s.conversation_count into v_count;

  -- 5. The answers the next call start reads, for this caller and every agent that knows it.
  perform cortex.voice_render_caller(p_tenant_id, v_contact.id);

  -- 6. The model call, recorded with the call (settled by the caller in this transaction).
  if p_usage is not null then
    perform cortex.record_token_usage(p_tenant_id, v_call.agent, p_usage ->> 'model', coalesce(p_usage ->> 'operation', 'voice_greeting'),
      (p_usage ->> 'input_tokens')::int, (p_usage ->> 'output_tokens')::int, v_contact.id,
      (v_interaction ->> 'id')::uuid, coalesce((p_usage ->> 'budget_exceeded')::boolean, false));
  end if;

  update cortex.voice_calls c set status = 'done', processed_at = now(), contact_id = v_contact.id,
    interaction_id = (v_interaction ->> 'id')::uuid,
    result = jsonb_build_object('contact_id', v_contact.id, 'interaction_id', v_interaction ->> 'id',
                                'name', coalesce(nullif(btrim(v_contact.name), ''), v_name), 'name_set', v_named,
                                'total_interactions', v_caller.total_interactions, 'conversation_count', v_count)
  where c.tenant_id = p_tenant_id and c.conversation_id = p_conversation_id
  returning c.result into v_interaction;
  return v_interaction;
end $$;
comment on function cortex.voice_store_call(uuid, text, text, jsonb, text, jsonb) is
  'The worker''s one transaction for a call: the caller''s contact (made on the first call; a call sets its name only while it has none), the call logged as a call interaction of it as the voice agent (summarised like any other; idempotent by conversation id), tier 1 (total_interactions + 1), the agent''s tier 2 (validated), the client-data answers rendered again and the model call recorded. A call stored already is skipped. Owner only.';
revoke execute on function cortex.voice_store_call(uuid, text, text, jsonb, text, jsonb) from public, anon, authenticated, service_role;
