"""The security rules of DESIGN.md, checked in the catalog (one query per rule, splinter style).

Each rule returns the offending objects; an empty list is a pass, and the message says how to fix it.
"""

from __future__ import annotations

from typing import Any

import pytest

OUR_SCHEMAS = "('cortex', 'public')"

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
              and not coalesce(p.proconfig::text like '%search_path=%', false)""",
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


def test_rules_catch_a_violation(admin: Any) -> None:
    """The catalog queries do bite: a table without RLS and an undocumented function are found."""
    admin.execute("create table public.leaky (tenant_id uuid not null primary key)")
    admin.execute("create function public.unsafe() returns int language sql as 'select 1'")
    rls = [next(iter(r.values())) for r in admin.execute(RULES["rls_enabled"][0]).fetchall()]  # type: ignore[arg-type]
    path = [next(iter(r.values())) for r in admin.execute(RULES["function_search_path_fixed"][0]).fetchall()]  # type: ignore[arg-type]
    assert "public.leaky" in rls
    assert "unsafe()" in path
