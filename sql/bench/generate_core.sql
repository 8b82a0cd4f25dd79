-- Benchmark data set for the core API (issue 3): 10 tenants, 100,000 contacts, 1,000,000
-- interactions and working context for ~60 % of the contacts.
--
-- Run with psql against a migrated database whose name starts with cortex_bench (scripts/bench
-- drops, recreates and migrates it first):
--   psql -X -v ON_ERROR_STOP=1 -f sql/bench/generate_core.sql postgresql://.../cortex_bench
-- `-v scale=0.05` builds a smaller copy (contacts per tenant and interactions times the scale) for
-- quick runs; without it the scale is 1, the standard size the published figures use.
-- Re-running it on the same database starts from empty tables, so it is idempotent on its own.
--
-- Everything is set-based (insert ... select over generate_series); random choices come from
-- arrays of phrases indexed by random(), seeded so two runs produce the same shapes. Staging
-- tables are unlogged; the real tables stay logged, with all their indexes, triggers and checks,
-- so the data went through the same constraints as production rows.

\set ON_ERROR_STOP on
\timing on

do $$
begin
  if current_database() not like 'cortex\_bench%' then
    raise exception 'generate_core.sql only runs in a database named cortex_bench*, not %', current_database();
  end if;
end $$;

-- Session settings only (the server's configuration is left alone): bigger sorts and hashes.
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
-- The append-only tables refuse TRUNCATE (triggers, by design); in a benchmark database starting
-- over is the point, and replica mode skips those triggers for this one reset.
set session_replication_role = replica;
truncate cortex.tenants cascade;
reset session_replication_role;
drop schema if exists bench cascade;
create schema bench;
comment on schema bench is 'Benchmark bookkeeping (plain-text agent keys, run metadata); never exists outside cortex_bench.';

create table bench.meta (key text primary key, value text not null);

-- Rendered context (cortex.context_levels) is built once at the end, not at each statement's
-- commit: the deferred render triggers are off during the load and back on before the backfill.
alter table cortex.contacts disable trigger contacts_render_context;
alter table cortex.interactions disable trigger interactions_render_context;
alter table cortex.contact_context disable trigger contact_context_render_context;

-- Tenants: uneven sizes, one big tenant with 40 % of the contacts --------------------------
\echo '== tenants and agents'
create unlogged table bench.tenant_plan (n int primary key, slug text not null, name text not null,
                                         time_zone text not null, contacts int not null, id uuid);
insert into bench.tenant_plan (n, slug, name, time_zone, contacts) values
  (1, 'northwind', 'Northwind Traders', 'Europe/Berlin', 40000),
  (2, 'globex', 'Globex Corporation', 'America/New_York', 15000),
  (3, 'initech', 'Initech', 'America/Chicago', 10000),
  (4, 'umbrella', 'Umbrella Health', 'Europe/London', 8000),
  (5, 'hooli', 'Hooli', 'America/Los_Angeles', 7000),
  (6, 'stark', 'Stark Supplies', 'Europe/Paris', 6000),
  (7, 'wayne', 'Wayne Logistics', 'America/Denver', 5000),
  (8, 'tyrell', 'Tyrell Robotics', 'Asia/Tokyo', 4000),
  (9, 'soylent', 'Soylent Foods', 'Australia/Sydney', 3000),
  (10, 'wonka', 'Wonka Sweets', 'Europe/Zurich', 2000);
update bench.tenant_plan set contacts = greatest(1, round(contacts * :scale))::int;
update bench.tenant_plan set id = cortex.create_tenant(name, slug, time_zone);

select count(*) as agents from (
  select cortex.create_agent(t.id, a.name, a.display_name, a.role, a.read_only, a.max_input_tokens)
  from bench.tenant_plan t
  cross join (values ('luna', 'Luna (support)', 'agent', false, 2000),
                     ('mia', 'Mia (success)', 'agent', false, 2000),
                     ('anna', 'Anna (outreach)', 'agent', false, 2000),
                     ('jasper', 'Jasper (sales)', 'agent', false, 4000),
                     ('helios', 'Helios (monitor)', 'monitor', true, 2000))
    as a(name, display_name, role, read_only, max_input_tokens)
) s;

-- The keys are shown once; the benchmark keeps them here to call the HTTP API.
create table bench.agent_keys as
select t.id as tenant_id, t.slug, t.n as tenant_n, a.name as agent, cortex.create_agent_key(t.id, a.name, 'bench') as key
from bench.tenant_plan t cross join (values ('luna'), ('mia'), ('anna'), ('jasper'), ('helios'), ('system')) a(name);
alter table bench.agent_keys add primary key (tenant_id, agent);

-- Phrase lists -------------------------------------------------------------------------------
create unlogged table bench.words (kind text primary key, items text[] not null);
insert into bench.words values
('first', array['Maria','John','Aisha','Liam','Sofia','Noah','Emma','Lukas','Chen','Priya','Mateo','Olivia',
  'Yuki','Ahmed','Hannah','Pierre','Elena','Jonas','Fatima','Diego','Grace','Ivan','Zoe','Omar','Clara',
  'Rahul','Isabel','Felix','Mei','Tom','Lea','Carlos','Nina','Samuel','Anya','Ethan','Chloe','Marco',
  'Sara','Daniel','Ingrid','Kofi','Lucia','Henrik','Amara','Paul','Julia','Kenji','Rosa','Victor']),
('last', array['Smith','Garcia','Müller','Khan','Rossi','Kowalski','Nguyen','Johansson','Dubois','Silva',
  'Tanaka','Okafor','Schmidt','Brown','Martin','Novak','Haddad','Fischer','Lopez','Andersen','Wright',
  'Kim','Petrov','Costa','Weber','Hughes','Moreau','Yilmaz','Bianchi','Fernandes','Clarke','Sato','Meyer',
  'Ivanova','Lindqvist','Oduya','Russo','Walsh','Becker','Chowdhury','Evans','Laurent','Horvat','Reyes',
  'Jensen','Patel','Santos','Keller','Murphy','Wagner']),
('company_a', array['Acme','Blue Ridge','Northstar','Pioneer','Summit','Evergreen','Silverline','Redwood',
  'Brightpath','Ironclad','Lakeside','Crescent','Nimbus','Quantum','Harbor','Keystone','Atlas','Vertex',
  'Sunrise','Falcon','Granite','Meridian','Orchid','Polaris','Cobalt','Juniper','Beacon','Canyon','Aurora','Sterling']),
('company_b', array['Corp','Logistics','Foods','Health','Labs','Retail','Manufacturing','Analytics','Energy',
  'Systems','Outfitters','Pharma','Media','Robotics','Textiles','Hospitality','Motors','Software','Builders','Partners']),
('free_mail', array['gmail.com','outlook.com','yahoo.com','proton.me','icloud.com','gmx.de']),
('tag', array['vip','enterprise','smb','newsletter','trial','partner','eu','us','apac','webinar-2026',
  'high-touch','self-serve','reseller','beta','annual-plan','monthly-plan']),
('source', array['website','referral','webinar','outbound','trade_show','import','partner','chat']),
('topic', array['bulk pricing for 500 units','a shipping delay on order #N','the renewal of the annual plan',
  'single sign-on for their team','an invoice that was charged twice','the API rate limits',
  'onboarding for three new users','a damaged delivery on order #N','upgrading to the enterprise tier',
  'data export to their warehouse','a discount for a two-year commitment','the sustainability report',
  'a missing item in order #N','the new dashboard release','GDPR and data residency in the EU',
  'a refund for order #N','a slow support response last week','integrating with their CRM',
  'training sessions for the sales team','seasonal demand for Q3','a replacement part for order #N',
  'switching from a competitor','the quarterly business review','a security questionnaire',
  'payment terms of 60 days','a pilot with two departments','the mobile app login issue',
  'a reorder of 2,000 units','cancelling the subscription','a referral to a partner company']),
('outcome', array['Customer thanked the team for the quick reply.','A follow-up call is booked for next week.',
  'They want a written quote by Friday.','Issue escalated to the logistics partner.',
  'Customer is comparing us with two other vendors.','They confirmed the budget is approved.',
  'Customer sounded frustrated about the delay.','Resolved on first contact.',
  'Waiting for their procurement team to sign off.','They asked for a case study from their industry.',
  'Customer will decide after the board meeting.','Sent the documentation they asked for.',
  'They hinted at expanding to other regions.','Refund approved and confirmed by email.',
  'Customer asked to be contacted only by email.','No reply yet; nudge scheduled.',
  'Decision maker is the CFO, not our contact.','They are happy with the product so far.',
  'Customer threatened to cancel if it happens again.','Agreed on a trial extension of 14 days.']),
('filler', array['Thanks for getting back to me so quickly.','I have attached the details from our side.',
  'Our team went through the proposal on Tuesday.','Could you confirm the timeline before the end of the month?',
  'We are still evaluating the options internally.','Please let me know if anything is unclear.',
  'The last shipment arrived two days later than promised.','Our finance team needs the invoice in EUR.',
  'I am copying my colleague who handles procurement.','We would like to schedule a short call this week.',
  'The pricing looks reasonable, but we need a volume discount.','Happy to share our usage numbers if that helps.',
  'This is the third time we have had this problem.','Everything is working well since the update.',
  'Can you send over the updated contract?','We plan to roll this out to the rest of the company next quarter.']),
('fact', array['Makes the buying decisions for the team','Price-conscious, asked about discounts twice',
  'Values the sustainability angle','Prefers email over phone calls','Had a shipping issue, resolved the same day',
  'Hinted at ordering 2,000 units per quarter','Compares us with a competitor every renewal',
  'Uses the API daily from their data team','Budget cycle ends in September','Reports to the CFO',
  'Referred two other companies','Asked for SSO before rolling out to more users','Escalated once to a manager',
  'Responds fastest on Tuesday mornings','Signed a two-year contract','Needs invoices in EUR']),
('status', array['Active customer, no open tickets','Waiting on a quote','Open ticket about a delivery',
  'Evaluating a renewal','Trial running, 9 days left','Negotiating volume pricing','Onboarding new users',
  'No reply to the last two emails','Refund in progress','Ready to sign, waiting on legal']),
('tone', array['Professional, emphasise value and reliability','Warm and brief','Apologetic, then concrete next steps',
  'Direct, with numbers','Friendly, low pressure','Formal; copy procurement on every email']),
('risk', array['Two complaints in the last month','Usage dropped 40 % since last quarter','Asked about cancellation terms',
  'Champion left the company','Late on the last two invoices','Mentioned a cheaper competitor']),
('opportunity', array['Mentioned scaling up','Positive recent interactions','Asked about the enterprise tier',
  'New budget approved','Expanding to a second region','Referred a partner']);

-- Contacts ------------------------------------------------------------------------------------
\echo '== contacts (100,000)'
create unlogged table bench.contact_stage as
select s.*,
       row_number() over (order by random()) as rk  -- a random global rank: who gets many interactions
from (
  select r.tenant_id, r.tenant_n, r.seq, gen_random_uuid() as id, r.first, r.last, r.company,
         case when r.r_mail < 0.3 then w_free.items[1 + floor(r.r_dom * 6)::int]
              when r.company is null then 'mail.example.org'
              else regexp_replace(lower(r.company), '[^a-z]+', '-', 'g') || '.example.com' end as domain,
         case when r.r_stage < 0.35 then 'prospect' when r.r_stage < 0.50 then 'qualified'
              when r.r_stage < 0.60 then 'opportunity' when r.r_stage < 0.88 then 'customer'
              when r.r_stage < 0.93 then 'churning' when r.r_stage < 0.98 then 'lost' else 'recovered' end as stage,
         r.r_ctx < 0.6 as has_context
  from (
    select t.id as tenant_id, t.n as tenant_n, g as seq,
           w_first.items[1 + floor(random() * 50)::int] as first,
           w_last.items[1 + floor(random() * 50)::int] as last,
           case when random() < 0.85 then w_ca.items[1 + floor(random() * 30)::int] || ' ' || w_cb.items[1 + floor(random() * 20)::int] end as company,
           random() as r_mail, random() as r_dom, random() as r_stage, random() as r_ctx
    from bench.tenant_plan t
    cross join lateral generate_series(1, t.contacts) g
    cross join (select items from bench.words where kind = 'first') w_first
    cross join (select items from bench.words where kind = 'last') w_last
    cross join (select items from bench.words where kind = 'company_a') w_ca
    cross join (select items from bench.words where kind = 'company_b') w_cb
    offset 0
  ) r
  cross join (select items from bench.words where kind = 'free_mail') w_free
) s;
create unique index on bench.contact_stage (rk);

insert into cortex.contacts (tenant_id, id, email, name, company_name, phone, stage, source, owner_agent,
                             tags, custom_fields, converted_at, created_at, updated_at)
select s.tenant_id, s.id,
       lower(translate(s.first || '.' || s.last, 'üéèáóñ', 'ueeaon')) || '.' || s.seq || '@' || s.domain,
       s.first || ' ' || s.last, s.company,
       -- A phone belongs to one contact of a tenant: seq x 7919 (a prime) mod 10^7 never repeats.
       case when random() < 0.4 then '+49 30 ' || lpad(((s.seq::bigint * 7919) % 10000000)::text, 7, '0') end,
       s.stage,
       w_src.items[1 + floor(random() * 8)::int],
       (array['luna', 'mia', 'anna', 'jasper', null])[1 + floor(random() * 5)::int],
       -- 0-3 tags; correlated with the row (s.id) so the subquery runs per row
       array(select t from unnest(w_tag.items) t where s.id is not null order by random()
             limit floor(random() * 4)::int),
       jsonb_build_object('plan', (array['starter', 'team', 'business', 'enterprise'])[1 + floor(random() * 4)::int],
                          'seats', 1 + floor(random() * 200)::int),
       case when s.stage in ('customer', 'churning', 'recovered') then now() - random() * interval '300 days' end,
       now() - interval '365 days' - random() * interval '200 days',
       now() - random() * interval '30 days'
from bench.contact_stage s
cross join (select items from bench.words where kind = 'source') w_src
cross join (select items from bench.words where kind = 'tag') w_tag
order by s.tenant_n, s.seq;

-- Interactions --------------------------------------------------------------------------------
-- Contact k (by random rank) gets about 1M * ((k/N)^(2/3) - ((k-1)/N)^(2/3)) interactions: a few
-- contacts have hundreds (level 3 histories), the least active still have a handful.
\echo '== interactions (1,000,000), staged'
create unlogged table bench.interaction_stage as
with picks as materialized (
  select g, 1 + floor((select count(*) from bench.contact_stage) * power(random(), 1.5))::int as rk,
         random() as r_agent, random() as r_type, random() as r_sent, random() as r_intent,
         random() as r_topic, random() as r_outcome, random() as r_thread, random() as r_when,
         random() as r_len
  from generate_series(1, greatest(1, round(1000000 * :scale))::int) g
), typed as (
  select p.*, c.tenant_id, c.id as contact_id, c.first,
         case when p.r_agent < 0.30 then 'luna' when p.r_agent < 0.55 then 'mia' when p.r_agent < 0.78 then 'anna'
              when p.r_agent < 0.98 then 'jasper' else 'human' end as agent,
         case when p.r_type < 0.25 then 'email_sent' when p.r_type < 0.50 then 'email_received'
              when p.r_type < 0.58 then 'call' when p.r_type < 0.68 then 'note'
              when p.r_type < 0.75 then 'ticket_opened' when p.r_type < 0.81 then 'ticket_resolved'
              when p.r_type < 0.87 then 'order_placed' when p.r_type < 0.88 then 'refund_processed'
              when p.r_type < 0.94 then 'nudge_sent' when p.r_type < 0.97 then 'sequence_started'
              else 'sequence_completed' end as type,
         replace(w_topic.items[1 + floor(p.r_topic * 30)::int], '#N', '#' || (10000 + (p.g % 89999))) as topic,
         w_out.items[1 + floor(p.r_outcome * 20)::int] as outcome
  from picks p
  join bench.contact_stage c on c.rk = p.rk
  cross join (select items from bench.words where kind = 'topic') w_topic
  cross join (select items from bench.words where kind = 'outcome') w_out
)
select t.tenant_id, t.contact_id, t.agent, t.type,
       case when t.agent = 'human' then 'rep-' || (1 + t.g % 25) end as human_id,
       case when t.type in ('email_sent', 'nudge_sent', 'sequence_started', 'sequence_completed',
                            'ticket_resolved', 'refund_processed') then 'outbound'
            when t.type in ('email_received', 'ticket_opened', 'order_placed') then 'inbound'
            when t.type = 'call' then (array['inbound', 'outbound'])[1 + (t.g % 2)] end as direction,
       case when t.type <> 'note' then (case when t.r_thread < 0.5 then 'Re: ' else '' end) || initcap(left(t.topic, 1)) || substr(t.topic, 2) end as subject,
       -- An email-like body: greeting, the topic, 1-5 filler sentences, the outcome, a signature.
       'Hi ' || t.first || E',\n\n' || 'Following up on ' || t.topic || '. '
         || array_to_string((select array_agg(f) from (
              select f from unnest(w_fill.items) f where t.g is not null order by random()
              limit 1 + floor(t.r_len * 5)::int) s), ' ')
         || ' ' || t.outcome || E'\n\nBest regards,\n' || initcap(t.agent) as raw_content,
       (case t.type when 'email_sent' then 'Sent details on ' when 'email_received' then 'Customer asked about '
          when 'call' then 'Call about ' when 'note' then 'Internal note on ' when 'ticket_opened' then 'Ticket opened about '
          when 'ticket_resolved' then 'Resolved the ticket about ' when 'order_placed' then 'Order placed after discussing '
          when 'refund_processed' then 'Refund processed for ' when 'nudge_sent' then 'Nudged about '
          when 'sequence_started' then 'Nurture sequence started on ' else 'Nurture sequence completed on ' end)
         || t.topic || '. ' || t.outcome as summary,
       array[left(t.topic, 120), left(t.outcome, 120)] as key_points,
       case when t.type = 'ticket_opened' and t.r_sent < 0.5 then 'negative'
            when t.r_sent < 0.35 then 'positive' when t.r_sent < 0.80 then 'neutral'
            when t.r_sent < 0.95 then 'negative' else 'escalation' end as sentiment,
       case t.type when 'ticket_opened' then 'complaint' when 'ticket_resolved' then 'complaint_resolved'
         when 'order_placed' then 'purchase_intent' when 'refund_processed' then 'complaint_resolved'
         when 'email_received' then (array['question', 'info_request', 'purchase_intent', 'scheduling', 'feedback',
                                           'complaint', 'churn_risk', 'question', 'info_request', 'other'])[1 + floor(t.r_intent * 10)::int]
         else (array['other', 'info_request', 'scheduling', 'feedback'])[1 + floor(t.r_intent * 4)::int] end as intent,
       case when t.type <> 'note' then 'thr_' || t.rk || '_' || floor(t.r_thread * 4)::int end as thread_id,
       now() - t.r_when * interval '365 days' as created_at
from typed t
cross join (select items from bench.words where kind = 'filler') w_fill;

\echo '== interactions, loaded (in time order, as they would arrive)'
insert into cortex.interactions (tenant_id, contact_id, agent, human_id, type, direction, subject, raw_content,
                                 summary, key_points, sentiment, intent, thread_id, token_count,
                                 analysis_status, analysis_model, analysed_at, created_at)
select s.tenant_id, s.contact_id, s.agent, s.human_id, s.type, s.direction, s.subject, s.raw_content,
       s.summary, s.key_points, s.sentiment, s.intent, s.thread_id,
       ceil((length(s.raw_content) + length(s.summary)) / 4.0)::int,
       'done', 'local-summariser-v1', s.created_at + interval '2 seconds', s.created_at
from bench.interaction_stage s
order by s.created_at;

\echo '== contact counters (one update from an aggregate)'
update cortex.contacts c set
  interaction_count = a.n, first_touch_at = a.first_at, last_touch_at = a.last_at, last_touch_agent = a.last_agent
from (
  select i.tenant_id, i.contact_id, count(*)::int as n, min(i.created_at) as first_at, max(i.created_at) as last_at,
         (array_agg(i.agent order by i.created_at desc))[1] as last_agent
  from cortex.interactions i
  group by i.tenant_id, i.contact_id
) a
where c.tenant_id = a.tenant_id and c.id = a.contact_id;

-- Working context for ~60 % of the contacts, fresh (generated in the last 12 h, at the current count)
\echo '== working context (~60 % of contacts)'
insert into cortex.contact_context (tenant_id, contact_id, summary, key_facts, current_status, recommended_tone,
                                    open_threads, churn_risk_score, upsell_potential_score, risk_factors,
                                    opportunity_factors, interaction_count_at_generation, generated_at,
                                    token_count, model)
select x.tenant_id, x.contact_id, x.summary, x.key_facts, x.current_status, x.recommended_tone, x.open_threads,
       x.churn, x.upsell, x.risk_factors, x.opportunity_factors, x.interaction_count, x.generated_at,
       ceil((length(x.summary) + length(array_to_string(x.key_facts, ' '))) / 4.0)::int + 40,
       'local-summariser-v1'
from (
  select c.tenant_id, c.id as contact_id, c.interaction_count,
         c.name || coalesce(' works at ' || c.company_name, '') || ' and is '
           || (case c.stage when 'prospect' then 'a prospect' when 'qualified' then 'a qualified lead'
                 when 'opportunity' then 'an open sales opportunity' when 'customer' then 'a customer'
                 when 'churning' then 'a customer at risk of churning' when 'lost' then 'a lost customer'
                 else 'a recovered customer' end)
           || ', in touch since ' || to_char(c.first_touch_at, 'FMMonth YYYY') || ' (' || c.interaction_count
           || ' interactions). Conversations were mostly about ' || w_topic.items[1 + floor(random() * 30)::int]
           || ' and ' || w_topic.items[1 + floor(random() * 30)::int] || '. '
           || w_out.items[1 + floor(random() * 20)::int] || ' ' || w_out.items[1 + floor(random() * 20)::int]
           || ' Last touch by ' || coalesce(c.last_touch_agent, 'nobody') || ' on '
           || to_char(c.last_touch_at, 'FMDD Mon YYYY') || '.' as summary,
         array(select f from unnest(w_fact.items) f where c.id is not null order by random()
               limit 3 + floor(random() * 4)::int) as key_facts,
         w_status.items[1 + floor(random() * 10)::int] as current_status,
         w_tone.items[1 + floor(random() * 6)::int] as recommended_tone,
         coalesce((select jsonb_agg(jsonb_build_object('thread_id', 'thr_' || s.rk || '_' || k, 'topic', t,
                                                        'since', to_char(c.last_touch_at, 'YYYY-MM-DD')))
                   -- 0-2 open threads; the filter (not the series) is random: a function scan
                   -- without outer references is computed once and replayed for every row.
                   from (select k, w_topic.items[1 + floor(random() * 30)::int] as t
                         from generate_series(1, 2) k where c.id is not null and random() < 0.3) th), '[]') as open_threads,
         round((case when c.stage in ('churning', 'lost') then 0.5 + random() * 0.5 else random() * 0.5 end)::numeric, 2) as churn,
         round((case when c.stage in ('customer', 'opportunity') then 0.3 + random() * 0.7 else random() * 0.6 end)::numeric, 2) as upsell,
         array(select f from unnest(w_risk.items) f where c.id is not null order by random() limit floor(random() * 3)::int) as risk_factors,
         array(select f from unnest(w_opp.items) f where c.id is not null order by random() limit floor(random() * 3)::int) as opportunity_factors,
         now() - random() * interval '12 hours' as generated_at
  from cortex.contacts c
  join bench.contact_stage s on s.tenant_id = c.tenant_id and s.id = c.id and s.has_context
  cross join (select items from bench.words where kind = 'topic') w_topic
  cross join (select items from bench.words where kind = 'outcome') w_out
  cross join (select items from bench.words where kind = 'fact') w_fact
  cross join (select items from bench.words where kind = 'status') w_status
  cross join (select items from bench.words where kind = 'tone') w_tone
  cross join (select items from bench.words where kind = 'risk') w_risk
  cross join (select items from bench.words where kind = 'opportunity') w_opp
  where c.interaction_count > 0
) x;

\echo '== rendered context levels 0-2 (what get_context reads), one render per contact'
alter table cortex.contacts enable trigger contacts_render_context;
alter table cortex.interactions enable trigger interactions_render_context;
alter table cortex.contact_context enable trigger contact_context_render_context;
do $$
declare r record;
begin
  for r in select tenant_id, id from cortex.contacts order by tenant_id, id loop
    perform cortex.render_context_levels(r.tenant_id, r.id);
  end loop;
end $$;

\echo '== clean up staging, vacuum and analyze'
drop table bench.interaction_stage, bench.contact_stage, bench.words, bench.tenant_plan;
vacuum (analyze) cortex.contacts;
vacuum (analyze) cortex.interactions;
vacuum (analyze) cortex.contact_context;
vacuum (analyze) cortex.context_levels;
analyze cortex.tenants;
analyze cortex.agents;
analyze cortex.agent_keys;
analyze cortex.agent_config;
analyze cortex.model_prices;
analyze cortex.jobs;
analyze cortex.token_usage;

insert into bench.meta (key, value)
select 'tenants', count(*)::text from cortex.tenants
union all select 'contacts', count(*)::text from cortex.contacts
union all select 'interactions', count(*)::text from cortex.interactions
union all select 'contact_context', count(*)::text from cortex.contact_context
union all select 'scale', :'scale'
union all select 'context_levels', count(*)::text from cortex.context_levels
union all select 'generated_at', to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
union all select 'database_size', pg_size_pretty(pg_database_size(current_database()))
-- Written last: a database without it is an interrupted generation and is built again.
union all select 'complete', 'true';
select key, value from bench.meta order by key;
