// A deliberately bad interpreter entry for the spill check's self-test: a register array indexed
// at run time lives in local memory, which cmake/build_interp.cmake must refuse.
extern "C" __global__ void __launch_bounds__(256, 1) metinterp_selftest(const int* idx, float* out) {
  float a[512];
  for (int i = 0; i < 512; ++i) a[i] = out[i * blockDim.x + threadIdx.x];
  a[idx[threadIdx.x] & 511] += 1.0f;
  float s = 0.f;
  for (int i = 0; i < 512; i += 7) s += a[(i * idx[i]) & 511];
  out[threadIdx.x] = s;
}
