// A header: not compiled on its own, #included by other.cu.
#pragma once
__device__ float scale2(float v) { return 2.0f * v; }
