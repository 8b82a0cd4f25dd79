-- Benchmark data set for voice (issue 9): 1,000,000 callers across 10 tenants, 5 voice agents per
-- tenant, each agent with a state (tier 2) for 30 % of the callers: 100,000 callers and 150,000
-- states per tenant at scale 1.
--
-- Run with psql against a migrated database whose name starts with cortex_bench (scripts/bench voice
-- drops, recreates and migrates it first):
--   psql -X -v ON_ERROR_STOP=1 -v scale=0.02 -f sql/bench/generate_voice.sql postgresql://.../cortex_bench_voice
-- Without -v scale the scale is 1. Re-running it starts from empty tables.
--
-- Ids are deterministic so that pgbench can build a request from random numbers alone (one round
-- trip, no lookup): tenant n is 00000000-0000-4000-8000-0000000000nn, its agents voice1..voice5 are
-- platform agents agent_<n>_<k>, caller c of any tenant is +1612 (2000000 + c). The client-data
-- answers are rendered as the write path renders them (cortex.voice_render_client_data). Callers are
-- loaded set-based with the graph and rendering triggers of contacts off (the benchmark reads voice
-- tables only; the graph's own benchmark covers contact nodes).

\set ON_ERROR_STOP on
\timing on

do $$
begin
  if current_database() not like 'cortex\_bench%' then
    raise exception 'generate_voice.sql only runs in a database named cortex_bench*, not %', current_database();
  end if;
end $$;

set work_mem = '256MB';
set maintenance_work_mem = '512MB';
set synchronous_commit = off;
set client_min_messages = warning;
select setseed(0.20261122);
\if :{?scale}
\else
  \set scale 1
\endif

\echo '== reset'
set session_replication_role = replica;
truncate cortex.tenants cascade;
reset session_replication_role;
drop schema if exists bench cascade;
create schema bench;
comment on schema bench is 'Benchmark bookkeeping (plain-text keys and secrets, run metadata); never exists outside cortex_bench.';
create table bench.meta (key text primary key, value text not null);
insert into bench.meta values ('scale', :'scale'), ('complete', 'false');
create table bench.keys (tenant int not null, agent text not null, platform_agent_id text not null, key text not null,
                         primary key (tenant, agent));

\echo '== tenants, agents, voice agents, secrets'
insert into cortex.tenants (id, name, slug)
select ('00000000-0000-4000-8000-0000000000' || lpad(n::text, 2, '0'))::uuid, 'Voice tenant ' || n, 'voice-' || n
from generate_series(1, 10) n;
insert into cortex.agents (tenant_id, name, display_name, role)
select t.id, 'system', 'Cortex system', 'admin' from cortex.tenants t;
insert into cortex.agents (tenant_id, name, display_name)
select t.id, 'voice' || k, 'Voice agent ' || k from cortex.tenants t, generate_series(1, 5) k;
insert into cortex.agent_config (tenant_id, agent) select a.tenant_id, a.name from cortex.agents a;
insert into cortex.voice_agents (tenant_id, platform_agent_id, agent, name, first_message, system_prompt,
                                 profile_source, profile_fetched_at)
select t.id, 'agent_' || right(t.slug, -6) || '_' || k, 'voice' || k, 'Voice agent ' || k,
       'Hello, this is voice agent ' || k || '.', 'You are voice agent ' || k || ' of a benchmark tenant.',
       'manual', now()
from cortex.tenants t, generate_series(1, 5) k;
insert into cortex.voice_settings (tenant_id, webhook_secret_hash, webhook_secret_prefix, post_call_secret)
select t.id, cortex.hash_key('cvs_bench_' || right(t.slug, -6)), left('cvs_bench_' || right(t.slug, -6), 12),
       'bench-post-call-' || right(t.slug, -6)
from cortex.tenants t;
insert into bench.keys (tenant, agent, platform_agent_id, key)
select right(t.slug, -6)::int, a.name, va.platform_agent_id, cortex.create_agent_key(t.id, a.name, 'bench')
from cortex.tenants t join cortex.agents a on a.tenant_id = t.id
join cortex.voice_agents va on va.tenant_id = a.tenant_id and va.agent = a.name;

-- Callers: contacts known by phone only, and their tier-1 rows --------------------------------------
\echo '== callers (contacts by phone)'
alter table cortex.contacts disable trigger contacts_render_context;
alter table cortex.contacts disable trigger graph_sync_contacts;
select (100000 * :scale)::int as callers \gset
insert into bench.meta values ('callers_per_tenant', :'callers');
insert into cortex.contacts (tenant_id, phone, name, source, stage, interaction_count, first_touch_at, last_touch_at)
select t.id, '+1612' || (2000000 + c),
       case when random() < 0.8 then (array['Stefan', 'Maria', 'Anna', 'Tom', 'Priya', 'Jean', 'Olu', 'Mei', 'Carlos',
                                             'Fatima'])[1 + floor(random() * 10)::int] end,
       'voice', 'prospect', 0, now() - interval '90 days', now() - (random() * interval '30 days')
from cortex.tenants t, generate_series(1, :callers) c;
alter table cortex.contacts enable trigger contacts_render_context;
alter table cortex.contacts enable trigger graph_sync_contacts;

\echo '== tier 1'
insert into cortex.voice_callers (tenant_id, contact_id, phone, first_seen, total_interactions, last_call_at, client_data)
select c.tenant_id, c.id, c.phone, c.first_touch_at, n, c.last_touch_at,
       cortex.voice_render_client_data(c.name, n, 0, null)
from (select c.*, 1 + floor(random() * 12)::int as n from cortex.contacts c) c;

-- Tier 2: each of the 5 agents has a state with 30 % of the callers ----------------------------------
\echo '== tier 2'
insert into cortex.voice_caller_states (tenant_id, contact_id, agent, phone, next_greeting, key_topics, sentiment,
  conversation_summary, last_call_date, conversation_count, model, client_data)
select s.tenant_id, s.contact_id, s.agent, s.phone, s.greeting, s.topics, s.sentiment, s.summary, s.at, s.n,
       'local-summariser-v1', cortex.voice_render_client_data(s.name, s.total, s.n, s.greeting)
from (
  select v.tenant_id, v.contact_id, 'voice' || k as agent, v.phone, c.name, v.total_interactions as total,
         coalesce('Hi ' || c.name || '! ', 'Welcome back! ') || 'Last time we talked about '
           || (array['your order', 'the founding story', 'your medication', 'the renovation', 'your trip'])[k]
           || ' - shall we pick up where we left off?' as greeting,
         array[(array['orders', 'family history', 'medication', 'renovation', 'travel'])[k], 'follow-up', 'next steps'] as topics,
         (array['satisfied', 'neutral', 'frustrated', 'confused', 'engaged'])[1 + floor(random() * 5)::int] as sentiment,
         'Talked with voice agent ' || k || ' about ' || (array['orders', 'family history', 'medication', 'renovation', 'travel'])[k] || '.' as summary,
         now() - (random() * interval '30 days') as at, 1 + floor(random() * 4)::int as n
  from cortex.voice_callers v join cortex.contacts c on c.tenant_id = v.tenant_id and c.id = v.contact_id,
       generate_series(1, 5) k
  where random() < 0.3
) s;

\echo '== analyse'
analyze cortex.contacts;
analyze cortex.voice_callers;
analyze cortex.voice_caller_states;
analyze cortex.voice_agents;

-- pgbench and the HTTP run read the claims and keys from here as the API role.
grant usage on schema bench to authenticated;
grant select on bench.keys to authenticated;
update bench.meta set value = 'true' where key = 'complete';
select (select count(*) from cortex.voice_callers) as callers, (select count(*) from cortex.voice_caller_states) as states;
