"""Contacts: who the agents talk to (upsert by email, fuzzy search); `/api/v1/contacts`, `cortex contacts`."""
