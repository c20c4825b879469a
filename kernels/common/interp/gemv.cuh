// Weight-bound bodies of the interpreter (decode rows <= MET_DEV_MAX_ROWS): the fused qkv, o/down
// + residual, gate_up + activation, lm_head and plain gemv. A slice owns all rows of the rung and a
// range of output columns (head units for qkv), so each weight byte is read once per step.
//
// The dot products run on the tensor cores with mma.sync m16n8k16: weight rows are the M side
// (16 per tile), activation rows the N side (8 per fragment), and the K order inside each 32-wide
// block is permuted identically for both operands, so every thread loads its A and B fragments
// with 16-byte loads straight from memory (the sum over K does not depend on the order).
#pragma once
#include "common/interp/ops.cuh"
#include "common/mma_sync.cuh"

namespace met_interp {

constexpr int kChunk = 256;  // weight rows one gemv_chunk call covers (res row stride)

// Shared-memory layout of the gemv bodies (floats unless noted), inside the block's dynamic smem.
struct GemvSmem {
  float* red;   // 64
  float* res;   // [MET_DEV_MAX_ROWS][kChunk]
  float* part;  // [MET_INTERP_WARPS][16 * 16] k-split partial tiles
  u16* head;    // [MET_INTERP_WARPS][256] one bf16 head per warp
  u16* xn;      // [rows][K] normalised activations
};
__device__ __forceinline__ GemvSmem gemv_smem(unsigned char* base) {
  GemvSmem s;
  s.red = reinterpret_cast<float*>(base);
  s.res = s.red + 64;
  s.part = s.res + MET_DEV_MAX_ROWS * kChunk;
  s.head = reinterpret_cast<u16*>(s.part + MET_INTERP_WARPS * 256);
  s.xn = s.head + MET_INTERP_WARPS * 256;
  return s;
}

__device__ __forceinline__ void mma_pair(float d[4], const uint4& wa, const uint4& wb, const uint4& xa) {
  const uint32_t a0[4] = {wa.x, wb.x, wa.y, wb.y}, b0[2] = {xa.x, xa.y};
  const uint32_t a1[4] = {wa.z, wb.z, wa.w, wb.w}, b1[2] = {xa.z, xa.w};
  met_mma_bf16_16816(d, a0, b0);
  met_mma_bf16_16816(d, a1, b1);
}

// res[r * kChunk + j] = x[r] . W[w0 + j] for r < R, j < n (n <= kChunk); W is [*, K] bf16,
// K % 32 == 0; x rows are `xs` elements apart (global or shared memory). Block-uniform call.
__device__ void gemv_chunk(const u16* W, int64_t K, int64_t w0, int n, const u16* x, int64_t xs, int R, GemvSmem sm) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int tiles = (n + 15) / 16;
  int ks = 1;
  while (ks * 2 * tiles <= MET_INTERP_WARPS) ks *= 2;
  const int64_t nb = K / 32;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int item = warp; item < tiles * ks; item += MET_INTERP_WARPS) {
    const int tile = item / ks, kp = item % ks;
    const int64_t b0 = kp * nb / ks, b1 = (kp + 1) * nb / ks;
    const int ra = min(tile * 16 + g, n - 1), rb = min(tile * 16 + g + 8, n - 1);
    const u16* pa = W + (w0 + ra) * K + 8 * t;
    const u16* pb = W + (w0 + rb) * K + 8 * t;
    const u16* x0 = g < R ? x + g * xs + 8 * t : nullptr;
    const u16* x1 = g + 8 < R ? x + (g + 8) * xs + 8 * t : nullptr;
    float acc0[4] = {0.f, 0.f, 0.f, 0.f}, acc1[4] = {0.f, 0.f, 0.f, 0.f};
    int64_t b = b0;
    for (; b + 8 <= b1; b += 8) {
      uint4 wa[8], wb[8], xa[8], xb[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        wa[u] = load_weight16(pa + (b + u) * 32);
        wb[u] = load_weight16(pb + (b + u) * 32);
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        xa[u] = x0 ? *reinterpret_cast<const uint4*>(x0 + (b + u) * 32) : zero;
        xb[u] = x1 ? *reinterpret_cast<const uint4*>(x1 + (b + u) * 32) : zero;
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        mma_pair(acc0, wa[u], wb[u], xa[u]);
        if (R > 8) mma_pair(acc1, wa[u], wb[u], xb[u]);
      }
    }
    for (; b < b1; ++b) {
      const uint4 wa = load_weight16(pa + b * 32), wb = load_weight16(pb + b * 32);
      const uint4 xa = x0 ? *reinterpret_cast<const uint4*>(x0 + b * 32) : zero;
      const uint4 xb = x1 ? *reinterpret_cast<const uint4*>(x1 + b * 32) : zero;
      mma_pair(acc0, wa, wb, xa);
      if (R > 8) mma_pair(acc1, wa, wb, xb);
    }
    // D fragment: [0],[1] at (weight row g, act rows 2t, 2t+1), [2],[3] at weight row g + 8.
    if (ks == 1) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = tile * 16 + g + (e >= 2 ? 8 : 0), r0 = 2 * t + (e & 1);
        if (m < n && r0 < R) sm.res[r0 * kChunk + m] = acc0[e];
        if (m < n && r0 + 8 < R) sm.res[(r0 + 8) * kChunk + m] = acc1[e];
      }
    } else {
      float* p = sm.part + warp * 256;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = g + (e >= 2 ? 8 : 0), r0 = 2 * t + (e & 1);
        p[m * 16 + r0] = acc0[e];
        p[m * 16 + r0 + 8] = acc1[e];
      }
    }
  }
  if (ks > 1) {
    __syncthreads();
    for (int i = threadIdx.x; i < tiles * 256; i += MET_INTERP_THREADS) {
      const int tile = i / 256, m = (i % 256) / 16, r0 = i % 16;
      if (tile * 16 + m >= n || r0 >= R) continue;
      float sum = 0.f;
      for (int kp = 0; kp < ks; ++kp) sum += sm.part[(tile * ks + kp) * 256 + m * 16 + r0];
      sm.res[r0 * kChunk + tile * 16 + m] = sum;
    }
  }
  __syncthreads();
}

// xn[r] = bf16(x[r] * inv_rms(x[r]) * w) for the slice's rows, in shared memory.
__device__ void rmsnorm_rows_to_smem(const u16* x, const u16* w, int64_t K, int R, float eps, GemvSmem sm) {
  for (int r = 0; r < R; ++r) {
    const float inv = inv_rms_block(x + r * K, K, eps, sm.red);
    for (int64_t i = threadIdx.x; i < K; i += MET_INTERP_THREADS)
      sm.xn[r * K + i] = to_bf(bf(x[r * K + i]) * inv * bf(w[i]));
  }
  __syncthreads();
}

// gemv, o/down + residual, gate_up + act, lm_head (+ softcap) + optional argmax.
__device__ void body_gemv_family(const MetDevInstr& in, uint32_t s, unsigned char* smem) {
  const GemvSmem sm = gemv_smem(smem);
  const SliceRange rr = slice_rows(in, s);
  const int R = static_cast<int>(rr.end - rr.begin);
  const int64_t K = in.w_cols;
  const bool gate_up = in.body == MET_BODY_GATE_UP_SILU || in.body == MET_BODY_GATE_UP_GELU;
  const bool lm = in.body == MET_BODY_LM_HEAD_ARGMAX || in.body == MET_BODY_LM_HEAD_SOFTCAP_ARGMAX;
  const bool normed = gate_up || lm;
  const int wk = gate_up || lm ? 2 : 1;  // weight operand
  const u16* W = op<const u16>(in, wk);
  const u16* x = op<const u16>(in, 0) + (in.ints[1] + rr.begin) * K;
  const int64_t N = gate_up ? in.w_rows / 2 : in.w_rows;
  const SliceRange c = slice_cols(in, s, N);
  if (R <= 0 || c.begin >= c.end) return;
  if (normed) {
    rmsnorm_rows_to_smem(x, op<const u16>(in, 1), K, R, in.imms[0], sm);
    x = sm.xn;
  }
  const int width = gate_up ? kChunk / 2 : kChunk;
  for (int64_t c0 = c.begin; c0 < c.end; c0 += width) {
    const int n = static_cast<int>(min(static_cast<int64_t>(width), c.end - c0));
    gemv_chunk(W, K, c0, n, x, K, R, sm);
    if (gate_up) {
      // gate values stay in res[.., 0..n); the up rows go to res[.., 128..128+n).
      GemvSmem up = sm;
      up.res = sm.res + kChunk / 2;
      gemv_chunk(W, K, N + c0, n, x, K, R, up);
    }
    for (int i = threadIdx.x; i < R * n; i += MET_INTERP_THREADS) {
      const int r = i / n, j = i % n;
      const float v = sm.res[r * kChunk + j];
      const int64_t col = c0 + j, row = rr.begin + r;
      switch (in.body) {
        case MET_BODY_GEMV: op<u16>(in, 2)[row * N + col] = to_bf(v); break;
        case MET_BODY_GEMV_O_RESIDUAL:
        case MET_BODY_GEMV_DOWN_RESIDUAL: {
          u16* y = op<u16>(in, 2) + row * N + col;
          *y = to_bf(bf(*y) + bf(to_bf(v)));
          break;
        }
        case MET_BODY_GATE_UP_SILU:
        case MET_BODY_GATE_UP_GELU: {
          const float gt = bf(to_bf(v)), u = bf(to_bf(sm.res[r * kChunk + kChunk / 2 + j]));
          const float a = in.body == MET_BODY_GATE_UP_SILU ? silu_f(gt) : gelu_f(gt);
          op<u16>(in, 3)[row * N + col] = to_bf(a * u);
          break;
        }
        default: {  // lm_head: logits (bf16), capped when asked
          float lg = bf(to_bf(v));
          if (in.body == MET_BODY_LM_HEAD_SOFTCAP_ARGMAX) lg = bf(to_bf(in.imms[1] * tanhf(lg / in.imms[1])));
          sm.res[r * kChunk + j] = lg;
          if (in.ops[3]) op<u16>(in, 3)[row * N + col] = to_bf(lg);
          break;
        }
      }
    }
    __syncthreads();
  }
  if (lm && in.ops[4]) {  // tokens: only when the slice holds the whole vocabulary (emit's rule)
    for (int r = 0; r < R; ++r) {
      const int t = argmax_block(op<const u16>(in, 3) + (rr.begin + r) * N, N, sm.red, reinterpret_cast<int*>(sm.red + 32));
      if (threadIdx.x == 0) op<int>(in, 4)[rr.begin + r] = t;
      __syncthreads();
    }
  }
}

// rmsnorm -> qkv over head units [u0, u1) -> [q/k norm] -> rope -> q out, K/V to the cache slot.
// ops: x, norm_w, w_qkv, [q_norm_w, k_norm_w,] positions, slots, q_out, k_cache, v_cache, inv_freq.
__device__ void body_qkv(const MetDevInstr& in, uint32_t s, unsigned char* smem) {
  const GemvSmem sm = gemv_smem(smem);
  const bool qk = in.body == MET_BODY_QKV_QKNORM_ROPE;
  const int o = qk ? 2 : 0;  // operand shift after the q/k norm weights
  const SliceRange rr = slice_rows(in, s);
  const int R = static_cast<int>(rr.end - rr.begin);
  const int64_t K = in.w_cols;
  const int heads = static_cast<int>(in.ints[2]), kvh = static_cast<int>(in.ints[3]);
  const int hd = static_cast<int>(in.ints[4]), rot = static_cast<int>(in.ints[5]);
  const SliceRange u = slice_cols(in, s, heads + 2 * kvh);
  if (R <= 0 || u.begin >= u.end) return;
  const u16* x = op<const u16>(in, 0) + (in.ints[1] + rr.begin) * K;
  rmsnorm_rows_to_smem(x, op<const u16>(in, 1), K, R, in.imms[0], sm);
  const u16* W = op<const u16>(in, 2);
  const u16* qn = qk ? op<const u16>(in, 3) : nullptr;
  const u16* kn = qk ? op<const u16>(in, 4) : nullptr;
  const int* pos = op<const int>(in, 3 + o);
  const int64_t* slots = op<const int64_t>(in, 4 + o);
  u16* q_out = op<u16>(in, 5 + o);
  u16* kc = op<u16>(in, 6 + o);
  u16* vc = op<u16>(in, 7 + o);
  const float* table = op<const float>(in, 8 + o);
  const int per_chunk = kChunk / hd;  // whole heads per chunk
  const int64_t kw = static_cast<int64_t>(kvh) * hd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  u16* hbuf = sm.head + warp * 256;
  for (int64_t h0 = u.begin; h0 < u.end; h0 += per_chunk) {
    const int nh = static_cast<int>(min(static_cast<int64_t>(per_chunk), u.end - h0));
    gemv_chunk(W, K, h0 * hd, nh * hd, sm.xn, K, R, sm);
    for (int item = warp; item < R * nh; item += MET_INTERP_WARPS) {
      const int r = item / nh, j = item % nh;
      const int64_t unit = h0 + j, row = rr.begin + r;
      for (int i = lane; i < hd; i += 32) hbuf[i] = to_bf(sm.res[r * kChunk + j * hd + i]);
      __syncwarp();
      if (unit < heads + kvh) {
        const u16* nw = unit < heads ? qn : kn;
        if (nw) {
          const float inv = inv_rms_warp(hbuf, hd, in.imms[0]);
          for (int i = lane; i < hd; i += 32) hbuf[i] = to_bf(bf(hbuf[i]) * inv * bf(nw[i]));
          __syncwarp();
        }
        rope_head_warp(hbuf, hd, rot, in.imms[1], table, pos[row]);
        __syncwarp();
      }
      u16* dst = unit < heads ? q_out + row * heads * hd + unit * hd
                 : unit < heads + kvh ? kc + slots[row] * kw + (unit - heads) * hd
                                      : vc + slots[row] * kw + (unit - heads - kvh) * hd;
      for (int i = lane; i < hd; i += 32) dst[i] = hbuf[i];
      __syncwarp();
    }
    __syncthreads();
  }
}

}  // namespace met_interp
