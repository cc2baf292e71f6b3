"""Architecture pruning: the two-temperature mask trainer, baselines at the same density
(random, one-shot magnitude, iterative magnitude pruning with rewinding, layer-wise
reshuffle), compaction of masked models and Laplacian spectra.

Papers: "Differentiable Architecture Pruning for Transfer Learning" and "Disentangling
Neural Architectures and Weights" (see each module's docstring for the section).
"""
