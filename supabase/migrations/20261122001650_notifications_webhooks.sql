-- Webhook endpoints without SQL (issue 7): the tenant's admins add, list and remove the endpoints
-- of cortex.webhook_endpoints (see 20261122000800_notifications.sql) through the API and the CLI.
--
-- Row-level security does the tenancy: admins (role admin, enabled; the service key acts as the
-- admin agent system) see and change their own tenant's endpoints and nothing else. The signing
-- secret is shown once, by add_webhook; no API role can read the column afterwards (column
-- privileges), so list_webhooks and a direct SELECT alike never return it. The delivery worker and
-- operators are the owner and read everything, as before.

alter table cortex.webhook_endpoints add column id uuid not null default gen_random_uuid();
alter table cortex.webhook_endpoints add constraint webhook_endpoints_id_key unique (tenant_id, id);
comment on column cortex.webhook_endpoints.id is 'What the API names an endpoint by (DELETE /api/v1/webhooks/{id}).';

create policy "Webhook endpoints are visible to the admins of their tenant" on cortex.webhook_endpoints
  for select to authenticated
  using (tenant_id = (select cortex.current_tenant()) and (select cortex.caller_has_role(array['admin'])));
create policy "Webhook endpoints are added by the admins of their tenant" on cortex.webhook_endpoints
  for insert to authenticated
  with check (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write())
              and (select cortex.caller_has_role(array['admin'])));
create policy "Webhook endpoints are removed by the admins of their tenant" on cortex.webhook_endpoints
  for delete to authenticated
  using (tenant_id = (select cortex.current_tenant()) and (select cortex.agent_can_write())
         and (select cortex.caller_has_role(array['admin'])));
-- Every column but the secret.
grant select (tenant_id, id, recipient, url, enabled, created_at, updated_at) on cortex.webhook_endpoints to authenticated;
grant insert (tenant_id, recipient, url, secret, enabled) on cortex.webhook_endpoints to authenticated;
grant delete on cortex.webhook_endpoints to authenticated;

-- API ------------------------------------------------------------------------------------------------

create or replace function public.add_webhook(recipient text, url text, secret text default null, enabled boolean default true)
returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_recipient text := btrim(add_webhook.recipient);
  v_url text := btrim(add_webhook.url);
  v_secret text := coalesce(add_webhook.secret, encode(extensions.gen_random_bytes(32), 'hex'));
  v_id uuid;
  v_created timestamptz;
begin
  perform cortex.require_role(array['admin'], 'manage webhook endpoints');
  if v_recipient is null or v_recipient = '' then
    raise exception 'recipient is required: agent:<name>, human:<id>, monitor or admin'
      using errcode = '22023', column = 'recipient';
  end if;
  if v_recipient !~ '^(agent:[a-z][a-z0-9_-]{0,62}|human:[^[:cntrl:]]{1,200}|monitor|admin)$' then
    raise exception 'recipient must be agent:<name>, human:<id>, monitor or admin'
      using errcode = '22023', column = 'recipient', detail = format('got "%s"', left(v_recipient, 100));
  end if;
  if v_recipient like 'agent:%' and not exists (
      select from cortex.agents a where a.tenant_id = v_tenant and a.name = substr(v_recipient, 7)) then
    raise exception 'unknown agent "%"', substr(v_recipient, 7)
      using errcode = '22023', column = 'recipient', hint = 'name an agent of this tenant (cortex agents list)';
  end if;
  if v_url is null or v_url = '' then
    raise exception 'url is required' using errcode = '22023', column = 'url';
  end if;
  if length(v_url) > 2000 or v_url !~* '^https?://[^/?#[:space:][:cntrl:]@]+([/?#][^[:space:][:cntrl:]]*)?$' then
    raise exception 'url must be an http:// or https:// URL with a host (no spaces, no credentials, at most 2000 characters)'
      using errcode = '22023', column = 'url', detail = format('got "%s"', left(v_url, 100));
  end if;
  if length(v_secret) not between 16 and 200 or v_secret ~ '[[:space:][:cntrl:]]' then
    raise exception 'secret must be 16 to 200 characters without spaces (omit it to have one generated)'
      using errcode = '22023', column = 'secret';
  end if;
  if exists (select from cortex.webhook_endpoints e where e.tenant_id = v_tenant and e.recipient = v_recipient) then
    raise exception 'recipient % already has a webhook endpoint', v_recipient
      using errcode = '23505', column = 'recipient',
            hint = 'remove it first (DELETE /api/v1/webhooks/{id}, cortex webhooks remove ID), then add the new one';
  end if;
  insert into cortex.webhook_endpoints (tenant_id, recipient, url, secret, enabled)
  values (v_tenant, v_recipient, v_url, v_secret, coalesce(add_webhook.enabled, true))
  returning id, created_at into v_id, v_created;
  return jsonb_build_object('id', v_id, 'recipient', v_recipient, 'url', v_url,
                            'enabled', coalesce(add_webhook.enabled, true), 'created_at', v_created,
                            'updated_at', v_created, 'secret', v_secret);
end $$;
comment on function public.add_webhook(text, text, text, boolean) is
  'Adds the webhook endpoint of a recipient (agent:<name>, human:<id>, monitor or admin) of the tenant: url http(s) only; secret generated when absent. Returns the endpoint with its secret, the only time it is shown. Admins only (42501); 409 when the recipient has one.';
grant execute on function public.add_webhook(text, text, text, boolean) to authenticated;

create or replace function public.list_webhooks(recipient text default null)
returns jsonb
language plpgsql stable set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_items jsonb;
begin
  perform cortex.require_role(array['admin'], 'list webhook endpoints');
  -- Column by column: a whole-row reference would need the secret column, which API roles cannot read.
  select coalesce(jsonb_agg(jsonb_build_object('id', e.id, 'recipient', e.recipient, 'url', e.url, 'enabled', e.enabled,
                                               'created_at', e.created_at, 'updated_at', e.updated_at)
                            order by e.recipient), '[]')
  into v_items
  from cortex.webhook_endpoints e
  where e.tenant_id = v_tenant and (list_webhooks.recipient is null or e.recipient = list_webhooks.recipient);
  return jsonb_build_object('items', v_items);
end $$;
comment on function public.list_webhooks(text) is
  'The tenant''s webhook endpoints (or the one of recipient), by recipient: {items: [{id, recipient, url, enabled, created_at, updated_at}]}; never the secrets. Admins only (42501).';
grant execute on function public.list_webhooks(text) to authenticated;

create or replace function public.remove_webhook(webhook_id uuid)
returns jsonb
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
declare
  v_tenant uuid := cortex.require_tenant();
  v_recipient text;
begin
  perform cortex.require_role(array['admin'], 'manage webhook endpoints');
  if remove_webhook.webhook_id is null then
    raise exception 'webhook_id is required' using errcode = '22023', column = 'webhook_id';
  end if;
  delete from cortex.webhook_endpoints e where e.tenant_id = v_tenant and e.id = remove_webhook.webhook_id
  returning e.recipient into v_recipient;
  if v_recipient is null then
    raise exception 'webhook endpoint % not found', remove_webhook.webhook_id
      using errcode = 'P0002', column = 'webhook_id', hint = 'list the endpoints with GET /api/v1/webhooks (list_webhooks)';
  end if;
  return jsonb_build_object('id', remove_webhook.webhook_id, 'recipient', v_recipient, 'removed', true);
end $$;
comment on function public.remove_webhook(uuid) is
  'Removes a webhook endpoint of the tenant; its recipient''s messages are then skipped (the monitor falls back to HELIOS_WEBHOOK_URL). Admins only (42501); 404 for an unknown id.';
grant execute on function public.remove_webhook(uuid) to authenticated;
