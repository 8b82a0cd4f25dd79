"""Customers (issue 11, seed 002): two customer agents on Cortex's own memory (docs/customers.md)."""
