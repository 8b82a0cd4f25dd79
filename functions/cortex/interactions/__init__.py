"""Interactions: the append-only log, summarised at write time, and its backfill import; `/api/v1/interactions`."""
