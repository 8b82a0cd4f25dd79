"""Memories: the knowledge agents remember, as nodes of the memory graph (issue 13)."""
