"""archsearch: search, prune and grow neural architectures as jobs."""
