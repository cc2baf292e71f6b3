"""The web dashboard: pages, their session, templates and static assets."""
