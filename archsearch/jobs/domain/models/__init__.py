"""The model registry: named, versioned, immutable promotions of succeeded jobs' artifacts."""
