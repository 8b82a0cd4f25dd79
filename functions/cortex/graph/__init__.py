"""The memory graph: typed nodes and weighted edges, decay, reinforcement, graph version,
traversal and statistics; `/api/v1/graph`, `cortex graph`."""
