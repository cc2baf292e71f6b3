"""HTTP edge of archsearch: FastAPI app, one router per resource. Never imports torch."""
