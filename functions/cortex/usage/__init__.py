"""Token usage and daily budgets, and the reservations around Cortex's own model calls; `/api/v1/usage`."""
