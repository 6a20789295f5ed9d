"""RememBench recipe: revisit-memory scores (CLIP, LPIPS, TempSSIM, Drift) of T2V and I2V rollouts."""
