"""Handoffs between agents and to humans: briefing, status machine, audit trail; `/api/v1/handoffs`."""
