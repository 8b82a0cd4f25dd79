-- Realtime: how subscribers learn that a handoff or a working context changed, without polling.
--   * Supabase Realtime "Postgres Changes": the tables are in the supabase_realtime publication,
--     which Realtime reads through a logical replication slot (pgoutput). RLS decides what each
--     subscriber sees (policies "to authenticated" on the tenant claim).
--   * Supabase Realtime "Broadcast" (recommended at scale): where the realtime schema exists, a
--     trigger calls realtime.broadcast_changes on a private topic per tenant and table,
--     'tenant:<tenant_id>:<table>', and a policy on realtime.messages lets an agent receive only
--     its own tenant's topics. Elsewhere (plain Postgres) no broadcast trigger is created.
--   * Local LISTEN subscribers (the worker, a dashboard on the same host): pg_notify on channel
--     cortex_changes at commit, with the table and operation only. Any role may LISTEN to any
--     channel, so no tenant id, key or row contents are sent; subscribers read what changed
--     under RLS.
-- Re-runnable: every statement checks or replaces, so applying it again after the realtime
-- schema appeared attaches the broadcast triggers.

do $$
begin
  -- Supabase creates this publication itself; the local platform stand-in does too.
  if not exists (select from pg_catalog.pg_publication where pubname = 'supabase_realtime') then
    create publication supabase_realtime;
  end if;
  if to_regclass('cortex.handoff_events') is not null and not exists (
      select from pg_catalog.pg_publication_tables
      where pubname = 'supabase_realtime' and schemaname = 'cortex' and tablename = 'handoff_events') then
    alter publication supabase_realtime add table cortex.handoff_events;
  end if;
  if not exists (
      select from pg_catalog.pg_publication_tables
      where pubname = 'supabase_realtime' and schemaname = 'cortex' and tablename = 'contact_context') then
    alter publication supabase_realtime add table cortex.contact_context;
  end if;
end $$;

-- Local subscribers ---------------------------------------------------------------------------

create or replace function cortex.notify_change() returns trigger
language plpgsql set search_path = '' as $$
begin
  -- Any role can LISTEN (Postgres has no per-role LISTEN privilege): the payload names the table
  -- and the operation, never a tenant, a key or row contents. A subscriber that wants to know
  -- what changed reads the table under RLS, or subscribes through Supabase Realtime.
  perform pg_notify('cortex_changes', jsonb_build_object('schema', tg_table_schema, 'table', tg_table_name,
                                                         'op', tg_op)::text);
  return null;
end $$;
comment on function cortex.notify_change() is
  'Trigger: signals LISTENers on cortex_changes at commit with {schema, table, op} only (no tenant, key or row contents: any role can LISTEN).';

-- Supabase Broadcast --------------------------------------------------------------------------

-- Definer: realtime.messages is not writable by the API roles whose writes fire this trigger.
create or replace function cortex.broadcast_change() returns trigger
language plpgsql security definer set search_path = '' as $$
declare v_tenant uuid;
begin
  if tg_op = 'DELETE' then v_tenant := old.tenant_id; else v_tenant := new.tenant_id; end if;
  -- Only attached where realtime.broadcast_changes exists; the guard keeps a stray call harmless.
  if to_regprocedure('realtime.broadcast_changes(text, text, text, text, text, record, record, text)') is not null then
    perform realtime.broadcast_changes(
      format('tenant:%s:%s', v_tenant, tg_table_name), tg_op, tg_op, tg_table_name, tg_table_schema, new, old);
  end if;
  return null;
end $$;
comment on function cortex.broadcast_change() is
  'Trigger: sends the change through Supabase Realtime Broadcast (realtime.broadcast_changes) on the private topic tenant:<tenant_id>:<table>; a no-op where the realtime schema does not exist.';
revoke execute on function cortex.broadcast_change() from public, anon, authenticated;

do $$
declare
  t record;
begin
  for t in
    select * from (values ('handoff_events'), ('contact_context')) v (tbl)
    where to_regclass('cortex.' || v.tbl) is not null
  loop
    execute format(
      'create or replace trigger %I after insert or update or delete on cortex.%I '
      'for each row execute function cortex.notify_change()',
      t.tbl || '_notify_change', t.tbl);
    if to_regprocedure('realtime.broadcast_changes(text, text, text, text, text, record, record, text)') is not null then
      execute format(
        'create or replace trigger %I after insert or update or delete on cortex.%I '
        'for each row execute function cortex.broadcast_change()',
        t.tbl || '_broadcast_change', t.tbl);
    end if;
  end loop;

  -- Realtime Authorization: private broadcast topics are readable only by agents of their tenant.
  if to_regclass('realtime.messages') is not null and to_regprocedure('realtime.topic()') is not null then
    execute 'drop policy if exists "Agents receive their own tenant''s broadcasts" on realtime.messages';
    execute $p$
      create policy "Agents receive their own tenant's broadcasts" on realtime.messages
        for select to authenticated
        using (realtime.messages.extension = 'broadcast'
               and (select realtime.topic()) like 'tenant:' || (select cortex.current_tenant())::text || ':%')
    $p$;
  end if;
end $$;
