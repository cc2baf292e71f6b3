"""Dataset registry. `catalog` is torch-free (the API uses it); `loaders` returns tensors."""
