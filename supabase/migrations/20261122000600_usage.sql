-- Token usage: every model call, local or remote, with its cost from the tenant's price table.

create table cortex.model_prices (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  -- A LIKE pattern over model ids ('claude-haiku-4-5%', 'haiku'); the longest match wins.
  model_pattern text not null,
  input_usd_per_mtok numeric(12, 6) not null check (input_usd_per_mtok >= 0),
  output_usd_per_mtok numeric(12, 6) not null check (output_usd_per_mtok >= 0),
  updated_at timestamptz not null default now(),
  primary key (tenant_id, model_pattern)
);
comment on table cortex.model_prices is 'USD per million tokens for each model, per tenant (negotiated prices differ); seeded from cortex.default_model_prices().';

create or replace function cortex.default_model_prices()
returns table (model_pattern text, input_usd_per_mtok numeric, output_usd_per_mtok numeric)
language sql immutable set search_path = '' as $$
  values ('claude-haiku-4-5%', 1.00, 5.00), ('claude-3-5-haiku%', 0.80, 4.00), ('claude-3-haiku%', 0.25, 1.25),
         ('claude-sonnet-4%', 3.00, 15.00), ('claude-3-7-sonnet%', 3.00, 15.00), ('claude-opus-4%', 15.00, 75.00),
         ('haiku', 1.00, 5.00), ('sonnet', 3.00, 15.00), ('opus', 15.00, 75.00), ('local-%', 0, 0)
$$;
comment on function cortex.default_model_prices() is 'List prices a new tenant starts with (USD per million tokens); edit cortex.model_prices per tenant.';

create table cortex.token_usage (
  tenant_id uuid not null references cortex.tenants (id) on delete cascade,
  id uuid not null default gen_random_uuid(),
  agent text not null,
  model text not null check (length(model) between 1 and 200),
  operation text not null check (length(operation) between 1 and 100),
  input_tokens int not null check (input_tokens >= 0),
  output_tokens int not null check (output_tokens >= 0),
  total_tokens int generated always as (input_tokens + output_tokens) stored,
  cost_usd numeric(12, 6) not null default 0,
  contact_id uuid,
  interaction_id uuid,
  budget_exceeded boolean not null default false,
  metadata jsonb not null default '{}',
  created_at timestamptz not null default now(),
  primary key (tenant_id, id),
  foreign key (tenant_id, contact_id) references cortex.contacts (tenant_id, id) on delete set null (contact_id),
  foreign key (tenant_id, interaction_id) references cortex.interactions (tenant_id, id) on delete set null (interaction_id)
);
comment on table cortex.token_usage is 'One row per model call (local summariser included), with tokens and cost.';
create index token_usage_tenant_agent on cortex.token_usage (tenant_id, agent, created_at desc);
create index token_usage_tenant_time on cortex.token_usage (tenant_id, created_at desc);

alter table cortex.model_prices enable row level security;
alter table cortex.token_usage enable row level security;
create policy "Prices are visible to agents of their tenant" on cortex.model_prices
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
create policy "Usage is visible to agents of their tenant" on cortex.token_usage
  for select to authenticated using (tenant_id = (select cortex.current_tenant()));
grant select on cortex.model_prices, cortex.token_usage to authenticated;

create or replace function cortex.model_cost(p_tenant_id uuid, p_model text, p_input int, p_output int)
returns numeric
language sql stable set search_path = '' as $$
  select coalesce((
    select round((p_input * p.input_usd_per_mtok + p_output * p.output_usd_per_mtok) / 1000000.0, 6)
    from cortex.model_prices p
    where p.tenant_id = p_tenant_id and p_model like p.model_pattern
    order by length(p.model_pattern) desc
    limit 1), 0)
$$;
comment on function cortex.model_cost(uuid, text, int, int) is 'USD cost of a call from the tenant''s price table (longest matching pattern; 0 when unpriced).';

-- Definer: API roles read usage but only Cortex's own functions record it (rules as record_usage).
create or replace function cortex.record_token_usage(
  p_tenant_id uuid, p_agent text, p_model text, p_operation text, p_input_tokens int, p_output_tokens int,
  p_contact_id uuid default null, p_interaction_id uuid default null, p_budget_exceeded boolean default false
) returns jsonb
language plpgsql volatile security definer set search_path = '' as $$
declare
  v_cost numeric;
  v_id uuid;
begin
  -- Same rules as public.record_usage: a writing agent of the tenant, for itself (admins for anyone).
  if cortex.guard_writer(p_tenant_id) then
    perform cortex.guard_acting_agent(p_tenant_id, p_agent);
  end if;
  if p_model is null or p_input_tokens is null or p_output_tokens is null
     or p_input_tokens < 0 or p_output_tokens < 0 then
    raise exception 'usage needs model, input_tokens >= 0 and output_tokens >= 0'
      using errcode = '22023', column = 'usage';
  end if;
  v_cost := cortex.model_cost(p_tenant_id, p_model, p_input_tokens, p_output_tokens);
  insert into cortex.token_usage (tenant_id, agent, model, operation, input_tokens, output_tokens, cost_usd,
                                  contact_id, interaction_id, budget_exceeded)
  values (p_tenant_id, p_agent, p_model, p_operation, p_input_tokens, p_output_tokens, v_cost,
          p_contact_id, p_interaction_id, coalesce(p_budget_exceeded, false))
  returning id into v_id;
  -- The row cortex.settle_reservation (20261122001900) attaches a model call's reservation to.
  perform pg_catalog.set_config('cortex.last_usage_id', v_id::text, true);
  return jsonb_build_object('model', p_model, 'input_tokens', p_input_tokens, 'output_tokens', p_output_tokens,
                            'cost_usd', v_cost);
end $$;
comment on function cortex.record_token_usage(uuid, text, text, text, int, int, uuid, uuid, boolean) is
  'Records one model call in token_usage with its cost from the price table; returns {model, input_tokens, output_tokens, cost_usd}. '
  'Security definer (API roles cannot insert usage): an API caller must be a writing agent of p_tenant_id (cortex.guard_writer) '
  'recording its own usage unless it is an admin (cortex.guard_acting_agent); the owner and worker record for anyone.';
revoke execute on function cortex.record_token_usage(uuid, text, text, text, int, int, uuid, uuid, boolean) from public, anon;
grant execute on function cortex.record_token_usage(uuid, text, text, text, int, int, uuid, uuid, boolean) to authenticated;

-- Every tenant starts with the default prices (cortex.create_tenant lives in the tenancy migration,
-- which comes before this table; the seeding follows the tenant row instead).
create or replace function cortex.seed_model_prices() returns trigger
language plpgsql set search_path = '' as $$
begin
  insert into cortex.model_prices (tenant_id, model_pattern, input_usd_per_mtok, output_usd_per_mtok)
  select new.id, d.model_pattern, d.input_usd_per_mtok, d.output_usd_per_mtok from cortex.default_model_prices() d
  on conflict (tenant_id, model_pattern) do nothing;
  return null;
end $$;
comment on function cortex.seed_model_prices() is
  'Trigger: gives a new tenant the default model prices (cortex.default_model_prices).';
create trigger tenants_seed_model_prices after insert on cortex.tenants
  for each row execute function cortex.seed_model_prices();
