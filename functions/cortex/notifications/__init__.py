"""Notifications: the outbox, signed webhook delivery, dead letters and webhook endpoints; `/api/v1/webhooks`."""
