"""The web dashboard (issue 13): pages, their session, templates and static assets."""
