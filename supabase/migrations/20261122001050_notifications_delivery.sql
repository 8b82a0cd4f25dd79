-- Webhook delivery from the outbox (see 20261122000800_notifications.sql for the table).
-- A delivery worker claims due messages under a lease (FOR UPDATE SKIP LOCKED), POSTs them and
-- reports each outcome in one round trip per batch. A worker that dies mid-delivery leaves its
-- messages 'delivering'; when the lease runs out another worker claims them again, so a message
-- is delivered at least once and receivers deduplicate on its idempotency key. A message that
-- keeps failing is retried with exponential backoff and jitter, then dead-lettered with an alert;
-- operators list and replay dead letters. These functions are for the worker and operators (the
-- database owner); no API role may execute them.

-- Claim -----------------------------------------------------------------------------------------

create or replace function cortex.claim_outbox(
  p_worker text,
  p_limit int default 100,
  p_lease_seconds int default 30,
  p_monitor_url text default null,
  p_monitor_secret text default null
) returns table (
  tenant_id uuid, id bigint, event text, recipient text, payload jsonb, idempotency_key text,
  attempts int, max_attempts int, created_at timestamptz, url text, secret text
)
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
begin
  if p_worker is null or p_limit < 1 or p_lease_seconds < 1 then
    raise exception 'claim_outbox needs a worker name, a positive limit and a positive lease'
      using errcode = '22023';
  end if;
  return query
  with picked as (
    select o.tenant_id, o.id from cortex.outbox o
    where (o.status = 'pending' and o.next_attempt_at <= now())
       or (o.status = 'delivering' and o.locked_until < now())
    order by o.next_attempt_at, o.id
    limit p_limit
    for update of o skip locked
  ), dest as (
    -- Where each message goes: the recipient's endpoint; for the monitor without one, the
    -- deployment default (HELIOS_WEBHOOK_URL, passed in by the worker). A disabled endpoint
    -- means "deliver nothing here", so it does not fall back.
    select p.tenant_id, p.id,
           case when e.recipient is not null then (case when e.enabled then e.url end)
                when o.recipient = 'monitor' then nullif(p_monitor_url, '') end as url,
           case when e.recipient is not null then e.secret
                when o.recipient = 'monitor' then coalesce(p_monitor_secret, '') end as secret,
           -- The lease ran out during the last allowed attempt: the worker died with it.
           o.status = 'delivering' and o.attempts >= o.max_attempts as exhausted
    from picked p
    join cortex.outbox o on o.tenant_id = p.tenant_id and o.id = p.id
    left join cortex.webhook_endpoints e on e.tenant_id = o.tenant_id and e.recipient = o.recipient
  ), claimed as (
    update cortex.outbox o set
      status = case when d.url is null then 'skipped' when d.exhausted then 'dead' else 'delivering' end,
      attempts = case when d.url is null or d.exhausted then o.attempts else o.attempts + 1 end,
      locked_by = case when d.url is null or d.exhausted then null else p_worker end,
      locked_until = case when d.url is null or d.exhausted then null
                          else now() + make_interval(secs => p_lease_seconds) end,
      last_error = case when d.url is null then format('no webhook endpoint for recipient %s', o.recipient)
                        when d.exhausted then format('worker %s lost the message during its last attempt (lease expired)',
                                                     o.locked_by)
                        else o.last_error end
    from dest d
    where o.tenant_id = d.tenant_id and o.id = d.id
    returning o.tenant_id, o.id, o.event, o.recipient, o.payload, o.idempotency_key, o.attempts,
              o.max_attempts, o.created_at, o.status, o.last_error, d.url, d.secret
  ), alerted as (
    insert into cortex.alerts (tenant_id, kind, severity, message, details)
    select c.tenant_id, 'webhook_dead_letter', 'warning',
           format('%s message %s to %s was dead-lettered after %s attempts: %s',
                  c.event, c.id, c.recipient, c.attempts, c.last_error),
           jsonb_build_object('outbox_id', c.id, 'event', c.event, 'recipient', c.recipient, 'error', c.last_error)
    from claimed c where c.status = 'dead'
  )
  select c.tenant_id, c.id, c.event, c.recipient, c.payload, c.idempotency_key, c.attempts,
         c.max_attempts, c.created_at, c.url, c.secret
  from claimed c where c.status = 'delivering'
  order by c.id;
end $$;
comment on function cortex.claim_outbox(text, int, int, text, text) is
  'Claims up to p_limit due outbox messages (or ones whose lease expired) for a delivery worker, under a lease, with each one''s URL and signing secret; messages without an endpoint are marked skipped, and a lease lost on the last attempt is dead-lettered.';

-- Outcomes -------------------------------------------------------------------------------------

create or replace function cortex.mark_delivered(p_tenant_ids uuid[], p_ids bigint[], p_status_codes int[])
returns int
language sql volatile set search_path = '' as $$
  -- A 2xx is a fact whoever held the lease: a message another worker re-claimed (or even
  -- dead-lettered) after this delivery started is delivered all the same.
  with r as (
    select * from unnest(p_tenant_ids, p_ids, p_status_codes) as r (tenant_id, id, status_code)
  ), u as (
    update cortex.outbox o set status = 'delivered', delivered_at = now(), last_status_code = r.status_code,
                               locked_by = null, locked_until = null
    from r
    where o.tenant_id = r.tenant_id and o.id = r.id and o.status in ('pending', 'delivering', 'dead')
    returning 1
  )
  select count(*)::int from u
$$;
comment on function cortex.mark_delivered(uuid[], bigint[], int[]) is
  'Marks outbox messages delivered (arrays of tenant ids, ids and HTTP status codes, one row per message); returns how many changed.';

create or replace function cortex.mark_failed(
  p_worker text, p_tenant_ids uuid[], p_ids bigint[], p_status_codes int[], p_errors text[],
  p_base_seconds double precision default 30, p_max_delay_seconds double precision default 21600
) returns table (tenant_id uuid, id bigint, status text, next_attempt_at timestamptz)
language plpgsql volatile set search_path = '' as $$
#variable_conflict use_column
begin
  return query
  with r as (
    select * from unnest(p_tenant_ids, p_ids, p_status_codes, p_errors) as r (tenant_id, id, status_code, error)
  ), u as (
    update cortex.outbox o set
      status = case when o.attempts >= o.max_attempts then 'dead' else 'pending' end,
      -- Exponential backoff with "equal jitter": half the delay fixed, half random, so that
      -- messages that failed together (a receiver outage) do not all come back together.
      next_attempt_at = case when o.attempts >= o.max_attempts then o.next_attempt_at
        else now() + make_interval(secs => least(p_max_delay_seconds, p_base_seconds * power(2, o.attempts - 1))
                                           * (0.5 + random() * 0.5)) end,
      last_status_code = r.status_code, last_error = left(r.error, 2000),
      locked_by = null, locked_until = null
    from r
    -- Only the lease holder reports a failure: after a lease was lost, the new holder decides.
    where o.tenant_id = r.tenant_id and o.id = r.id and o.status = 'delivering' and o.locked_by = p_worker
    returning o.tenant_id, o.id, o.status, o.next_attempt_at, o.event, o.recipient, o.attempts, o.last_error
  ), alerted as (
    insert into cortex.alerts (tenant_id, kind, severity, message, details)
    select u.tenant_id, 'webhook_dead_letter', 'warning',
           format('%s message %s to %s was dead-lettered after %s attempts: %s',
                  u.event, u.id, u.recipient, u.attempts, left(u.last_error, 500)),
           jsonb_build_object('outbox_id', u.id, 'event', u.event, 'recipient', u.recipient, 'error', u.last_error)
    from u where u.status = 'dead'
    returning 1
  )
  select u.tenant_id, u.id, u.status, u.next_attempt_at from u;
end $$;
comment on function cortex.mark_failed(text, uuid[], bigint[], int[], text[], double precision, double precision) is
  'Records failed delivery attempts held by p_worker: each is retried after an exponential backoff with jitter (base * 2^(attempt-1), capped), or dead-lettered with an alert after its last attempt; returns the new status of each.';

-- Dead letters ---------------------------------------------------------------------------------

create or replace function cortex.list_dead_letters(p_tenant_id uuid default null, p_limit int default 100)
returns setof cortex.outbox
language sql stable set search_path = '' as $$
  select * from cortex.outbox o
  where o.status = 'dead' and (p_tenant_id is null or o.tenant_id = p_tenant_id)
  order by o.created_at, o.id
  limit p_limit
$$;
comment on function cortex.list_dead_letters(uuid, int) is
  'Dead-lettered outbox messages, oldest first (all tenants, or one), with their last error and status code.';

create or replace function cortex.replay_dead_letters(p_ids bigint[] default null, p_tenant_id uuid default null)
returns int
language plpgsql volatile set search_path = '' as $$
declare v_count int;
begin
  -- p_ids null means every dead letter (of p_tenant_id when given); callers ask for that explicitly.
  update cortex.outbox o set status = 'pending', attempts = 0, next_attempt_at = now(),
                             locked_by = null, locked_until = null, delivered_at = null
  where o.status = 'dead'
    and (p_ids is null or o.id = any (p_ids))
    and (p_tenant_id is null or o.tenant_id = p_tenant_id);
  get diagnostics v_count = row_count;
  if v_count > 0 then
    perform pg_notify('cortex_outbox', '');  -- a bare wake-up, like cortex.notify's
  end if;
  return v_count;
end $$;
comment on function cortex.replay_dead_letters(bigint[], uuid) is
  'Puts dead letters (the given ids, or all of them, optionally of one tenant) back in the queue with a fresh set of attempts and wakes the delivery workers; returns how many.';

revoke execute on function
  cortex.claim_outbox(text, int, int, text, text),
  cortex.mark_delivered(uuid[], bigint[], int[]),
  cortex.mark_failed(text, uuid[], bigint[], int[], text[], double precision, double precision),
  cortex.list_dead_letters(uuid, int),
  cortex.replay_dead_letters(bigint[], uuid)
from public, anon, authenticated;

-- Whether delivery has anything to do now (the idle loop asks before it sleeps).
create or replace function cortex.outbox_due()
returns boolean language sql stable set search_path = '' as $$
  select exists (select from cortex.outbox o
                 where (o.status = 'pending' and o.next_attempt_at <= now())
                    or (o.status = 'delivering' and o.locked_until < now()));
$$;
comment on function cortex.outbox_due() is
  'True when an outbox message is due for delivery or its lease ran out. Owner only (the delivery loop).';
revoke execute on function cortex.outbox_due() from public, anon, authenticated;
