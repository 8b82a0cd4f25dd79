"""Consolidation (issue 10, seed 003): decay, cluster, merge, promote and relations agents over the memory graph."""
