-- Limits on what callers send, enforced where the data lands so that the HTTP API, PostgREST
-- and the owner-rights helpers all meet them (docs/api.md, "Limits"). The HTTP edge checks the
-- same limits first (cortex.schemas) so that a bad request is refused before a model is called.
--
--   JSON values (custom_fields, metadata, open_threads, usage metadata): at most 32 levels of
--     nesting and 64 KiB as JSON text. Outbox and job payloads, built by SQL around such values,
--     at most 40 levels and 1 MiB. Python's JSON decoder (psycopg, the delivery and queue workers)
--     recurses once per level, so a value nested thousands deep must never be stored.
--   Tags: at most 100 per contact, each at most 100 characters (a GIN index entry must fit a
--     third of a page: one high-entropy tag of ~2.7 KB broke the write).
--   Emails: NFC-normalised, lower-cased and trimmed; control, format (zero-width, bidi),
--     separator and other invisible characters are refused, so that one address is one contact.
--   NUL cannot be stored in Postgres text at all; the HTTP edge refuses it with 422.
-- Rows stored before these limits stay readable and writable; the limits apply to new values.

-- JSON ---------------------------------------------------------------------------------------

create or replace function cortex.check_json(
  p_value jsonb, p_field text, p_max_depth int default 32, p_max_bytes int default 65536
) returns jsonb
language plpgsql immutable parallel safe set search_path = '' as $$
declare
  v_text text;
  v_bytes int;
begin
  if p_value is null then
    return null;
  end if;
  v_text := p_value::text;
  v_bytes := octet_length(v_text);
  if v_bytes > p_max_bytes then
    raise exception '% is too large: % bytes of JSON, at most %', p_field, v_bytes, p_max_bytes
      using errcode = '22023', column = p_field, hint = 'store large documents elsewhere and keep a reference';
  end if;
  -- A container at level n has n + 1 opening brackets in the text (brackets inside strings only
  -- add to the count): with no more than p_max_depth of them, the value cannot be too deep. Most
  -- values pass here, without building and running the jsonpath below (bulk writes check one
  -- value per row).
  if length(v_text) - length(translate(v_text, '[{', '')) <= p_max_depth then
    return p_value;
  end if;
  -- A container at nesting level p_max_depth (the value itself is level 0) is one level too deep;
  -- `.**{n}` stops descending at level n, so this reads each item at most once.
  if jsonb_path_exists(p_value, format('strict $.**{%s} ? (@.type() == "object" || @.type() == "array")',
                                       p_max_depth)::jsonpath) then
    raise exception '% is nested deeper than % levels', p_field, p_max_depth
      using errcode = '22023', column = p_field, hint = 'flatten the value';
  end if;
  return p_value;
end $$;
comment on function cortex.check_json(jsonb, text, int, int) is
  'Returns p_value when it nests at most p_max_depth levels (default 32) and is at most p_max_bytes bytes as JSON text (default 64 KiB); else SQLSTATE 22023 naming p_field. Null passes.';
grant execute on function cortex.check_json(jsonb, text, int, int) to authenticated, service_role;

-- Where caller JSON is stored, a trigger checks it on insert and when an update changes it.
-- A trigger rather than a CHECK constraint: Postgres re-checks every constraint on any update of
-- a row, so a row stored before these limits (a contact with deep custom_fields, a queued
-- message) could then never be touched again, not even to count an interaction or claim it.
create or replace function cortex.json_limits() returns trigger
language plpgsql set search_path = '' as $$
-- tg_argv: the column, then optionally its depth and byte limits (default 32 and 64 KiB).
declare
  v_new jsonb;
  v_old jsonb;
begin
  -- The columns in use are read directly: EXECUTE (planned on every row) cost more than the check
  -- itself on bulk writes (an import stores a row and a job per item). Each branch is parsed
  -- only when it runs, so a table needs only the column it names.
  if tg_argv[0] = 'metadata' then
    v_new := new.metadata;
    if tg_op = 'UPDATE' then v_old := old.metadata; end if;
  elsif tg_argv[0] = 'payload' then
    v_new := new.payload;
    if tg_op = 'UPDATE' then v_old := old.payload; end if;
  else
    execute format('select ($1).%1$I, ($2).%1$I', tg_argv[0]) into v_new, v_old using new, old;
  end if;
  if tg_op = 'INSERT' or v_new is distinct from v_old then
    perform cortex.check_json(v_new, tg_argv[0], coalesce(tg_argv[1]::int, 32), coalesce(tg_argv[2]::int, 65536));
  end if;
  return new;
end $$;
comment on function cortex.json_limits() is
  'Trigger: cortex.check_json on the column named by its first argument (limits in the next two), on insert and when an update changes it.';

create trigger contacts_custom_fields_limits before insert or update of custom_fields on cortex.contacts
  for each row execute function cortex.json_limits('custom_fields');
create trigger interactions_metadata_limits before insert or update of metadata on cortex.interactions
  for each row execute function cortex.json_limits('metadata');
create trigger handoff_metadata_limits before insert or update of metadata on cortex.handoff_events
  for each row execute function cortex.json_limits('metadata');
create trigger token_usage_metadata_limits before insert or update of metadata on cortex.token_usage
  for each row execute function cortex.json_limits('metadata');
create trigger contact_context_open_threads_limits before insert or update of open_threads on cortex.contact_context
  for each row execute function cortex.json_limits('open_threads');
-- Built by SQL around such values (a handoff's metadata inside its notification): more room.
create trigger outbox_payload_limits before insert or update of payload on cortex.outbox
  for each row execute function cortex.json_limits('payload', '40', '1048576');
create trigger jobs_payload_limits before insert or update of payload on cortex.jobs
  for each row execute function cortex.json_limits('payload', '40', '1048576');

-- Tags -------------------------------------------------------------------------------------------

create or replace function cortex.check_tags(p_tags text[], p_field text default 'tags') returns boolean
language plpgsql immutable parallel safe set search_path = '' as $$
declare v_long text;
begin
  if cardinality(p_tags) > 100 then
    raise exception '% has % tags, at most 100', p_field, cardinality(p_tags)
      using errcode = '22023', column = p_field;
  end if;
  select t into v_long from unnest(p_tags) t where length(t) > 100 limit 1;
  if v_long is not null then
    raise exception 'each of % is at most 100 characters (one has %)', p_field, length(v_long)
      using errcode = '22023', column = p_field, detail = format('got "%s..."', left(v_long, 40));
  end if;
  return true;
end $$;
comment on function cortex.check_tags(text[], text) is
  'True when there are at most 100 tags of at most 100 characters each; else SQLSTATE 22023 naming p_field.';
grant execute on function cortex.check_tags(text[], text) to authenticated, service_role;

create or replace function cortex.contacts_tags_limits() returns trigger
language plpgsql set search_path = '' as $$
begin
  if tg_op = 'INSERT' or new.tags is distinct from old.tags then
    perform cortex.check_tags(new.tags);
  end if;
  return new;
end $$;
comment on function cortex.contacts_tags_limits() is 'Trigger: cortex.check_tags on a contact''s tags, on insert and when an update changes them.';
-- After contacts_before_write (name order), which drops empty and duplicate tags.
create trigger contacts_tags_limits before insert or update of tags on cortex.contacts
  for each row execute function cortex.contacts_tags_limits();

-- Emails -----------------------------------------------------------------------------------------

-- Characters no address may hold: Unicode Cc, Cf, Zl, Zp and Zs other than the space (so every
-- zero-width and bidi control), plus the invisible fillers and variation selectors. The same
-- list is cortex.schemas.INVISIBLE_RANGES on the HTTP side (tests compare them).
create or replace function cortex.invisible_characters() returns text
language sql immutable parallel safe set search_path = '' as $$
  select '[' || E'\\u0001-\\u001f\\u007f-\\u00a0\\u00ad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f'
             || E'\\u0890-\\u0891\\u08e2\\u115f-\\u1160\\u1680\\u17b4-\\u17b5\\u180b-\\u180f'
             || E'\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u2064\\u2066-\\u206f\\u3000\\u3164'
             || E'\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff9-\\ufffb\\U000110bd\\U000110cd\\U00013430-\\U00013438'
             || E'\\U0001bca0-\\U0001bca3\\U0001d173-\\U0001d17a\\U000e0001\\U000e0020-\\U000e007f'
             || E'\\U000e0100-\\U000e01ef' || ']'
$$;
comment on function cortex.invisible_characters() is
  'A regular-expression bracket of the invisible characters refused in emails (control, format, bidi, separators, fillers).';
grant execute on function cortex.invisible_characters() to authenticated, service_role;

create or replace function cortex.normalise_email(p_email text) returns text
language plpgsql immutable set search_path = '' as $$
declare
  e text;
  v_bad text;
  v_hex text;
begin
  if p_email is null or btrim(p_email) = '' then
    raise exception 'email is required' using errcode = '22023', column = 'email';
  end if;
  v_bad := substring(p_email from cortex.invisible_characters());
  if v_bad is not null then
    v_hex := upper(to_hex(ascii(v_bad)));
    raise exception 'email contains an invisible or control character (U+%)', lpad(v_hex, greatest(4, length(v_hex)), '0')
      using errcode = '22023', column = 'email', hint = 'send the address as the person types it';
  end if;
  e := lower(btrim(normalize(p_email, nfc)));
  if e !~ '^[^@\s]+@[^@\s]+\.[^@\s]+$' or length(e) > 320 or not e is nfc normalized then
    raise exception 'email is not a valid address' using errcode = '22023', column = 'email',
      detail = format('got "%s"', left(p_email, 100));
  end if;
  return e;
end $$;
comment on function cortex.normalise_email(text) is
  'NFC-normalised, lower-cased, trimmed email, or SQLSTATE 22023 naming the email field (empty, invisible characters, not an address).';

-- Every write path (the API functions, a direct insert under RLS) goes through the table: the
-- trigger normalises, or refuses what normalising cannot fix. Fired after contacts_before_write
-- (triggers run in name order), which lower-cases and trims; only when the email changes, so a
-- contact stored before this rule stays writable.
create or replace function cortex.contacts_email_nfc() returns trigger
language plpgsql set search_path = '' as $$
begin
  if tg_op = 'INSERT' or new.email is distinct from old.email then
    new.email := cortex.normalise_email(new.email);
  end if;
  return new;
end $$;
comment on function cortex.contacts_email_nfc() is 'Trigger: the contact''s email through cortex.normalise_email (NFC, no invisible characters).';
create trigger contacts_email_nfc before insert or update of email on cortex.contacts
  for each row execute function cortex.contacts_email_nfc();

-- Webhook delivery ------------------------------------------------------------------------------

-- A message whose payload the worker cannot encode (nested deeper than its decoder recurses:
-- stored before these limits, or by the owner) would fail every attempt: it is dead-lettered
-- at once, alone, with an alert, and the rest of the round is delivered.
create or replace function cortex.mark_undeliverable(p_worker text, p_tenant_ids uuid[], p_ids bigint[], p_errors text[])
returns table (tenant_id uuid, id bigint)
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
begin
  return query
  with r as (
    select * from unnest(p_tenant_ids, p_ids, p_errors) as r (tenant_id, id, error)
  ), u as (
    update cortex.outbox o set status = 'dead', last_error = left(r.error, 2000), last_status_code = null,
                               locked_by = null, locked_until = null
    from r
    where o.tenant_id = r.tenant_id and o.id = r.id and o.status = 'delivering' and o.locked_by = p_worker
    returning o.tenant_id, o.id, o.event, o.recipient, o.attempts, o.last_error
  ), alerted as (
    insert into cortex.alerts (tenant_id, kind, severity, message, details)
    select u.tenant_id, 'webhook_dead_letter', 'warning',
           format('%s message %s to %s was dead-lettered: %s', u.event, u.id, u.recipient, left(u.last_error, 500)),
           jsonb_build_object('outbox_id', u.id, 'event', u.event, 'recipient', u.recipient, 'error', u.last_error)
    from u
    returning 1
  )
  select u.tenant_id, u.id from u;
end $$;
comment on function cortex.mark_undeliverable(text, uuid[], bigint[], text[]) is
  'Dead-letters at once, with an alert, outbox messages held by p_worker that no retry can deliver (a payload it cannot encode); returns those it changed.';
revoke execute on function cortex.mark_undeliverable(text, uuid[], bigint[], text[]) from public, anon, authenticated;
