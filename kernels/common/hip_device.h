// The HIP device subset the op bodies use, written here so the AMD classes build as device-only
// HIP with -nogpuinc -nogpulib (tests/kernels/hip/compile_class.sh): Debian's HIP headers and
// device libraries predate gfx942, so neither is used. Everything is a clang builtin or plain code;
// nothing calls out of the kernel, so no body needs a stack.
//
// A "warp" of the shared bodies is 32 lanes (MET_WARP) on every vendor. A CDNA wavefront is 64
// lanes (MET_WAVE): it runs two warps, and every shuffle here stays inside its own 32-lane half, so
// a body written for 32-lane warps computes the same on both. Code that drives the matrix cores
// (kernels/cdna3/) works in whole wavefronts.
#pragma once
#include <stdint.h>

#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __align__(n) __attribute__((aligned(n)))
#define MET_HIP_FIRST_(n, ...) n
// CUDA's maximum threads per block; CUDA's minimum blocks per SM has no AMD counterpart.
#define __launch_bounds__(...) __attribute__((amdgpu_flat_work_group_size(1, MET_HIP_FIRST_(__VA_ARGS__, 0))))

#define INFINITY __builtin_inff()

// ---------------------------------------------------------------- vector types
struct __attribute__((aligned(16))) uint4 {
  unsigned x, y, z, w;
};
struct __attribute__((aligned(8))) uint2 {
  unsigned x, y;
};
struct __attribute__((aligned(16))) float4 {
  float x, y, z, w;
};
__device__ __forceinline__ uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
__device__ __forceinline__ float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

// ---------------------------------------------------------------- thread and block indices
namespace met_hip {
struct TidX {
  __device__ operator unsigned() const { return __builtin_amdgcn_workitem_id_x(); }
};
struct TidY {
  __device__ operator unsigned() const { return __builtin_amdgcn_workitem_id_y(); }
};
struct BidX {
  __device__ operator unsigned() const { return __builtin_amdgcn_workgroup_id_x(); }
};
struct BidY {
  __device__ operator unsigned() const { return __builtin_amdgcn_workgroup_id_y(); }
};
struct ThreadIdx {
  TidX x;
  TidY y;
};
struct BlockIdx {
  BidX x;
  BidY y;
};
}  // namespace met_hip
#define threadIdx (::met_hip::ThreadIdx{})
#define blockIdx (::met_hip::BlockIdx{})

// ---------------------------------------------------------------- barriers and fences
__device__ __forceinline__ void __syncthreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
// The lanes of a wavefront run in lockstep; this orders their LDS and memory accesses.
__device__ __forceinline__ void __syncwarp() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}
__device__ __forceinline__ void __threadfence() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "agent"); }

// ---------------------------------------------------------------- shuffles (32-lane warps)
namespace met_hip {
__device__ __forceinline__ int lane_id() { return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u)); }
// Value of `v` in lane `src` (an absolute lane of the wavefront); any 4- or 8-byte type.
template <class T>
__device__ __forceinline__ T bpermute(T v, int src) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "shuffles move 4 or 8 bytes");
  int w[sizeof(T) / 4];
  __builtin_memcpy(w, &v, sizeof(T));
  for (unsigned k = 0; k < sizeof(T) / 4; ++k) w[k] = __builtin_amdgcn_ds_bpermute(src << 2, w[k]);
  T out;
  __builtin_memcpy(&out, w, sizeof(T));
  return out;
}
}  // namespace met_hip
// The mask is always the full warp in the bodies; lanes index within the caller's 32-lane half.
template <class T>
__device__ __forceinline__ T __shfl_sync(unsigned, T v, int src) {
  const int lane = met_hip::lane_id();
  return met_hip::bpermute(v, (lane & ~31) | (src & 31));
}
template <class T>
__device__ __forceinline__ T __shfl_xor_sync(unsigned, T v, int mask) {
  const int lane = met_hip::lane_id();
  return met_hip::bpermute(v, (lane & ~31) | ((lane ^ mask) & 31));
}
template <class T>
__device__ __forceinline__ T __shfl_up_sync(unsigned, T v, unsigned delta) {
  const int lane = met_hip::lane_id(), from = (lane & 31) - static_cast<int>(delta);
  return met_hip::bpermute(v, from >= 0 ? (lane & ~31) | from : lane);
}

// ---------------------------------------------------------------- bit casts and bf16
__device__ __forceinline__ float __uint_as_float(unsigned u) { return __builtin_bit_cast(float, u); }
__device__ __forceinline__ unsigned __float_as_uint(float f) { return __builtin_bit_cast(unsigned, f); }
struct __nv_bfloat16 {
  unsigned short x;
};
// Round to nearest even; NaN stays a quiet NaN.
__device__ __forceinline__ __nv_bfloat16 __float2bfloat16_rn(float f) {
  const unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<unsigned short>((u >> 16) | 0x40u)};
  return {static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}

// ---------------------------------------------------------------- arithmetic
// One rounding each, never fused with a neighbour (what CUDA's _rn intrinsics promise).
__device__ __forceinline__ float __fmul_rn(float a, float b) {
#pragma clang fp contract(off)
  return a * b;
}
__device__ __forceinline__ float __fadd_rn(float a, float b) {
#pragma clang fp contract(off)
  return a + b;
}
__device__ __forceinline__ float __fsub_rn(float a, float b) {
#pragma clang fp contract(off)
  return a - b;
}
template <class T>
__device__ __forceinline__ T min(T a, T b) {
  return b < a ? b : a;
}
template <class T>
__device__ __forceinline__ T max(T a, T b) {
  return a < b ? b : a;
}
__device__ __forceinline__ float fmaxf(float a, float b) { return __builtin_fmaxf(a, b); }
__device__ __forceinline__ float fminf(float a, float b) { return __builtin_fminf(a, b); }
__device__ __forceinline__ float fabsf(float a) { return __builtin_fabsf(a); }
__device__ __forceinline__ float sqrtf(float a) { return __builtin_sqrtf(a); }
__device__ __forceinline__ float floorf(float a) { return __builtin_floorf(a); }
__device__ __forceinline__ double floor(double a) { return __builtin_floor(a); }
__device__ __forceinline__ double ceil(double a) { return __builtin_ceil(a); }
// The backend expands exp into v_exp_f32 with range reduction (no device library).
__device__ __forceinline__ float expf(float a) { return __builtin_expf(a); }
// exp(u) - 1 without the cancellation near 0 (a series there), so tanh keeps its relative
// precision for small arguments (softcap divides by the cap).
__device__ __forceinline__ float met_expm1f(float u) {
  if (fabsf(u) >= 0.5f) return expf(u) - 1.f;
  float term = u, sum = u;
  for (int k = 2; k <= 9; ++k) {
    term *= u / k;
    sum += term;
  }
  return sum;
}
__device__ __forceinline__ float tanhf(float a) {
  const float u = met_expm1f(-2.f * fabsf(a));
  return __builtin_copysignf(-u / (u + 2.f), a);
}

// Double precision for rope's angles, where the cpu uses libm: series evaluated far past double
// precision on reduced arguments (|pi r| <= pi / 4 for sincospi, |f ln 2| <= ln 2 / 2 for pow).
namespace met_hip {
constexpr double kPi = 3.14159265358979323846;
constexpr double kLn2 = 0.69314718055994530942;
__device__ __forceinline__ double exp_series(double u) {  // exp(u), |u| <= 0.35
  double term = 1.0, sum = 1.0;
  for (int k = 1; k <= 18; ++k) {
    term *= u / k;
    sum += term;
  }
  return sum;
}
}  // namespace met_hip
__device__ __forceinline__ void sincospi(double x, double* s, double* c) {
  const double n = __builtin_rint(2.0 * x);
  const double t = (x - 0.5 * n) * met_hip::kPi;
  const double t2 = t * t;
  double sn = 0.0, cs = 0.0, ts = t, tc = 1.0;
  for (int k = 0; k < 10; ++k) {  // t^(2k+1)/(2k+1)! and t^(2k)/(2k)!
    sn += ts;
    cs += tc;
    ts *= -t2 / ((2 * k + 2) * (2 * k + 3));
    tc *= -t2 / ((2 * k + 1) * (2 * k + 2));
  }
  switch (static_cast<long long>(n) & 3) {
    case 0:
      *s = sn;
      *c = cs;
      break;
    case 1:
      *s = cs;
      *c = -sn;
      break;
    case 2:
      *s = -sn;
      *c = -cs;
      break;
    default:
      *s = -cs;
      *c = sn;
      break;
  }
}
// x^y for finite x > 0 (rope's theta^(-2i/d)).
__device__ __forceinline__ double pow(double x, double y) {
  const unsigned long long bits = __builtin_bit_cast(unsigned long long, x);
  int e = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  double m = __builtin_bit_cast(double, (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);  // [1, 2)
  if (m > 1.4142135623730951) {
    m *= 0.5;
    ++e;
  }
  const double s = (m - 1.0) / (m + 1.0), s2 = s * s;  // ln m = 2 atanh(s), |s| < 0.172
  double term = s, ln_m = 0.0;
  for (int k = 0; k < 14; ++k) {
    ln_m += term / (2 * k + 1);
    term *= s2;
  }
  const double z = y * (e + 2.0 * ln_m / met_hip::kLn2);  // log2 of the result
  const double k = __builtin_rint(z);
  return __builtin_ldexp(met_hip::exp_series((z - k) * met_hip::kLn2), static_cast<int>(k));
}
