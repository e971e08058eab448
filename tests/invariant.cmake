# python/sweep/invariant.py: the canonical reduction for PyTorch scripts (tests registered here).
