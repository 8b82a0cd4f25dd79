"""Tenancy: tenants, agents and their keys (operator commands; the claims helpers live in SQL)."""
