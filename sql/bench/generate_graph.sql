-- Benchmark data set for the memory graph (issue 13): 1,000,000 nodes and 5,000,000 edges across
-- 10 tenants (one holds 60 %, the smallest 1 %), with 384-dimension embeddings and an HNSW index
-- built after the load.
--
-- Run with psql against a freshly migrated database whose name starts with cortex_bench_graph
-- (scripts/bench graph drops, recreates and migrates it first, then runs this file):
--   psql -X -v ON_ERROR_STOP=1 -v scale=0.01 -f sql/bench/generate_graph.sql postgresql://.../cortex_bench_graph
-- `-v scale=S` builds S times the standard size (default 1; 0.01 for a smoke run), `-v batch=N`
-- sets the rows per committed batch (default 100,000), `-v hnsw_mem=4GB` the maintenance_work_mem
-- of the HNSW build (default 4GB: the index of 1M 384-d vectors is about 2 GB, and the machine has
-- 24 GiB).
--
-- What a tenant looks like (per tenant, shares of its nodes):
--   agents    5 entity nodes (luna, mia, anna, jasper, helios), permanent
--   contacts  5 % (real rows in cortex.contacts, mirrored as entity nodes like the trigger does)
--   memories  the rest: events 58 % (from interactions), facts 16 %, preferences 7 %, observations 6 %,
--             decisions 5 %, persons 3 %, goals 2 %, patterns 2 %, systems 1 %;
--             3 % superseded, 1 % archived, 4 % private to their agent, 0.5 % not embedded yet.
-- Texts: titles and bodies from a fixed vocabulary: each of 300 topic clusters has its own topic
-- words, the rest are drawn with a Zipf-like (log-uniform) rank, so full-text search has the
-- selectivity of real text (common words match many rows, topic words a few thousand).
-- Embeddings: unit vectors l2_normalize(centre + noise_a + noise_b) around the node's cluster
-- centre (300 random unit centres shared by all tenants, noise pools of 4,096 vectors each with
-- length 0.45), so nodes of one cluster have cosine similarity about 0.7 and nearest neighbours
-- mean something, and other tenants' nodes crowd the same neighbourhoods (what iterative scan is for).
-- Edges (5 per node): every event and 56 % of other memories applies_to a contact (no edge to the
-- agent: as the interaction mirror, the agent is the node's source_agent); the rest are relates_to within the node's cluster, mentions, part_of,
-- caused_by, instance_of, supersedes, consolidated_from and contradicts. Targets are drawn with a
-- power law (rank = count * random()^3), so a few contacts and memories are hubs. Weights and
-- last_reinforced_at are spread over the year.
--
-- Everything is set-based (insert ... select over generate_series) in committed batches with a
-- progress line each, seeded (setseed) so two runs produce the same shapes. The real tables stay
-- logged with their triggers and checks (the node trigger computes the full-text vector, the edge
-- trigger keeps private edges private); only the HNSW and full-text indexes are dropped
-- during the load and rebuilt at the end (the build times go to bench.meta).

\set ON_ERROR_STOP on

do $$
begin
  if current_database() not like 'cortex\_bench\_graph%' then
    raise exception 'generate_graph.sql only runs in a database named cortex_bench_graph*, not %', current_database();
  end if;
end $$;

set work_mem = '256MB';
set maintenance_work_mem = '1GB';
set synchronous_commit = off;
-- (procedures that commit between batches cannot carry their own search_path: names are qualified)
select setseed(0.13);
\if :{?scale}
\else
  \set scale 1
\endif
\if :{?batch}
\else
  \set batch 100000
\endif
\if :{?hnsw_mem}
\else
  \set hnsw_mem 4GB
\endif

\echo '== reset'
set client_min_messages = warning;
set session_replication_role = replica;
truncate cortex.tenants cascade;
reset session_replication_role;
drop schema if exists bench cascade;
set client_min_messages = notice;
create schema bench;
comment on schema bench is 'Benchmark bookkeeping (plain-text agent keys, plans, query vectors); never exists outside cortex_bench_graph.';
create table bench.meta (key text primary key, value text not null);
insert into bench.meta values ('scale', :'scale'), ('started_at', now()::text);

-- Indexes rebuilt after the load: their definitions as the migrations made them.
create table bench.deferred_indexes as
select indexname, indexdef from pg_indexes
where schemaname = 'cortex' and indexname in ('memory_nodes_embedding', 'memory_nodes_fts');
do $$
begin
  if (select count(*) from bench.deferred_indexes) <> 2 then
    raise exception 'expected the two indexes of a freshly migrated database (run scripts/bench graph --regenerate)';
  end if;
end $$;
drop index cortex.memory_nodes_embedding, cortex.memory_nodes_fts;

-- Deterministic ids, so edges can name nodes by (tenant, sequence number) without a lookup.
create function bench.nid(p_tenant int, p_seq bigint) returns uuid
language sql immutable parallel safe set search_path = '' as $$ select md5('node:' || p_tenant || ':' || p_seq)::uuid $$;
create function bench.cid(p_tenant int, p_seq bigint) returns uuid
language sql immutable parallel safe set search_path = '' as $$ select md5('contact:' || p_tenant || ':' || p_seq)::uuid $$;

-- Tenants: shares of the nodes ------------------------------------------------------------------
\echo '== tenants and agents'
create table bench.tenant_plan (n int primary key, slug text not null, name text not null, share real not null,
                                nodes int not null default 0, contacts int not null default 0,
                                mem_lo int, mem_hi int, id uuid);
insert into bench.tenant_plan (n, slug, name, share) values
  (1, 'northwind', 'Northwind Traders', 0.60), (2, 'globex', 'Globex Corporation', 0.10),
  (3, 'initech', 'Initech', 0.07), (4, 'umbrella', 'Umbrella Health', 0.05), (5, 'hooli', 'Hooli', 0.04),
  (6, 'stark', 'Stark Supplies', 0.04), (7, 'wayne', 'Wayne Logistics', 0.03), (8, 'tyrell', 'Tyrell Robotics', 0.03),
  (9, 'soylent', 'Soylent Foods', 0.03), (10, 'wonka', 'Wonka Sweets', 0.01);
-- Nodes per tenant, agents included; at least 40 so a tiny smoke run still has a top-10 everywhere.
update bench.tenant_plan set nodes = greatest(40, round(1000000 * :scale * share))::int;
update bench.tenant_plan set contacts = greatest(2, round(nodes * 0.05))::int;
-- Sequence numbers: contacts 1..contacts, memories contacts+1 .. nodes-5, agents -1..-5.
update bench.tenant_plan set mem_lo = contacts + 1, mem_hi = nodes - 5;

-- Agents enter the graph with deterministic ids (same columns as cortex.graph_add_agents).
alter table cortex.agents disable trigger graph_sync_agents;
update bench.tenant_plan set id = cortex.create_tenant(name, slug, 'UTC');
create table bench.agents (name text primary key, seq int not null unique, display_name text not null);
insert into bench.agents values ('luna', -1, 'Luna (support)'), ('mia', -2, 'Mia (success)'),
  ('anna', -3, 'Anna (outreach)'), ('jasper', -4, 'Jasper (sales)'), ('helios', -5, 'Helios (monitor)');
select count(*) as agents from (
  select cortex.create_agent(t.id, a.name, a.display_name, case when a.name = 'helios' then 'monitor' else 'agent' end,
                             a.name = 'helios')
  from bench.tenant_plan t cross join bench.agents a) s;
alter table cortex.agents enable trigger graph_sync_agents;
insert into cortex.memory_nodes (tenant_id, id, kind, title, body, source_agent, permanent, importance, ref_kind, ref_id,
                                 metadata, embed_status, link_status, created_at, valid_from)
select t.id, bench.nid(t.n, b.seq), 'agent', coalesce(a.display_name, a.name), format('Agent %s (role %s)', a.name, a.role),
       a.name, true, 0.7, 'agent', a.name, jsonb_build_object('name', a.name, 'role', a.role), 'skipped', 'done',
       now() - interval '365 days', now() - interval '365 days'
from bench.tenant_plan t join cortex.agents a on a.tenant_id = t.id join bench.agents b on b.name = a.name;

create table bench.agent_keys as
select t.id as tenant_id, t.slug, t.n as tenant_n, a.name as agent, cortex.create_agent_key(t.id, a.name, 'bench') as key
from bench.tenant_plan t cross join bench.agents a;
alter table bench.agent_keys add primary key (tenant_id, agent);

-- Vocabulary ------------------------------------------------------------------------------------
create table bench.words (kind text primary key, items text[] not null);
insert into bench.words values
('topic', array['invoice','refund','shipment','delivery','warehouse','pallet','container','customs','tariff','freight',
  'renewal','contract','subscription','license','seat','discount','quote','proposal','pricing','budget',
  'onboarding','training','webinar','workshop','demo','pilot','rollout','migration','integration','api',
  'dashboard','report','export','import','sync','webhook','token','password','login','sso',
  'outage','latency','incident','escalation','ticket','bug','crash','timeout','backup','restore',
  'gdpr','privacy','audit','compliance','security','questionnaire','encryption','retention','consent','residency',
  'ceramic','mug','lid','bottle','packaging','label','carton','sample','prototype','mould',
  'coffee','tea','snack','catering','beverage','cup','kettle','filter','grinder','espresso',
  'printer','laptop','monitor','keyboard','headset','router','sensor','battery','charger','cable',
  'truck','van','courier','route','depot','dock','forklift','inventory','stock','reorder',
  'payroll','expense','reimbursement','tax','ledger','receivable','payable','credit','debit','currency',
  'hiring','interview','candidate','offer','recruiter','vacancy','promotion','appraisal','holiday','sabbatical',
  'campaign','newsletter','launch','brand','event','conference','booth','sponsor','partner','reseller',
  'loyalty','voucher','coupon','membership','referral','review','rating','survey','feedback','complaint',
  'warranty','repair','replacement','return','defect','recall','inspection','certificate','standard','tolerance',
  'energy','solar','heating','insulation','meter','tariff','emission','carbon','recycling','waste',
  'clinic','appointment','prescription','insurance','claim','patient','therapy','dosage','referral','lab',
  'menu','allergen','vegan','gluten','recipe','kitchen','chef','table','reservation','banquet',
  'robot','firmware','calibration','actuator','gripper','vision','conveyor','plc','torque','servo',
  'lease','tenant','landlord','deposit','maintenance','plumbing','elevator','parking','cleaning','security']),
('common', array['the','customer','team','order','account','week','call','email','new','update',
  'issue','request','price','plan','time','month','support','question','problem','meeting',
  'status','next','follow','up','last','first','company','manager','office','project',
  'asked','wants','needs','prefers','said','mentioned','confirmed','agreed','promised','reported',
  'late','early','urgent','quick','slow','happy','unhappy','frustrated','pleased','worried',
  'monday','tuesday','wednesday','thursday','friday','morning','afternoon','evening','quarter','year',
  'large','small','annual','monthly','weekly','daily','extra','missing','damaged','wrong',
  'approved','pending','rejected','signed','cancelled','delayed','shipped','received','paid','overdue',
  'europe','germany','france','spain','italy','poland','netherlands','sweden','london','berlin',
  'paris','madrid','rotterdam','hamburg','lyon','milan','warsaw','dublin','lisbon','vienna',
  'price','cost','volume','units','boxes','hours','days','percent','euros','dollars',
  'director','buyer','assistant','engineer','analyst','owner','founder','lead','head','officer',
  'contact','phone','chat','portal','letter','visit','site','store','branch','region',
  'decision','deadline','priority','risk','opportunity','goal','target','plan','strategy','forecast',
  'happy','again','still','always','never','often','usually','probably','maybe','definitely',
  'because','although','after','before','during','while','unless','since','until','whether',
  'bulk','single','double','standard','premium','basic','enterprise','starter','business','custom',
  'blue','black','white','green','red','grey','matte','glossy','recycled','organic',
  'fast','reliable','cheap','expensive','simple','complex','secure','flexible','local','global',
  'note','summary','detail','reason','result','outcome','answer','reply','message','thread']),
('first', array['Maria','John','Aisha','Liam','Sofia','Noah','Emma','Lukas','Chen','Priya','Mateo','Olivia',
  'Yuki','Ahmed','Hannah','Pierre','Elena','Jonas','Fatima','Diego','Grace','Ivan','Zoe','Omar','Clara',
  'Rahul','Isabel','Felix','Mei','Tom','Lea','Carlos','Nina','Samuel','Anya','Ethan','Chloe','Marco']),
('last', array['Smith','Garcia','Muller','Khan','Rossi','Kowalski','Nguyen','Johansson','Dubois','Silva',
  'Tanaka','Okafor','Schmidt','Brown','Martin','Novak','Haddad','Fischer','Lopez','Andersen','Wright',
  'Kim','Petrov','Costa','Weber','Hughes','Moreau','Yilmaz','Bianchi','Fernandes','Clarke','Sato']),
('company', array['Acme','Blue Ridge','Northstar','Pioneer','Summit','Evergreen','Silverline','Redwood',
  'Brightpath','Ironclad','Lakeside','Crescent','Nimbus','Quantum','Harbor','Keystone','Atlas','Vertex']),
('event', array['Email received','Email sent','Call','Ticket opened','Ticket resolved','Note','Order placed',
  'Refund processed','Nudge sent','Handoff']),
('prefix', array['Fact:','Preference:','Observation:','Decision:','Goal:','Pattern:']);

-- Cluster centres and noise pools: random unit vectors (Box-Muller normals, normalised) -------------
\echo '== cluster centres and noise pools'
create table bench.centres (c int primary key, v extensions.vector(384) not null, words text[] not null);
insert into bench.centres
select c, extensions.l2_normalize(array(
         select sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()) from generate_series(1, 384) d
         where c is not null)::real[]::extensions.vector),
       -- three topic words per cluster; a word belongs to about 1.5 clusters
       array(select w.items[1 + floor(random() * cardinality(w.items))::int] from generate_series(1, 3) k
             where c is not null)
from generate_series(0, 299) c, bench.words w where w.kind = 'topic';
create table bench.noise (i int primary key, v extensions.vector(384) not null);
insert into bench.noise
select i, (array(select (0.45 / sqrt(384.0)) * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random())
                 from generate_series(1, 384) d where i is not null))::real[]::extensions.vector
from generate_series(0, 8191) i;

-- Contacts (5 %): rows in cortex.contacts, entity nodes with deterministic ids -------------------
\echo '== contacts'
alter table cortex.contacts disable trigger graph_sync_contacts;
alter table cortex.contacts disable trigger contacts_render_context;
insert into cortex.contacts (tenant_id, id, email, name, company_name, stage, source, owner_agent, created_at, updated_at)
select t.id, bench.cid(t.n, g),
       lower(f.items[1 + (g * 7) % cardinality(f.items)] || '.' || l.items[1 + (g * 13) % cardinality(l.items)]) || '.' || g
         || '@' || lower(replace(co.items[1 + g % cardinality(co.items)], ' ', '')) || '.example.com',
       f.items[1 + (g * 7) % cardinality(f.items)] || ' ' || l.items[1 + (g * 13) % cardinality(l.items)],
       co.items[1 + g % cardinality(co.items)] || ' ' || (array['Corp','Logistics','Foods','Health','Labs','Retail'])[1 + g % 6],
       (array['prospect','qualified','opportunity','customer','customer','customer','churning','lost'])[1 + floor(random() * 8)::int],
       'website', (array['luna','mia','anna','jasper'])[1 + floor(random() * 4)::int],
       now() - random() * interval '365 days', now()
from bench.tenant_plan t cross join lateral generate_series(1, t.contacts) g,
     (select items from bench.words where kind = 'first') f, (select items from bench.words where kind = 'last') l,
     (select items from bench.words where kind = 'company') co;
alter table cortex.contacts enable trigger graph_sync_contacts;
alter table cortex.contacts enable trigger contacts_render_context;

-- The plan of every node: kind, cluster, time, scope (edges read it; unlogged, it is bookkeeping).
create unlogged table bench.plan (tenant_n int not null, seq int not null, kind text not null, cl int not null,
                                  created_at timestamptz not null, scope text not null, contact_seq int,
                                  primary key (tenant_n, seq));
insert into bench.plan
select t.n, g, 'contact', g % 300, c.created_at, '', g
from bench.tenant_plan t cross join lateral generate_series(1, t.contacts) g
join cortex.contacts c on c.tenant_id = t.id and c.id = bench.cid(t.n, g);
insert into bench.plan select t.n, b.seq, 'agent', 0, now() - interval '365 days', '', null
from bench.tenant_plan t cross join bench.agents b;

insert into cortex.memory_nodes (tenant_id, id, kind, title, body, contact_id, tags, importance, ref_kind, ref_id,
                                 metadata, embedding, embed_status, link_status, indexed_at, created_at, valid_from)
select t.id, bench.nid(t.n, p.seq), 'contact', cortex.contact_node_title(ct), cortex.contact_node_body(ct), ct.id, ct.tags,
       0.6, 'contact', ct.id::text,
       jsonb_build_object('email', ct.email, 'company_name', ct.company_name, 'stage', ct.stage),
       extensions.l2_normalize(x.v operator(extensions.+) na.v operator(extensions.+) nb.v), 'done', 'done',
       ct.created_at, ct.created_at, ct.created_at
from bench.plan p join bench.tenant_plan t on t.n = p.tenant_n
join cortex.contacts ct on ct.tenant_id = t.id and ct.id = bench.cid(t.n, p.seq)
join bench.centres x on x.c = p.cl
join bench.noise na on na.i = (p.seq::bigint * 7919) % 4096
join bench.noise nb on nb.i = 4096 + (p.seq::bigint * 104729) % 4096
where p.kind = 'contact';

-- Memory nodes, in committed batches ----------------------------------------------------------------
\echo '== memory nodes'
create procedure bench.load_nodes(p_batch int)
language plpgsql as $$
declare
  t record;
  lo int;
  hi int;
  done bigint := 0;
  total bigint := (select sum(mem_hi - mem_lo + 1) from bench.tenant_plan);
  started timestamptz := clock_timestamp();
begin
  for t in select * from bench.tenant_plan order by n loop
    lo := t.mem_lo;
    while lo <= t.mem_hi loop
      hi := least(t.mem_hi, lo + p_batch - 1);
      insert into bench.plan
      select t.n, g,
             case when r < 0.58 then 'event' when r < 0.74 then 'fact' when r < 0.81 then 'preference'
                  when r < 0.87 then 'observation' when r < 0.92 then 'decision' when r < 0.95 then 'person'
                  when r < 0.97 then 'goal' when r < 0.99 then 'pattern' else 'system' end,
             g % 300,
             -- more recent than old: a tenant grows
             now() - interval '365 days' * (1 - sqrt(random())),
             case when random() < 0.04 then (array['luna','mia','anna','jasper'])[1 + g % 4] else '' end,
             -- every event is about a contact (an interaction); 60 % of other memories are
             case when r < 0.58 or random() < 0.6 then 1 + floor(t.contacts * power(random(), 3))::int end
      from (select g, random() as r from generate_series(lo, hi) g) s;

      insert into cortex.memory_nodes (tenant_id, id, kind, title, body, importance, confidence, source_agent, visibility,
                                       tags, contact_id, status, permanent, needs_review, access_count, last_accessed_at,
                                       valid_from, valid_to, ref_kind, ref_id, embedding, embed_status, link_status,
                                       indexed_at, created_at, updated_at)
      select t.id, bench.nid(t.n, p.seq), p.kind,
             -- title: a kind word, two of the cluster's topic words, two Zipf-ranked common words
             case when p.kind = 'event' then ev.items[1 + p.seq % cardinality(ev.items)] || ': '
                  when p.kind in ('person', 'system') then ''
                  else pf.items[1 + p.seq % cardinality(pf.items)] || ' ' end
               || x.words[1 + p.seq % 3] || ' ' || x.words[1 + (p.seq / 3) % 3] || ' '
               || cm.items[floor(exp(random() * ln(cardinality(cm.items))))::int] || ' '
               || cm.items[floor(exp(random() * ln(cardinality(cm.items))))::int],
             -- body: 12-60 words, a topic word in every few
             array_to_string(array(
               select case when random() < 0.15 then x.words[1 + floor(random() * 3)::int]
                           when random() < 0.05 then tp.items[1 + floor(random() * cardinality(tp.items))::int]
                           else cm.items[floor(exp(random() * ln(cardinality(cm.items))))::int] end
               from generate_series(1, 12 + floor(random() * 48)::int) k where p.seq is not null), ' '),
             case when p.kind = 'event' then (case when random() < 0.15 then 0.7 else 0.4 end)
                  else round((0.2 + 0.8 * random())::numeric, 2) end,
             round((0.5 + 0.5 * random())::numeric, 2),
             case when p.scope <> '' then p.scope else (array['luna','mia','anna','jasper'])[1 + (p.seq / 7) % 4] end,
             case when p.scope <> '' then 'private' else 'shared' end,
             case when random() < 0.3 then array[x.words[1 + p.seq % 3]] else '{}' end,
             case when p.contact_seq is not null then bench.cid(t.n, p.contact_seq) end,
             case when p.st < 0.03 then 'superseded' when p.st < 0.04 then 'archived' else 'active' end,
             random() < 0.01, random() < 0.005,
             floor(power(random(), 4) * 40)::int,
             case when random() < 0.5 then p.created_at + random() * (now() - p.created_at) end,
             p.created_at,
             case when p.st < 0.03 then p.created_at + random() * (now() - p.created_at) end,
             case when p.kind = 'event' then 'interaction' end,
             case when p.kind = 'event' then md5('interaction:' || t.n || ':' || p.seq)::uuid::text end,
             case when p.pend >= 0.005 then extensions.l2_normalize(x.v operator(extensions.+) na.v operator(extensions.+) nb.v) end,
             case when p.pend >= 0.005 then 'done' else 'pending' end,
             case when p.pend >= 0.005 then 'done' else 'pending' end,
             case when p.pend >= 0.005 then p.created_at end,
             p.created_at, p.created_at
      from (select p0.*, random() as st, random() as pend from bench.plan p0
            where p0.tenant_n = t.n and p0.seq between lo and hi offset 0) p
      join bench.centres x on x.c = p.cl
      join bench.noise na on na.i = (p.seq::bigint * 7919) % 4096
      join bench.noise nb on nb.i = 4096 + (p.seq::bigint * 104729) % 4096
      cross join (select items from bench.words where kind = 'event') ev
      cross join (select items from bench.words where kind = 'prefix') pf
      cross join (select items from bench.words where kind = 'common') cm
      cross join (select items from bench.words where kind = 'topic') tp;
      done := done + (hi - lo + 1);
      commit;
      raise notice 'nodes: % of % (tenant %, % s)', done, total, t.slug,
        round(extract(epoch from clock_timestamp() - started), 1);
      lo := hi + 1;
    end loop;
  end loop;
end $$;
call bench.load_nodes(:batch);

-- Edges: 5 per node ----------------------------------------------------------------------------------
\echo '== edges'
-- One edge per row: the source's plan row, a relation, a target sequence number; checked and written.
create procedure bench.write_edges(p_tenant int, p_rows text)
language plpgsql as $$
begin
  execute format($q$
    insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight, created_by, created_at,
                                     last_reinforced_at)
    select t.id, bench.nid(t.n, e.src), e.relation, bench.nid(t.n, e.tgt),
           case e.relation when 'applies_to' then 0.8 when 'mentions' then 0.3 + 0.4 * random()
                           when 'relates_to' then 0.6 + 0.4 * random() else 0.2 + 0.8 * power(random(), 0.7) end,
           (array['luna','mia','anna','jasper'])[1 + e.src %% 4], e.at, e.at + random() * (now() - e.at)
    from (%s) e
    join bench.tenant_plan t on t.n = %s
    join bench.plan ps on ps.tenant_n = t.n and ps.seq = e.src
    join bench.plan pt on pt.tenant_n = t.n and pt.seq = e.tgt
    -- no self-loops, and never private nodes of two different agents joined (the trigger refuses it)
    where e.tgt <> e.src and (ps.scope = '' or pt.scope = '' or ps.scope = pt.scope)
    on conflict do nothing$q$, p_rows, p_tenant);
end $$;

create procedure bench.load_edges(p_batch int)
language plpgsql as $$
declare
  t record;
  lo int;
  hi int;
  n_mem int;
  have bigint;
  want bigint;
  missing bigint;
  round int;
  done bigint := 0;
  started timestamptz := clock_timestamp();
begin
  for t in select * from bench.tenant_plan order by n loop
    n_mem := t.mem_hi - t.mem_lo + 1;
    want := 5::bigint * t.nodes;
    -- Structural edges: events applies_to their contact (as cortex.graph_add_interactions makes them: no edge to
    -- the agent, who is the node's source_agent); 93 % of other memories with a contact apply to it.
    lo := t.mem_lo;
    while lo <= t.mem_hi loop
      hi := least(t.mem_hi, lo + p_batch - 1);
      call bench.write_edges(t.n, format($r$
        select p.seq as src, 'applies_to' as relation, p.contact_seq as tgt,
               p.created_at + random() * interval '1 hour' as at
        from bench.plan p where p.tenant_n = %1$s and p.seq between %2$s and %3$s and p.contact_seq is not null
          and (p.kind = 'event' or random() < 0.93)$r$,
        t.n, lo, hi));
      commit;
      lo := hi + 1;
    end loop;
    -- The rest: relation by share; targets by a power law (same cluster for relates_to).
    round := 0;
    loop
      select count(*) into have from cortex.memory_edges e where e.tenant_id = t.id;
      missing := want - have;
      exit when missing <= 0 or round >= 12;
      round := round + 1;
      lo := 1;
      while lo <= missing loop
        hi := least(missing, lo + p_batch - 1);
        call bench.write_edges(t.n, format($r$
          select s.src, s.relation,
                 case when s.relation = 'relates_to'
                        -- a member of the source's cluster (seq = cluster mod 300), power-law rank
                        then s.first + 300 * floor(power(random(), %9$s) * greatest(1, (%3$s - s.first) / 300 + 1))::int
                      when s.relation = 'mentions'
                        then 1 + floor(%4$s * power(random(), %9$s))::int
                      else %2$s + floor(%5$s * power(random(), %9$s))::int end as tgt,
                 s.at
          from (
            select src, relation, at,
                   %2$s + (((src %% 300) - %2$s) %% 300 + 300) %% 300 as first
            from (
              select %2$s + ((g::bigint * 7919 + %6$s) %% %5$s)::int as src,
                     case when r < 0.50 then 'relates_to' when r < 0.65 then 'mentions' when r < 0.77 then 'part_of'
                          when r < 0.87 then 'caused_by' when r < 0.93 then 'instance_of' when r < 0.96 then 'supersedes'
                          when r < 0.99 then 'consolidated_from' else 'contradicts' end as relation,
                     now() - interval '365 days' * (1 - sqrt(random())) as at
              from (select g, random() as r from generate_series(%7$s, %8$s) g) q
            ) a
          ) s$r$, t.n, t.mem_lo, t.mem_hi, t.contacts, n_mem, round * 104729, lo, hi,
          case when round = 1 then 3 when round <= 3 then 2 else 1 end));
        commit;
        lo := hi + 1;
      end loop;
      done := done + missing;
      raise notice 'edges: tenant % round %: % wanted, % added (% s)', t.slug, round, want,
        (select count(*) from cortex.memory_edges e where e.tenant_id = t.id) - have,
        round(extract(epoch from clock_timestamp() - started), 1);
    end loop;
  end loop;
end $$;
call bench.load_edges(:batch);

-- Query vectors and texts for the measurements: near a cluster centre, words of that cluster --------
\echo '== query set'
create table bench.queries (i int primary key, cl int not null, v extensions.vector(384) not null, text text not null);
insert into bench.queries
select g.i, c.c, extensions.l2_normalize(c.v operator(extensions.+) n.v operator(extensions.+) n2.v),
       c.words[1 + g.i % 3] || ' ' || c.words[1 + (g.i + 1) % 3]
from generate_series(0, 999) g(i)
join bench.centres c on c.c = (g.i * 37) % 300
join bench.noise n on n.i = (g.i * 11) % 8192
join bench.noise n2 on n2.i = (g.i * 13 + 5) % 8192;

-- Deferred indexes ----------------------------------------------------------------------------------
\echo '== full-text index'
create table bench.index_builds (indexname text primary key, seconds numeric not null);
create procedure bench.build_indexes(p_names text[])
language plpgsql as $$
declare
  d record;
  t0 timestamptz;
begin
  for d in select * from bench.deferred_indexes where indexname = any (p_names) loop
    t0 := clock_timestamp();
    execute d.indexdef;
    insert into bench.index_builds values (d.indexname, round(extract(epoch from clock_timestamp() - t0)::numeric, 1));
    commit;
    raise notice 'index %: % s', d.indexname, round(extract(epoch from clock_timestamp() - t0), 1);
  end loop;
end $$;
call bench.build_indexes(array['memory_nodes_fts']);
\echo '== HNSW index (maintenance_work_mem' :hnsw_mem ')'
set maintenance_work_mem = :'hnsw_mem';
set max_parallel_maintenance_workers = 1;
call bench.build_indexes(array['memory_nodes_embedding']);
reset maintenance_work_mem;

\echo '== vacuum analyze'
vacuum (analyze) cortex.memory_nodes;
vacuum (analyze) cortex.memory_edges;
vacuum (analyze) cortex.contacts;
analyze bench.plan;

\echo '== term statistics (cortex.refresh_memory_lexicons, as the hourly schedule does)'
select cortex.refresh_memory_lexicons();

insert into bench.meta
select 'nodes', count(*)::text from cortex.memory_nodes
union all select 'edges', count(*)::text from cortex.memory_edges
union all select 'hnsw_build_seconds', seconds::text from bench.index_builds where indexname = 'memory_nodes_embedding'
union all select 'finished_at', now()::text
union all select 'complete', 'true'
on conflict (key) do update set value = excluded.value;
select key, value from bench.meta order by key;
