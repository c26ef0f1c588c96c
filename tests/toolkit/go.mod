// The NVIDIA Container Toolkit whose requirement check tests/toolkit compares gpudrv's with
// (reconciler/core/cuda_require.py). Nothing here is built but the toolkit's own package
// internal/requirements, with differential_test.go.txt laid into it by `go test -overlay`.
module gpudrv.test/toolkit

go 1.26.0

require github.com/NVIDIA/nvidia-container-toolkit v1.20.2
