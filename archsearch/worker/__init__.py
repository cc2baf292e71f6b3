"""Queue edge of archsearch: the Celery app (`app.create_app(settings)`) and its thin task."""
