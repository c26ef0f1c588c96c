"""gpudrv: precompiled GPU driver images, node labels and safe upgrades, the GitOps way."""

__version__ = "0.1.0"
