"""Video decoding and the metric kernels more than one recipe uses (SSIM, LPIPS, precision).

Submodules are imported explicitly (``from pinbench.media.ssim import ssim_map``) so that a recipe that needs
only SSIM never imports torch. Imports ``pinbench.core`` only."""
