"""Metric kernels shared by more than one recipe.

``ssim``: batched SSIM equal to scikit-image (PAI-Bench-C blur SSIM, RememBench TempSSIM).
``lpips``: LPIPS built from a local, SHA-256-verified trunk file (RememBench and MIND use LPIPS-Alex v0.1).
Submodules are imported explicitly (``from pinbench.metrics.ssim import ssim_map``) so that a recipe
that needs only SSIM never imports torch.
"""
