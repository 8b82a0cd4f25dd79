"""Alerts that reach people: parked jobs, budget refusals and dead letters; `/api/v1/alerts`, `cortex alerts`."""
