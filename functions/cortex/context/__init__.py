"""Working context: token-budgeted levels 0-3 per contact, rendered at write time; `/api/v1/context`."""
