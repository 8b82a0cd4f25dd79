"""The security rules of DESIGN.md, checked in the catalog (one query per rule, splinter style).

Each rule returns the offending objects; an empty list is a pass, and the message says how to fix it.
"""

from __future__ import annotations

from typing import Any

import pytest

OUR_SCHEMAS = "('cortex', 'public')"

# Hot SQL helpers called per row by walks and searches, or once per write: they carry no SET clause so that the
# planner inlines them (see the function_search_path_fixed rule and test_inlined_helpers_are_inlined).
INLINED = (
    "cortex.caller_role",
    "cortex.decayed_weight",
    "cortex.is_api_caller",
    "cortex.memory_content_hash",
    "cortex.memory_negated",
    "cortex.memory_node_json",
    "cortex.tsquery_quote",
)

RULES: dict[str, tuple[str, str]] = {
    "rls_enabled": (
        f"""select n.nspname || '.' || c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
            where c.relkind in ('r', 'p') and n.nspname in {OUR_SCHEMAS} and not c.relrowsecurity""",
        "enable row level security on every table",
    ),
    "function_search_path_fixed": (
        f"""select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
            where n.nspname in {OUR_SCHEMAS}
              and not exists (select from pg_depend d where d.objid = p.oid and d.deptype = 'e')
              and not coalesce(p.proconfig::text like '%search_path=%', false)
              -- The one exception: a hot SQL helper the planner must inline (a SET clause forbids
              -- it), invoker-rights, immutable or stable, and saying so in its comment.
              -- test_inlined_helpers_are_inlined proves they are.
              and not (n.nspname || '.' || p.proname = any (array{list(INLINED)!r})
                       and p.prolang = (select oid from pg_language where lanname = 'sql')
                       and not p.prosecdef and p.provolatile in ('i', 's')
                       and obj_description(p.oid, 'pg_proc') like '%Inlined into its callers%')""",
        "add `set search_path = ''` to the function",
    ),
    "security_definer_not_executable_by_anon": (
        f"""select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
            where n.nspname in {OUR_SCHEMAS} and p.prosecdef
              and has_function_privilege('anon', p.oid, 'execute')""",
        "revoke execute on the security definer function from public, anon",
    ),
    "security_definer_not_in_exposed_schema": (
        """select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
           where n.nspname = 'public' and p.prosecdef""",
        "move security definer functions to the private schema cortex",
    ),
    # Owner rights need the caller held to its tenant: a definer function an API role can execute
    # either takes no tenant id (it reads the claims) or runs the one tenant guard.
    "security_definer_guarded": (
        f"""select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
            where n.nspname in {OUR_SCHEMAS} and p.prosecdef
              and (has_function_privilege('authenticated', p.oid, 'execute')
                   or has_function_privilege('service_role', p.oid, 'execute'))
              and 'p_tenant_id' = any (coalesce(p.proargnames, '{{}}'))
              and p.prosrc !~ 'cortex\\.guard_(tenant|writer|acting_agent)\\(p_tenant_id'""",
        "call cortex.guard_tenant(p_tenant_id) (or guard_writer / guard_acting_agent) first",
    ),
    "views_security_invoker": (
        f"""select n.nspname || '.' || c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
            where c.relkind = 'v' and n.nspname in {OUR_SCHEMAS}
              and not coalesce(c.reloptions::text like '%security_invoker=true%'
                               or c.reloptions::text like '%security_invoker=on%', false)""",
        "create views with (security_invoker = true)",
    ),
    "extensions_not_in_public": (
        """select e.extname from pg_extension e join pg_namespace n on n.oid = e.extnamespace
           where n.nspname = 'public'""",
        "create extensions with schema extensions",
    ),
    "no_function_executable_by_public": (
        f"""select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
            where n.nspname in {OUR_SCHEMAS}
              and not exists (select from pg_depend d where d.objid = p.oid and d.deptype = 'e')
              and (p.proacl is null or exists (select from aclexplode(p.proacl) a
                                               where a.grantee = 0 and a.privilege_type = 'EXECUTE'))""",
        "execute is revoked from public by default: grant it to authenticated explicitly",
    ),
    "api_functions_not_executable_by_anon": (
        """select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
           where n.nspname = 'public'
             and not exists (select from pg_depend d where d.objid = p.oid and d.deptype = 'e')
             and has_function_privilege('anon', p.oid, 'execute')""",
        "grant API functions to authenticated only",
    ),
    "every_function_documented": (
        f"""select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
            where n.nspname in {OUR_SCHEMAS}
              and not exists (select from pg_depend d where d.objid = p.oid and d.deptype = 'e')
              and obj_description(p.oid, 'pg_proc') is null""",
        "add `comment on function`",
    ),
    "every_table_documented": (
        f"""select n.nspname || '.' || c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
            where c.relkind in ('r', 'p') and n.nspname in {OUR_SCHEMAS}
              and obj_description(c.oid, 'pg_class') is null""",
        "add `comment on table`",
    ),
    "policies_to_authenticated_with_wrapped_calls": (
        f"""select schemaname || '.' || tablename || ': ' || policyname from pg_policies
            where schemaname in {OUR_SCHEMAS}
              and (not roles <@ array['authenticated']::name[]
                   or coalesce(qual, '') || coalesce(with_check, '') ~ '(?<!SELECT )cortex\\.current_tenant\\(\\)')""",
        "write policies `to authenticated` and wrap auth calls as (select cortex.current_tenant())",
    ),
    "tables_not_granted_to_anon": (
        f"""select n.nspname || '.' || c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
            where c.relkind in ('r', 'p', 'v') and n.nspname in {OUR_SCHEMAS}
              and has_table_privilege('anon', c.oid, 'select,insert,update,delete')""",
        "anon gets no table privileges",
    ),
    # Citus-readiness: each table can be distributed by tenant_id without a schema change.
    "keys_include_tenant_id": (
        f"""select n.nspname || '.' || c.relname || ': ' || con.conname
            from pg_constraint con join pg_class c on c.oid = con.conrelid
            join pg_namespace n on n.oid = c.relnamespace
            where n.nspname in {OUR_SCHEMAS} and con.contype in ('p', 'u', 'f')
              and c.relname <> 'tenants'
              and not exists (select from pg_attribute a where a.attrelid = c.oid
                              and a.attnum = any (con.conkey) and a.attname = 'tenant_id')""",
        "include tenant_id in every primary, unique and foreign key",
    ),
    "every_table_has_tenant_id": (
        f"""select n.nspname || '.' || c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
            where c.relkind in ('r', 'p') and n.nspname in {OUR_SCHEMAS} and c.relname <> 'tenants'
              and not exists (select from pg_attribute a where a.attrelid = c.oid and a.attname = 'tenant_id'
                              and a.attnotnull)""",
        "every table carries a not-null tenant_id",
    ),
    "tenant_policy_columns_indexed": (
        f"""select n.nspname || '.' || c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
            where c.relkind in ('r', 'p') and n.nspname in {OUR_SCHEMAS} and c.relname <> 'tenants'
              and not exists (select from pg_index i join pg_attribute a
                              on a.attrelid = i.indrelid and a.attnum = i.indkey[0]
                              where i.indrelid = c.oid and a.attname = 'tenant_id')""",
        "index tenant_id first (the primary key does it when it leads with tenant_id)",
    ),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_security_rule_holds(admin: Any, rule: str) -> None:
    query, fix = RULES[rule]
    offenders = [next(iter(r.values())) for r in admin.execute(query).fetchall()]  # type: ignore[arg-type]
    assert offenders == [], f"{rule}: {fix}: {offenders}"


# One violating object per rule (created in this test's own database) and a name the rule must report.
VIOLATIONS: dict[str, tuple[list[str], str]] = {
    "rls_enabled": (
        ["create table public.leaky (tenant_id uuid not null primary key)", "comment on table public.leaky is 'x'"],
        "public.leaky",
    ),
    "function_search_path_fixed": (
        ["create function public.unsafe() returns int language sql as 'select 1'"],
        "unsafe()",
    ),
    "security_definer_not_executable_by_anon": (
        [
            "create function cortex.sd_anon() returns int language sql security definer"
            " set search_path = '' as 'select 1'",
            "grant execute on function cortex.sd_anon() to anon",
        ],
        "sd_anon()",
    ),
    "security_definer_not_in_exposed_schema": (
        [
            "create function public.sd_pub() returns int language sql security definer"
            " set search_path = '' as 'select 1'"
        ],
        "sd_pub()",
    ),
    "security_definer_guarded": (
        [
            "create function cortex.sd_unguarded(p_tenant_id uuid) returns int language sql security definer"
            " set search_path = '' as 'select 1'",
            "grant execute on function cortex.sd_unguarded(uuid) to authenticated",
        ],
        "sd_unguarded(uuid)",
    ),
    "views_security_invoker": (["create view public.leaky_view as select 1 as x"], "public.leaky_view"),
    "extensions_not_in_public": (["create extension citext with schema public"], "citext"),
    "no_function_executable_by_public": (
        [
            "create function public.open_fn() returns int language sql set search_path = '' as 'select 1'",
            "grant execute on function public.open_fn() to public",
        ],
        "open_fn()",
    ),
    "api_functions_not_executable_by_anon": (
        [
            "create function public.anon_fn() returns int language sql set search_path = '' as 'select 1'",
            "grant execute on function public.anon_fn() to anon",
        ],
        "anon_fn()",
    ),
    "every_function_documented": (
        ["create function public.undocumented() returns int language sql set search_path = '' as 'select 1'"],
        "undocumented()",
    ),
    "every_table_documented": (["create table cortex.undoc (tenant_id uuid not null primary key)"], "cortex.undoc"),
    "policies_to_authenticated_with_wrapped_calls": (
        ['create policy "Leaky" on cortex.contacts for select to anon using (tenant_id = cortex.current_tenant())'],
        "cortex.contacts: Leaky",
    ),
    "tables_not_granted_to_anon": (["grant select on cortex.contacts to anon"], "cortex.contacts"),
    "keys_include_tenant_id": (
        ["create table cortex.nokey (id int primary key, tenant_id uuid not null)"],
        "cortex.nokey: nokey_pkey",
    ),
    "every_table_has_tenant_id": (["create table cortex.notenant (id int primary key)"], "cortex.notenant"),
    "tenant_policy_columns_indexed": (
        ["create table cortex.noindex (tenant_id uuid not null, id int)"],
        "cortex.noindex",
    ),
}


def test_every_rule_has_a_violation_to_catch() -> None:
    assert set(VIOLATIONS) == set(RULES)


@pytest.mark.parametrize("rule", sorted(RULES))
def test_rule_catches_a_violation(admin: Any, rule: str) -> None:
    """The catalog queries do bite: a violating object made for the rule is reported by it."""
    statements, offender = VIOLATIONS[rule]
    for statement in statements:
        admin.execute(statement)
    found = [str(next(iter(r.values()))) for r in admin.execute(RULES[rule][0]).fetchall()]  # type: ignore[arg-type]
    assert any(f == offender or f.endswith("." + offender) for f in found), (rule, found)


def test_inlined_helpers_are_inlined(admin: Any) -> None:
    """The helpers exempt from `set search_path` are exempt because the planner inlines them: a
    query calling them shows their bodies in its plan, not a call to the function."""
    plan = admin.execute(
        """explain (verbose, costs off)
           select cortex.decayed_weight(e.weight, e.last_reinforced_at, 30, false, now()),
                  cortex.memory_node_json(n), cortex.memory_content_hash(n.title, n.body),
                  cortex.memory_negated(n.body), cortex.tsquery_quote(n.title), cortex.is_api_caller()
           from cortex.memory_edges e join cortex.memory_nodes n on n.tenant_id = e.tenant_id and n.id = e.target_id"""
    ).fetchall()
    text = "\n".join(str(next(iter(r.values()))) for r in plan)
    for body in ("power(", "jsonb_build_object(", "md5(", " ~ ", "replace(", "current_setting('role'"):
        assert body in text, (body, text)
    for helper in INLINED:
        assert helper.split(".")[1] not in text, (helper, text)


def test_inlined_helpers_refuse_a_set_clause_exemption_without_the_comment(admin: Any) -> None:
    """The exemption is narrow: a listed helper that loses its 'Inlined' comment is reported again."""
    admin.execute(
        "comment on function cortex.decayed_weight(real, timestamptz, real, boolean, timestamptz) is 'changed'"
    )
    query, _ = RULES["function_search_path_fixed"]
    found = [str(next(iter(r.values()))) for r in admin.execute(query).fetchall()]  # type: ignore[arg-type]
    assert [f.split("(")[0].removeprefix("cortex.") for f in found] == ["decayed_weight"]
