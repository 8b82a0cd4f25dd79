"""Briefings (issue 8, seed 001): an agent's context document, synthesised from the memory graph."""
