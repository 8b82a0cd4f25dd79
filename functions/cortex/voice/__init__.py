"""Voice (issue 9, seed 004): two-tier caller memory for voice agents (docs/voice.md)."""
