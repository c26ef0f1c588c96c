"""Will a GPU job run here: node placement, CUDA's driver requirements, the CUDA gate on an image's
NVIDIA_REQUIRE_CUDA."""
