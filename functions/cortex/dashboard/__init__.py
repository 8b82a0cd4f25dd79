"""Dashboard: the live pages for the people who run a tenant (`/dashboard`, `/api/v1/dashboard`)."""
