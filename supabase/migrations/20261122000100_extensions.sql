-- Extensions live in their own schema (never public), as on Supabase.
create schema if not exists extensions;
create extension if not exists pgcrypto with schema extensions;
create extension if not exists pg_trgm with schema extensions;
create extension if not exists btree_gin with schema extensions;
create extension if not exists btree_gist with schema extensions;
create extension if not exists vector with schema extensions;

-- pg_cron can only be created in the database named by cron.database_name (on Supabase:
-- postgres). Elsewhere (a test database) the scheduled jobs' logic still exists as plain SQL
-- functions that tests call directly; only the schedule is missing.
do $$
begin
  if current_setting('cron.database_name', true) is not distinct from current_database()
     and exists (select from pg_available_extensions where name = 'pg_cron') then
    create extension if not exists pg_cron;
  end if;
end $$;
