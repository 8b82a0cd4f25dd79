"""Memories: the write and read API of the memory graph (remember, get, list, update, supersede,
forget; de-duplication and supersession on write), hybrid search and the index worker;
`/api/v1/memories`, `cortex memories`."""
