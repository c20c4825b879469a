// The self-test's good entry: everything in registers.
extern "C" __global__ void __launch_bounds__(256, 1) metinterp_selftest(const float* in, float* out) {
  out[threadIdx.x] = in[threadIdx.x] * 2.0f;
}
