-- Benchmark data set for coordination (issue 4): budgets and handoffs.
--   10 tenants, 25 agents each (luna, mia, anna, jasper, the read-only monitor helios and 20 more)
--   plus each tenant's system agent; 50,000 contacts; 250,000 interactions and working context for
--   ~60 % of the contacts (the material a handoff briefing is written from); 10,000,000 token_usage
--   rows over 90 days (the usage_daily rollup kept by the real triggers); 1,000,000 handoffs over
--   90 days (~5 % pending) with their audit trail.
--
-- Run with psql against a freshly created and migrated database named cortex_bench_coord*
-- (scripts/bench_coordination.py --regenerate drops, recreates and migrates it first):
--   psql -X -v ON_ERROR_STOP=1 -f sql/bench/generate_coordination.sql postgresql://.../cortex_bench_coord
-- Sizes can be scaled down for a quick try: -v contacts=5000 -v interactions=25000
--   -v usage_rows=1000000 -v handoffs=100000.
--
-- Everything is set-based (insert ... select over generate_series); random choices come from small
-- arrays indexed by random(), seeded so two runs produce the same shapes. Staging tables are
-- unlogged. The real tables keep all their indexes, checks, foreign keys and triggers, with one
-- documented exception: the historical handoffs (see there).

\set ON_ERROR_STOP on
\timing on
\if :{?contacts} \else \set contacts 50000 \endif
\if :{?interactions} \else \set interactions 250000 \endif
\if :{?usage_rows} \else \set usage_rows 10000000 \endif
\if :{?handoffs} \else \set handoffs 1000000 \endif

do $$
begin
  if current_database() not like 'cortex\_bench\_coord%' then
    raise exception 'generate_coordination.sql only runs in a database named cortex_bench_coord*, not %',
      current_database();
  end if;
  -- The handoff audit trail refuses TRUNCATE by design, so the data set is built only once per
  -- database: the Python driver drops and recreates the database to regenerate.
  if exists (select from cortex.tenants) then
    raise exception 'cortex_bench_coord already holds data; regenerate with scripts/bench_coordination.py --regenerate';
  end if;
end $$;

-- Session settings only (the server's configuration is left alone).
set work_mem = '256MB';
set maintenance_work_mem = '512MB';
set synchronous_commit = off;
set client_min_messages = warning;
set jit = off;
select setseed(0.20261122);

drop schema if exists bench cascade;
create schema bench;
comment on schema bench is 'Benchmark bookkeeping (run metadata, generation stages); never exists outside cortex_bench_coord.';
create table bench.meta (key text primary key, value text not null);
-- Wall-clock start of each generation stage (the report shows where the time went).
create table bench.stages (stage text primary key, started_at timestamptz not null default clock_timestamp());
insert into bench.meta values ('planned_contacts', :'contacts'), ('planned_interactions', :'interactions'),
  ('planned_usage_rows', :'usage_rows'), ('planned_handoffs', :'handoffs');

-- Tenants and agents ------------------------------------------------------------------------
\echo '== tenants and agents'
insert into bench.stages (stage) values ('tenants and agents');
-- share: the tenant's part of every volume (contacts, interactions, usage, handoffs).
create unlogged table bench.tenant_plan (n int primary key, slug text not null, name text not null,
                                         time_zone text not null, share float8 not null, contacts int, id uuid);
insert into bench.tenant_plan (n, slug, name, time_zone, share) values
  (1, 'northwind', 'Northwind Traders', 'Europe/Berlin', 0.40),
  (2, 'globex', 'Globex Corporation', 'America/New_York', 0.15),
  (3, 'initech', 'Initech', 'America/Chicago', 0.10),
  (4, 'umbrella', 'Umbrella Health', 'Europe/London', 0.08),
  (5, 'hooli', 'Hooli', 'America/Los_Angeles', 0.07),
  (6, 'stark', 'Stark Supplies', 'Europe/Paris', 0.06),
  (7, 'wayne', 'Wayne Logistics', 'America/Denver', 0.05),
  (8, 'tyrell', 'Tyrell Robotics', 'Asia/Tokyo', 0.04),
  (9, 'soylent', 'Soylent Foods', 'Australia/Sydney', 0.03),
  (10, 'wonka', 'Wonka Sweets', 'Europe/Zurich', 0.02);
update bench.tenant_plan set contacts = round(:contacts * share)::int,
                             id = cortex.create_tenant(name, slug, time_zone);

-- k: the agent's number. usage_w: share of the tenant's model calls; send_w / recv_w: weights as
-- sender / receiver of handoffs (0: never). wk: position among the writing agents (handoff picks).
create unlogged table bench.agent_plan (k int primary key, name text not null, display_name text not null,
                                        role text not null, read_only boolean not null, usage_w float8 not null,
                                        send_w int not null, recv_w int not null, wk int);
insert into bench.agent_plan (k, name, display_name, role, read_only, usage_w, send_w, recv_w) values
  (1, 'luna', 'Luna (support)', 'agent', false, 12, 16, 12),
  (2, 'mia', 'Mia (success)', 'agent', false, 10, 10, 12),
  (3, 'anna', 'Anna (outreach)', 'agent', false, 10, 16, 6),
  (4, 'jasper', 'Jasper (sales)', 'agent', false, 9, 8, 14),
  (5, 'helios', 'Helios (monitor)', 'monitor', true, 2, 0, 0),
  (6, 'nova', 'Nova (renewals)', 'agent', false, 3, 2, 3),
  (7, 'orion', 'Orion (billing)', 'agent', false, 3, 2, 3),
  (8, 'vega', 'Vega (onboarding)', 'agent', false, 3, 2, 3),
  (9, 'iris', 'Iris (EMEA support)', 'agent', false, 3, 3, 3),
  (10, 'atlas', 'Atlas (logistics)', 'agent', false, 3, 2, 3),
  (11, 'echo', 'Echo (social)', 'agent', false, 2, 3, 2),
  (12, 'sage', 'Sage (enterprise)', 'agent', false, 3, 2, 4),
  (13, 'piper', 'Piper (SMB sales)', 'agent', false, 3, 3, 3),
  (14, 'quinn', 'Quinn (retention)', 'agent', false, 3, 2, 4),
  (15, 'rex', 'Rex (returns)', 'agent', false, 2, 2, 2),
  (16, 'juno', 'Juno (partners)', 'agent', false, 2, 2, 2),
  (17, 'milo', 'Milo (events)', 'agent', false, 2, 3, 2),
  (18, 'zara', 'Zara (APAC support)', 'agent', false, 3, 3, 3),
  (19, 'kai', 'Kai (technical)', 'agent', false, 3, 2, 4),
  (20, 'theo', 'Theo (procurement)', 'agent', false, 2, 2, 2),
  (21, 'ruby', 'Ruby (nurture)', 'agent', false, 2, 4, 1),
  (22, 'finn', 'Finn (collections)', 'agent', false, 2, 2, 2),
  (23, 'ada', 'Ada (data requests)', 'agent', false, 2, 1, 2),
  (24, 'leo', 'Leo (upsell)', 'agent', false, 2, 2, 3),
  (25, 'ivy', 'Ivy (quality)', 'agent', false, 2, 1, 2),
  -- Created with the tenant: Cortex's own work (interaction analysis, context generation).
  (26, 'system', 'Cortex system', 'admin', false, 10, 0, 0);
update bench.agent_plan a set wk = w.wk
from (select k, row_number() over (order by k)::int as wk from bench.agent_plan where send_w > 0 or recv_w > 0) w
where w.k = a.k;

select count(*) as agents_created from (
  select cortex.create_agent(t.id, a.name, a.display_name, a.role, a.read_only, 2000)
  from bench.tenant_plan t cross join bench.agent_plan a where a.name <> 'system'
) s;

-- Small constant arrays (kept inline, so indexing them per row is cheap).
create unlogged table bench.words (kind text primary key, items text[] not null);
create unlogged table bench.slots (kind text primary key, items int[] not null);
insert into bench.words
select 'writer', array_agg(name order by wk) from bench.agent_plan where wk is not null
union all
select 'agent', array_agg(name order by k) from bench.agent_plan where k <= 25;
-- Weighted picks: a weight-w agent appears w times (positions into 'writer').
insert into bench.slots
select 'send', array_agg(a.wk order by a.wk) from bench.agent_plan a cross join lateral generate_series(1, a.send_w) g
union all
select 'recv', array_agg(a.wk order by a.wk) from bench.agent_plan a cross join lateral generate_series(1, a.recv_w) g;

insert into bench.words values
('first', array['Maria','John','Aisha','Liam','Sofia','Noah','Emma','Lukas','Chen','Priya','Mateo','Olivia',
  'Yuki','Ahmed','Hannah','Pierre','Elena','Jonas','Fatima','Diego','Grace','Ivan','Zoe','Omar','Clara',
  'Rahul','Isabel','Felix','Mei','Tom','Lea','Carlos','Nina','Samuel','Anya','Ethan','Chloe','Marco',
  'Sara','Daniel','Ingrid','Kofi','Lucia','Henrik','Amara','Paul','Julia','Kenji','Rosa','Victor']),
('last', array['Smith','Garcia','Mueller','Khan','Rossi','Kowalski','Nguyen','Johansson','Dubois','Silva',
  'Tanaka','Okafor','Schmidt','Brown','Martin','Novak','Haddad','Fischer','Lopez','Andersen','Wright',
  'Kim','Petrov','Costa','Weber','Hughes','Moreau','Yilmaz','Bianchi','Fernandes','Clarke','Sato','Meyer',
  'Ivanova','Lindqvist','Oduya','Russo','Walsh','Becker','Chowdhury','Evans','Laurent','Horvat','Reyes',
  'Jensen','Patel','Santos','Keller','Murphy','Wagner']),
('company_a', array['Acme','Blue Ridge','Northstar','Pioneer','Summit','Evergreen','Silverline','Redwood',
  'Brightpath','Ironclad','Lakeside','Crescent','Nimbus','Quantum','Harbor','Keystone','Atlas','Vertex',
  'Sunrise','Falcon','Granite','Meridian','Orchid','Polaris','Cobalt','Juniper','Beacon','Canyon','Aurora','Sterling']),
('company_b', array['Corp','Logistics','Foods','Health','Labs','Retail','Manufacturing','Analytics','Energy',
  'Systems','Outfitters','Pharma','Media','Robotics','Textiles','Hospitality','Motors','Software','Builders','Partners']),
('stage', array['prospect','prospect','prospect','qualified','qualified','opportunity','customer','customer',
  'customer','customer','customer','churning','lost','recovered']),
('source', array['website','referral','webinar','outbound','trade_show','import','partner','chat']),
('topic', array['bulk pricing for 500 units','a shipping delay on order #N','the renewal of the annual plan',
  'single sign-on for their team','an invoice that was charged twice','the API rate limits',
  'onboarding for three new users','a damaged delivery on order #N','upgrading to the enterprise tier',
  'data export to their warehouse','a discount for a two-year commitment','a missing item in order #N',
  'GDPR and data residency in the EU','a refund for order #N','a slow support response last week',
  'integrating with their CRM','training sessions for the sales team','a replacement part for order #N',
  'switching from a competitor','the quarterly business review','a security questionnaire',
  'payment terms of 60 days','a pilot with two departments','a reorder of 2,000 units','cancelling the subscription']),
('outcome', array['Customer thanked the team for the quick reply.','A follow-up call is booked for next week.',
  'They want a written quote by Friday.','Issue escalated to the logistics partner.',
  'Customer is comparing us with two other vendors.','They confirmed the budget is approved.',
  'Customer sounded frustrated about the delay.','Resolved on first contact.',
  'Waiting for their procurement team to sign off.','They asked for a case study from their industry.',
  'Customer will decide after the board meeting.','Sent the documentation they asked for.',
  'Refund approved and confirmed by email.','No reply yet; nudge scheduled.',
  'Customer threatened to cancel if it happens again.','Agreed on a trial extension of 14 days.']),
('fact', array['Makes the buying decisions for the team','Price-conscious, asked about discounts twice',
  'Prefers email over phone calls','Had a shipping issue, resolved the same day',
  'Hinted at ordering 2,000 units per quarter','Compares us with a competitor every renewal',
  'Uses the API daily from their data team','Budget cycle ends in September','Reports to the CFO',
  'Asked for SSO before rolling out to more users','Escalated once to a manager','Needs invoices in EUR']),
('status', array['Active customer, no open tickets','Waiting on a quote','Open ticket about a delivery',
  'Evaluating a renewal','Trial running, 9 days left','Negotiating volume pricing','Onboarding new users',
  'No reply to the last two emails','Refund in progress','Ready to sign, waiting on legal']),
('tone', array['Professional, emphasise value and reliability','Warm and brief','Apologetic, then concrete next steps',
  'Direct, with numbers','Friendly, low pressure','Formal; copy procurement on every email']),
-- Handoff reasons with their weights (out of 100) and the words used in texts.
('reason', array['warm_reply','warm_reply','escalation','complex_question','upsell_opportunity','churn_risk',
  'completed_sequence','customer_request','warm_reply','escalation','complex_question','upsell_opportunity',
  'customer_request','complex_question','churn_risk','other']),
('detail_warm_reply', array['Replied to the third nurture email and asked for a call with sales.',
  'Answered our follow-up within an hour and wants pricing for {Q} seats.',
  'Opened the last four emails and replied asking about a pilot.',
  'Came back after two months of silence and asked about the new plans.']),
('detail_escalation', array['Delivery for order #{O} is late for the third time; the customer asked for a manager.',
  'Invoice INV-{O} was charged twice and the refund has not arrived after ten days.',
  'Customer is furious about the outage yesterday and threatens to cancel.',
  'Damaged goods on order #{O}; the customer wants a replacement shipped today.']),
('detail_complex_question', array['Asks whether our EU data residency covers their backups and logs.',
  'Needs a technical answer on SSO with their Azure AD tenant before rolling out.',
  'Wants a custom export of {Q} records into their warehouse every night.',
  'Asked how our API rate limits apply to batch imports of {Q} contacts.']),
('detail_upsell_opportunity', array['Mentioned expanding to two more regions next quarter.',
  'Usage grew 40 % in three months; they asked about the enterprise tier.',
  'Procurement approved a budget for {Q} more seats.',
  'Asked for a quote for a two-year commitment with volume discount.']),
('detail_churn_risk', array['Usage dropped by half since last quarter and the champion left the company.',
  'Asked about cancellation terms and compared us with a cheaper competitor.',
  'Two complaints in the last month and no reply to our renewal email.',
  'Late on the last two invoices and asked to downgrade.']),
('detail_completed_sequence', array['Finished the five-step onboarding sequence without replying.',
  'Completed the trial nurture sequence; engaged with the pricing email twice.',
  'Reached the end of the re-activation sequence; opened every email.',
  'Finished the webinar follow-up sequence and clicked the demo link.']),
('detail_customer_request', array['Asked explicitly to talk to a person about the contract.',
  'Wants a call with their account manager before the renewal on Friday.',
  'Requested a human to review the refund for order #{O}.',
  'Asked to be contacted by phone instead of email from now on.']),
('detail_other', array['Needs a decision on an exception to our standard terms.',
  'Partner referral that does not fit any sequence.',
  'Legal asked for a signed data processing agreement.',
  'Duplicate account merge requested by the customer.']),
-- Two suggested actions per reason, in the order of cortex.handoff_reasons().
('action', array['Call {F} today and agree on a time for the demo they asked for.',
  'Send {F} the pricing for the seats they mentioned and propose a call.',
  'Apologise to {F}, confirm the replacement or refund and share the tracking number.',
  'Call {F} within the hour, acknowledge the problem and give a concrete resolution date.',
  'Answer {F}''s technical question with the setup guide and offer a call with an engineer.',
  'Reply to {F} with a written answer and loop in the product specialist.',
  'Send {F} a quote for the enterprise tier with the volume discount.',
  'Book an expansion call with {F} and prepare their usage report.',
  'Call {F} this week, review their usage and offer a retention plan.',
  'Escalate {F}''s account to the account manager and prepare a renewal offer.',
  'Check in with {F} personally and offer a short onboarding call.',
  'Send {F} a personal note with the case study from their industry.',
  'Call {F} at the time they asked for and confirm the contract details.',
  'Reply to {F} today and set up the call with their account manager.',
  'Review the request and decide on the exception for {F} by Friday.',
  'Look into {F}''s request and reply within 24 hours.']),
('reject_note', array['Not my territory, please route to the regional team.','Customer already handled by billing.',
  'Duplicate of an open handoff.','Needs a human decision, not an agent.']);

-- Contacts ----------------------------------------------------------------------------------------
\echo '== contacts'
insert into bench.stages (stage) values ('contacts');
-- seq numbers the contacts within their tenant (the picks below address them by seq).
create unlogged table bench.contact_map as
select s.tenant_id, s.tenant_n, s.seq, gen_random_uuid() as id, s.first, s.last, s.company, s.stage
from (
  select t.id as tenant_id, t.n as tenant_n, g as seq,
         w_first.items[1 + floor(random() * 50)::int] as first,
         w_last.items[1 + floor(random() * 50)::int] as last,
         case when random() < 0.85 then w_ca.items[1 + floor(random() * 30)::int] || ' '
                                        || w_cb.items[1 + floor(random() * 20)::int] end as company,
         w_stage.items[1 + floor(random() * 14)::int] as stage
  from bench.tenant_plan t
  cross join lateral generate_series(1, t.contacts) g
  cross join (select items from bench.words where kind = 'first') w_first
  cross join (select items from bench.words where kind = 'last') w_last
  cross join (select items from bench.words where kind = 'company_a') w_ca
  cross join (select items from bench.words where kind = 'company_b') w_cb
  cross join (select items from bench.words where kind = 'stage') w_stage
  offset 0
) s;
alter table bench.contact_map add primary key (tenant_n, seq);

insert into cortex.contacts (tenant_id, id, email, name, company_name, stage, source, owner_agent, tags,
                             custom_fields, converted_at, created_at, updated_at)
select m.tenant_id, m.id,
       lower(m.first || '.' || m.last) || '.' || m.seq || '@'
         || coalesce(regexp_replace(lower(m.company), '[^a-z]+', '-', 'g') || '.example.com', 'mail.example.org'),
       m.first || ' ' || m.last, m.company, m.stage,
       w_src.items[1 + floor(random() * 8)::int],
       w_agent.items[1 + floor(random() * 4)::int],
       case when random() < 0.3 then array['vip'] else '{}' end,
       jsonb_build_object('plan', (array['starter', 'team', 'business', 'enterprise'])[1 + floor(random() * 4)::int]),
       case when m.stage in ('customer', 'churning', 'recovered') then now() - random() * interval '300 days' end,
       now() - interval '120 days' - random() * interval '300 days',
       now() - random() * interval '30 days'
from bench.contact_map m
cross join (select items from bench.words where kind = 'source') w_src
cross join (select items from bench.words where kind = 'agent') w_agent
order by m.tenant_n, m.seq;

-- Interactions (the material of a handoff briefing) -----------------------------------------------
\echo '== interactions'
insert into bench.stages (stage) values ('interactions');
insert into cortex.interactions (tenant_id, contact_id, agent, type, direction, subject, raw_content, summary,
                                 key_points, sentiment, intent, thread_id, token_count, analysis_status,
                                 analysis_model, analysed_at, created_at)
select x.tenant_id, x.contact_id, x.agent, x.type,
       case when x.type in ('email_sent', 'nudge_sent') then 'outbound' else 'inbound' end,
       initcap(left(x.topic, 1)) || substr(x.topic, 2),
       'Hi ' || x.first || E',\n\nFollowing up on ' || x.topic || '. ' || x.outcome || E'\n\nBest regards,\n' || initcap(x.agent),
       (case x.type when 'email_sent' then 'Sent details on ' when 'email_received' then 'Customer asked about '
          when 'call' then 'Call about ' when 'ticket_opened' then 'Ticket opened about ' else 'Nudged about ' end)
         || x.topic || '. ' || x.outcome,
       array[left(x.topic, 120), left(x.outcome, 120)],
       (array['positive', 'neutral', 'neutral', 'negative', 'escalation'])[1 + floor(x.r_sent * 5)::int],
       (array['question', 'info_request', 'purchase_intent', 'scheduling', 'feedback', 'complaint', 'other'])[1 + floor(x.r_intent * 7)::int],
       'thr_' || x.tenant_n || '_' || x.seq || '_' || floor(x.r_thread * 3)::int,
       ceil(length(x.topic || x.outcome) / 4.0)::int + 30,
       'done', 'local-summariser-v1', x.created_at + interval '2 seconds', x.created_at
from (
  select p.*, m.tenant_id, m.id as contact_id, m.first,
         w_agent.items[1 + floor(p.r_agent * 25)::int] as agent,
         (array['email_received', 'email_received', 'email_sent', 'call', 'ticket_opened', 'nudge_sent'])[1 + floor(p.r_type * 6)::int] as type,
         replace(w_topic.items[1 + floor(p.r_topic * 25)::int], '#N', '#' || (10000 + p.g % 89999)) as topic,
         w_out.items[1 + floor(p.r_out * 16)::int] as outcome
  from (
    select t.n as tenant_n, 1 + floor(t.contacts * power(random(), 1.5))::int as seq, g,
           random() as r_agent, random() as r_type, random() as r_topic, random() as r_out, random() as r_sent,
           random() as r_intent, random() as r_thread, now() - random() * interval '90 days' as created_at
    from bench.tenant_plan t cross join lateral generate_series(1, round(:interactions * t.share)::int) g
    offset 0
  ) p
  join bench.contact_map m on m.tenant_n = p.tenant_n and m.seq = p.seq
  cross join (select items from bench.words where kind = 'agent') w_agent
  cross join (select items from bench.words where kind = 'topic') w_topic
  cross join (select items from bench.words where kind = 'outcome') w_out
) x
where x.agent <> 'helios'
order by x.created_at;

update cortex.contacts c set
  interaction_count = a.n, first_touch_at = a.first_at, last_touch_at = a.last_at, last_touch_agent = a.last_agent
from (
  select i.tenant_id, i.contact_id, count(*)::int as n, min(i.created_at) as first_at, max(i.created_at) as last_at,
         (array_agg(i.agent order by i.created_at desc))[1] as last_agent
  from cortex.interactions i group by i.tenant_id, i.contact_id
) a
where c.tenant_id = a.tenant_id and c.id = a.contact_id;

\echo '== working context (~60 % of the contacts with interactions)'
insert into bench.stages (stage) values ('working context');
insert into cortex.contact_context (tenant_id, contact_id, summary, key_facts, current_status, recommended_tone,
                                    churn_risk_score, upsell_potential_score, interaction_count_at_generation,
                                    generated_at, token_count, model)
select c.tenant_id, c.id,
       c.name || coalesce(' works at ' || c.company_name, '') || ' and is a ' || c.stage || ', in touch since '
         || to_char(c.first_touch_at, 'FMMonth YYYY') || ' (' || c.interaction_count || ' interactions). '
         || 'Conversations were mostly about ' || w_topic.items[1 + floor(random() * 25)::int] || '. '
         || w_out.items[1 + floor(random() * 16)::int],
       array(select f from unnest(w_fact.items) f where c.id is not null order by random() limit 3),
       w_status.items[1 + floor(random() * 10)::int], w_tone.items[1 + floor(random() * 6)::int],
       round(random()::numeric, 2), round(random()::numeric, 2), c.interaction_count,
       now() - random() * interval '12 hours', 180, 'local-summariser-v1'
from cortex.contacts c
cross join (select items from bench.words where kind = 'topic') w_topic
cross join (select items from bench.words where kind = 'outcome') w_out
cross join (select items from bench.words where kind = 'fact') w_fact
cross join (select items from bench.words where kind = 'status') w_status
cross join (select items from bench.words where kind = 'tone') w_tone
where c.interaction_count > 0 and random() < 0.6;

-- Token usage: 10M rows over 90 days ---------------------------------------------------------------
-- Planned per (tenant, agent, day): volume = tenant share x agent share x weekday factor (busier
-- on weekdays) x noise, then expanded with generate_series. Loaded oldest first in ten statements of
-- ~1M rows (9 days each), each sorted by time as the rows would have arrived: every statement fires
-- the rollup triggers once with a ~1M-row transition table. Ids carry a millisecond time prefix so
-- primary-key inserts append instead of touching random pages (a load-speed choice; the API's rows
-- use gen_random_uuid(), and no benchmarked read goes through this key).
\echo '== token usage: plan'
insert into bench.stages (stage) values ('token usage');
create unlogged table bench.usage_plan as
select t.id as tenant_id, t.n as tenant_n, t.contacts, a.name as agent, a.k, d,
       round(:usage_rows::float8 * t.share * a.usage_w / s.total_w / 90
             * case when extract(isodow from now() - d * interval '1 day') >= 6 then 0.625 else 1.15 end
             * (0.8 + 0.4 * random()))::int as n
from bench.tenant_plan t
cross join bench.agent_plan a
cross join (select sum(usage_w) as total_w from bench.agent_plan) s
cross join generate_series(0, 89) d;
create index on bench.usage_plan (d);

\echo '== token usage: 10 statements of ~1M rows, oldest first'
select format($sql$
insert into cortex.token_usage (tenant_id, id, agent, model, operation, input_tokens, output_tokens, cost_usd,
                                contact_id, budget_exceeded, created_at)
select r.tenant_id,
       (lpad(to_hex((extract(epoch from r.created_at) * 1000)::bigint), 12, '0')
        || substr(md5(r.g::text || r.agent || random()::text), 1, 20))::uuid,
       r.agent, r.model, r.operation, r.input_tokens, r.output_tokens,
       -- the default price list (cortex.default_model_prices), per million tokens
       round((r.input_tokens * case r.model when 'claude-haiku-4-5' then 1.0 when 'claude-sonnet-4-5' then 3.0
                                            when 'claude-opus-4-1' then 15.0 else 0 end
              + r.output_tokens * case r.model when 'claude-haiku-4-5' then 5.0 when 'claude-sonnet-4-5' then 15.0
                                               when 'claude-opus-4-1' then 75.0 else 0 end) / 1000000.0, 6),
       m.id, r.refused, r.created_at
from (
  select q.*,
         case q.model when 'claude-haiku-4-5' then (array['analyse_interaction', 'analyse_interaction', 'draft_reply',
                                                         'classify', 'handoff_summary'])[1 + floor(q.r_op * 5)::int]
                      when 'claude-sonnet-4-5' then (array['generate_context', 'draft_reply'])[1 + floor(q.r_op * 2)::int]
                      when 'claude-opus-4-1' then 'escalation_review'
                      else (array['analyse_interaction', 'generate_context'])[1 + floor(q.r_op * 2)::int] end as operation,
         case q.model when 'claude-haiku-4-5' then 300 + floor(power(q.r_in, 2) * 2500)::int
                      when 'claude-sonnet-4-5' then 800 + floor(power(q.r_in, 2) * 6000)::int
                      when 'claude-opus-4-1' then 1500 + floor(q.r_in * 8000)::int
                      else 150 + floor(q.r_in * 1200)::int end as input_tokens,
         case q.model when 'claude-opus-4-1' then 300 + floor(q.r_out * 1500)::int
                      else 40 + floor(power(q.r_out, 2) * 700)::int end as output_tokens
  from (
    select p.*,
           case when p.agent = 'system' then (case when p.r_model < 0.7 then 'local-summariser-v1' else 'claude-haiku-4-5' end)
                when p.r_model < 0.60 then 'claude-haiku-4-5' when p.r_model < 0.75 then 'local-summariser-v1'
                when p.r_model < 0.97 then 'claude-sonnet-4-5' else 'claude-opus-4-1' end as model
    from (
      select u.tenant_id, u.tenant_n, u.agent, g, now() - (u.d + random()) * interval '1 day' as created_at,
             random() as r_model, random() as r_op, random() as r_in, random() as r_out,
             random() < 0.002 as refused,
             case when random() < 0.25 then 1 + floor(u.contacts * random())::int end as contact_seq
      from bench.usage_plan u cross join lateral generate_series(1, u.n) g
      where u.d between %s and %s
      offset 0
    ) p
  ) q
) r
left join bench.contact_map m on m.tenant_n = r.tenant_n and m.seq = r.contact_seq
order by r.created_at
$sql$, c * 9, c * 9 + 8)
from generate_series(9, 0, -1) c
\gexec

-- Budgets: each agent's daily budget is 0.4-2.4 times its average day over the last 30 days, so
-- today's checks give every recommendation (proceed, use_haiku, defer, alert_human).
update cortex.agent_config c set daily_token_budget = greatest(10000,
         least(2000000000, round(a.avg_day * (0.4 + 2.0 * random()))))::int
from (select d.tenant_id, d.agent, sum(d.total_tokens) / 30.0 as avg_day
      from cortex.usage_daily d
      join cortex.tenants t on t.id = d.tenant_id
      where d.day >= (now() at time zone t.time_zone)::date - 30
      group by 1, 2) a
where c.tenant_id = a.tenant_id and c.agent = a.agent;

-- Handoffs: 1M over 90 days ------------------------------------------------------------------------
\echo '== handoffs: staged'
insert into bench.stages (stage) values ('handoffs');
-- Status mix: ~5 % pending (mostly from the last three weeks), ~6 % accepted (in progress),
-- ~74 % completed, ~15 % rejected (60 % straight from pending, 40 % after being accepted).
create unlogged table bench.handoff_stage as
select x.*,
       -- The event times follow the status; nothing lies in the future.
       case when x.status in ('accepted', 'completed') or (x.status = 'rejected' and x.r_rej >= 0.6)
            then greatest(x.created_at, least(x.created_at + interval '2 minutes' + x.r_t1 * interval '4 hours',
                                              now() - interval '1 minute')) end
         as accepted_at
from (
  select p.*, m.id as contact_id, m.first, m.first || ' ' || m.last as contact_name, m.company, m.stage,
         w_writer.items[p.from_wk] as from_agent,
         case when p.r_human < 0.08 then null
              else w_writer.items[case when p.to_wk = p.from_wk then p.to_wk % cardinality(w_writer.items) + 1
                                       else p.to_wk end] end as to_agent,
         case when p.r_human < 0.08 then 'rep-' || (1 + floor(p.r_text * 12)::int) end as to_human_id,
         w_reason.items[1 + floor(p.r_reason * 16)::int] as reason,
         case when p.r_status < 0.05 then 'pending' when p.r_status < 0.11 then 'accepted'
              when p.r_status < 0.85 then 'completed' else 'rejected' end as status,
         case when p.r_status < 0.05 then now() - power(p.r_age, 3) * interval '21 days'
              when p.r_status < 0.11 then now() - power(p.r_age, 2) * interval '10 days'
              else now() - interval '6 hours' - p.r_age * interval '89 days' end as created_at
  from (
    select t.id as tenant_id, t.n as tenant_n, g, 1 + floor(t.contacts * power(random(), 1.3))::int as seq,
           s_send.items[1 + floor(random() * cardinality(s_send.items))::int] as from_wk,
           s_recv.items[1 + floor(random() * cardinality(s_recv.items))::int] as to_wk,
           random() as r_human, random() as r_text, random() as r_reason, random() as r_status, random() as r_age,
           random() as r_urg, random() as r_t1, random() as r_t2, random() as r_rej, random() as r_detail,
           random() as r_action, random() as r_topic, random() as r_out
    from bench.tenant_plan t
    cross join lateral generate_series(1, round(:handoffs * t.share)::int) g
    cross join (select items from bench.slots where kind = 'send') s_send
    cross join (select items from bench.slots where kind = 'recv') s_recv
    offset 0
  ) p
  join bench.contact_map m on m.tenant_n = p.tenant_n and m.seq = p.seq
  cross join (select items from bench.words where kind = 'writer') w_writer
  cross join (select items from bench.words where kind = 'reason') w_reason
) x;

\echo '== handoffs: loaded (history, in time order)'
-- The historical rows carry their final status and timestamps. The guard trigger (new handoffs
-- start pending; status moves stamp now()) would make history impossible, the audit trigger would
-- write one creation row each, and the realtime trigger one pg_notify each (1M messages at commit).
-- So these three triggers are disabled for this one transaction only, the audit trail the guard
-- and audit triggers would have written (creation, accept, completion or rejection) is inserted
-- set-based below, and the triggers are enabled again before commit. Checks, foreign keys and
-- indexes stay on. Handoffs created by the benchmark go through every trigger.
begin;
alter table cortex.handoff_events disable trigger handoff_events_guard,
                                  disable trigger handoff_events_audit,
                                  disable trigger handoff_events_notify_change;

insert into cortex.handoff_events (tenant_id, id, contact_id, from_agent, to_agent, to_human_id, reason,
                                   reason_detail, context_summary, suggested_action, urgency, status, status_note,
                                   accepted_by, accepted_at, completed_at, rejected_at, previous_owner_agent,
                                   metadata, created_at, updated_at)
select h.tenant_id, gen_random_uuid(), h.contact_id, h.from_agent, h.to_agent, h.to_human_id, h.reason, h.detail,
       -- The briefing: who hands whom to whom and why, the stage, the last conversation.
       initcap(h.from_agent) || ' is handing ' || h.contact_name || coalesce(' (' || h.company || ')', '') || ' to '
         || coalesce(h.to_agent, h.to_human_id) || ' — ' || replace(h.reason, '_', ' ') || ': ' || h.detail
         || ' Stage: ' || h.stage || '. Latest: customer asked about '
         || replace(w_topic.items[1 + floor(h.r_topic * 25)::int], '#N', '#' || (10000 + h.g % 89999)) || '. '
         || w_out.items[1 + floor(h.r_out * 16)::int],
       -- A first step that fits the reason (two wordings each).
       replace(w_action.items[2 * (array_position(cortex.handoff_reasons(), h.reason) - 1) + 1 + floor(h.r_action * 2)::int],
               '{F}', h.first),
       h.urgency, h.status,
       case when h.status = 'rejected' then w_note.items[1 + floor(h.r_t2 * 4)::int] end,
       case when h.accepted_at is not null then coalesce(h.to_agent, 'system') end,
       h.accepted_at, h.completed_at, h.rejected_at, h.from_agent, '{}',
       h.created_at, coalesce(h.completed_at, h.rejected_at, h.accepted_at, h.created_at)
from (
  select s.*,
         replace(replace(w_detail.items[1 + floor(s.r_detail * 4)::int], '{O}', (10000 + s.g % 89999)::text),
                 '{Q}', (50 * (1 + s.g % 40))::text) as detail,
         case when s.reason in ('escalation', 'churn_risk')
              then (array['low', 'normal', 'normal', 'high', 'high', 'high', 'urgent', 'urgent'])[1 + floor(s.r_urg * 8)::int]
              else (array['low', 'low', 'low', 'normal', 'normal', 'normal', 'normal', 'normal', 'normal', 'normal',
                          'normal', 'normal', 'normal', 'normal', 'high', 'high', 'high', 'high', 'urgent', 'urgent'])[1 + floor(s.r_urg * 20)::int]
         end as urgency,
         case when s.status = 'completed'
              then least(s.accepted_at + interval '10 minutes' + s.r_t2 * interval '2 days', now()) end as completed_at,
         case when s.status = 'rejected'
              then least(coalesce(s.accepted_at, s.created_at) + interval '5 minutes' + s.r_t2 * interval '8 hours', now())
         end as rejected_at
  from bench.handoff_stage s
  join bench.words w_detail on w_detail.kind = 'detail_' || s.reason
) h
cross join (select items from bench.words where kind = 'topic') w_topic
cross join (select items from bench.words where kind = 'outcome') w_out
cross join (select items from bench.words where kind = 'action') w_action
cross join (select items from bench.words where kind = 'reject_note') w_note
order by h.created_at;

\echo '== handoff audit trail (what the triggers would have written)'
insert into cortex.handoff_audit (tenant_id, handoff_id, from_status, to_status, actor, note, changes, at)
select h.tenant_id, h.id, v.from_status, v.to_status, v.actor, v.note, v.changes, v.at
from cortex.handoff_events h
cross join lateral (values
  (null, 'pending', h.from_agent, 'created', null::jsonb, h.created_at),
  ('pending', 'accepted', h.accepted_by, null,
   jsonb_build_object('status', jsonb_build_object('from', 'pending', 'to', 'accepted'),
                      'accepted_by', jsonb_build_object('from', null, 'to', h.accepted_by),
                      'accepted_at', jsonb_build_object('from', null, 'to', h.accepted_at)), h.accepted_at),
  ('accepted', 'completed', h.accepted_by, null,
   jsonb_build_object('status', jsonb_build_object('from', 'accepted', 'to', 'completed'),
                      'completed_at', jsonb_build_object('from', null, 'to', h.completed_at)), h.completed_at),
  (case when h.accepted_at is null then 'pending' else 'accepted' end, 'rejected',
   coalesce(h.to_agent, 'system'), h.status_note,
   jsonb_build_object('status', jsonb_build_object('from', case when h.accepted_at is null then 'pending' else 'accepted' end,
                                                   'to', 'rejected'),
                      'status_note', jsonb_build_object('from', null, 'to', h.status_note),
                      'rejected_at', jsonb_build_object('from', null, 'to', h.rejected_at)), h.rejected_at)
) v (from_status, to_status, actor, note, changes, at)
where v.at is not null
order by v.at;

alter table cortex.handoff_events enable trigger handoff_events_guard,
                                  enable trigger handoff_events_audit,
                                  enable trigger handoff_events_notify_change;
commit;

\echo '== contact owners and last handoffs'
insert into bench.stages (stage) values ('owners and last handoffs');
-- The receiver of a contact's latest accepted (or still pending) handoff owns it, as create_handoff
-- leaves it; the working context shows that handoff as last_handoff.
create unlogged table bench.last_handoff as
select distinct on (h.tenant_id, h.contact_id) h.tenant_id, h.contact_id, h.id, h.from_agent, h.to_agent,
       h.to_human_id, h.reason, h.reason_detail, h.context_summary, h.created_at
from cortex.handoff_events h
where h.status <> 'rejected'
order by h.tenant_id, h.contact_id, h.created_at desc;

update cortex.contacts c set owner_agent = coalesce(l.to_agent, c.owner_agent),
                             owner_human_id = coalesce(l.to_human_id, c.owner_human_id)
from bench.last_handoff l
where c.tenant_id = l.tenant_id and c.id = l.contact_id;

update cortex.contact_context x set
  last_handoff_id = l.id, last_handoff_summary = l.context_summary,
  last_handoff = jsonb_build_object('id', l.id, 'from', l.from_agent, 'to', coalesce(l.to_agent, l.to_human_id),
                                    'reason', l.reason, 'detail', cortex.fit_words(l.reason_detail, 160),
                                    'date', cortex.iso(l.created_at))
from bench.last_handoff l
where x.tenant_id = l.tenant_id and x.contact_id = l.contact_id;

-- Vacuumed here so that autovacuum does not start on the fresh tables in the middle of a run.
\echo '== clean up staging, vacuum and analyze'
insert into bench.stages (stage) values ('vacuum and analyze');
drop table bench.handoff_stage, bench.usage_plan, bench.last_handoff, bench.contact_map,
           bench.slots, bench.words, bench.agent_plan, bench.tenant_plan;
vacuum (analyze) cortex.token_usage;
vacuum (analyze) cortex.usage_daily;
vacuum (analyze) cortex.handoff_events;
vacuum (analyze) cortex.handoff_audit;
vacuum (analyze) cortex.contacts;
vacuum (analyze) cortex.interactions;
vacuum (analyze) cortex.contact_context;
analyze cortex.tenants;
analyze cortex.agents;
analyze cortex.agent_config;
analyze cortex.agent_keys;
analyze cortex.model_prices;
analyze cortex.jobs;
analyze cortex.outbox;
insert into bench.stages (stage) values ('done');

insert into bench.meta (key, value)
select 'tenants', count(*)::text from cortex.tenants
union all select 'agents', count(*)::text from cortex.agents
union all select 'contacts', count(*)::text from cortex.contacts
union all select 'interactions', count(*)::text from cortex.interactions
union all select 'contact_context', count(*)::text from cortex.contact_context
union all select 'token_usage', count(*)::text from cortex.token_usage
union all select 'usage_daily', count(*)::text from cortex.usage_daily
union all select 'handoff_events', count(*)::text from cortex.handoff_events
union all select 'handoff_audit', count(*)::text from cortex.handoff_audit
union all select 'pending_handoffs', count(*)::text from cortex.handoff_events where status = 'pending'
union all select 'database_size', pg_size_pretty(pg_database_size(current_database()))
union all select 'generated_at', to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
-- Rows written later (by benchmark runs) are newer than this; the driver removes them between runs.
union all select 'watermark', clock_timestamp()::text
-- Written last: a database without it is an interrupted generation and is built again.
union all select 'complete', 'true';
select key, value from bench.meta order by key;
select stage, round(extract(epoch from lead(started_at) over (order by started_at) - started_at)::numeric, 1) as seconds
from bench.stages order by started_at;
