// Two tiny kernels for the kernel report's parser tests: one on tensor cores
// (mma.sync bf16, HMMA in SASS), one with a dynamically indexed local array
// (STACK, STL/LDL in SASS).
extern "C" __global__ void mma_tile(const unsigned* a, const unsigned* b, float* c) {
    unsigned a0 = a[threadIdx.x], a1 = a[threadIdx.x + 32], a2 = a[threadIdx.x + 64], a3 = a[threadIdx.x + 96];
    unsigned b0 = b[threadIdx.x], b1 = b[threadIdx.x + 32];
    float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    c[threadIdx.x * 4 + 0] = d0; c[threadIdx.x * 4 + 1] = d1;
    c[threadIdx.x * 4 + 2] = d2; c[threadIdx.x * 4 + 3] = d3;
}

extern "C" __global__ void local_array(const int* idx, double* out, int n) {
    double acc[8];
    for (int i = 0; i < 8; i++) acc[i] = i * out[i];
    acc[idx[n] & 7] += 1.0;
    out[threadIdx.x] = acc[idx[threadIdx.x] & 7];
}
