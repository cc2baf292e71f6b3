"""archsearch engine: pure PyTorch + numpy, talks out only through a RunContext."""
