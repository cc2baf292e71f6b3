"""Queue edge of archsearch: the Celery app and its thin task."""
