-- Targets for sql/bench/get_context_level1.pgbench: contacts whose rendered context is fresh, each
-- with the claims of one of its tenant's writing agents (rotating), numbered 1..n.
-- Run in the benchmark database (cortex_bench*) after bench_core.py's reset; re-runnable.
drop table if exists bench.context_targets;
create table bench.context_targets as
select row_number() over (order by l.tenant_id, l.contact_id)::int as n, l.contact_id,
       json_build_object('role', 'authenticated', 'tenant_id', l.tenant_id,
         'agent', (array['luna', 'mia', 'anna', 'jasper'])[1 + (row_number() over (order by l.contact_id))::int % 4])::text
         as claims
from cortex.context_levels l
where l.has_context and l.stale_since is null and l.interaction_count_at_generation = l.interaction_count
  and l.generated_at > now() - interval '20 hours' and (l.expires_at is null or l.expires_at > now() + interval '1 hour');
alter table bench.context_targets add primary key (n);
analyze bench.context_targets;
select count(*) as targets from bench.context_targets;
