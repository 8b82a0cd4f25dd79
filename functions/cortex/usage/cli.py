"""The `cortex` commands of usage."""

from __future__ import annotations

import click

from cortex.console import current_state, emit, table

# --- usage and budgets -----------------------------------------------------------------------------


@click.group()
def usage() -> None:
    """Token usage and daily budgets."""


@usage.command("summary")
@click.option("--period", default="day", show_default=True, help="day, week or month (tenant time zone).")
@click.option("--for-agent", "agent", help="Only this agent.")
def usage_summary(period: str, agent: str | None) -> None:
    """Totals, by agent, by model and budget status (usage_summary)."""
    from cortex.usage import service as usage_svc

    result = usage_svc.usage_summary(current_state().claims(), period, agent)
    rows = [{"agent": a, **v} for a, v in result["by_agent"].items()]
    columns = (("agent", "agent"), ("total_tokens", "tokens"), ("cost_usd", "cost"), ("operations", "ops"))
    totals = result["totals"]
    head = f"{result['period']} from {result['start']} to {result['end']}: {totals['total_tokens']} tokens, "
    emit(result, head + f"${totals['cost_usd']}" + ("\n" + table(rows, columns) if rows else ""))


@usage.command("budget-check")
@click.argument("agent")
@click.option("--estimated-tokens", type=click.IntRange(0), default=0, show_default=True)
def usage_budget_check(agent: str, estimated_tokens: int) -> None:
    """Whether an operation fits the agent's daily budget, with a recommendation (budget_check)."""
    from cortex.usage import service as usage_svc

    result = usage_svc.budget_check(current_state().claims(), agent, estimated_tokens)
    emit(result, f"{result['agent']}: {result['used_today']}/{result['daily_budget']} used, "
                 f"{result['remaining']} left -> {result['recommendation']}")  # fmt: skip
