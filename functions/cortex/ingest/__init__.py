"""File ingest (issue 8): MEMORY.md, AGENTS.md, notes, logs and exports become memories.

`chunking` reads and splits a file, `service` hands the chunks to public.ingest_chunks (one
transaction: classified, de-duplicated, written through remember, logged), `jobs` polls the drop
folder, `routes` is POST /api/v1/ingest and `cli` is `cortex ingest PATH...`.
"""
