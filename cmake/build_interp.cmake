# Run as `cmake -DNVCC=<nvcc> -DSRC=<interp.cu> -DINC=<kernels dir> -DENTRY=<kernel name>
#   -DCUBIN=<out.cubin> -DLOG=<ptxas log> -DOUT=<image.cpp> -DFUNC=<C++ function> -P build_interp.cmake`.
# Compiles the persistent interpreter for sm_90a, refuses one whose bodies spill registers or use
# local memory (ptxas -v: stack frame, spill stores, spill loads all 0 in every function, at most
# the call-site save in the loop kernel), and writes a C++ source that returns the cubin's bytes.
# The device probe (kernels/hopper/probe.cu) is built the same way with -DCALL_SAVE=0 (no function
# may hold any local memory) and -DKERNELS=<a,b,...> (every one must be in the image). An image
# whose wgmma ptxas serializes is refused too: its tensor cores would idle between instructions.
# 64: the loop kernel's frame for its call to run_body is 16 bytes with the gemv family's one
# out-of-line body, 32 since the fp8 bodies (gemv_slice's fp8 chunks, the fp8 qkv and GEMM copies)
# joined the call tree; saved once per entry, never inside a body's loop. With the 256-dim wgmma
# flash prefill instance (inlined: out of line, ptxas serializes its wgmma) the kernel holds 48
# bytes of frame, 32 of spill stores and 64 of loads; its SASS (cuobjdump on the device,
# perf-data/h100-sxm/20261206T1710Z-flash-wgmma-256) puts them in the kernel's prologue, the
# flash passes' setup by thread 0 (once a pass) and single reloads outside every loop, and the
# decode steps of three models moved by at most 0.4% in the same call.
if(NOT DEFINED CALL_SAVE)
  set(CALL_SAVE 64)
endif()
execute_process(
  COMMAND ${NVCC} -cubin -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -I${INC} -Xptxas -v -o ${CUBIN} ${SRC}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(WRITE ${LOG} "${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nvcc failed on ${SRC} (log: ${LOG}):\n${err}")
endif()
string(REPLACE "," ";" kernels "${ENTRY},${KERNELS}")
foreach(k ${kernels})
  string(FIND "${err}" "Function properties for ${k}\n" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "ptxas -v printed no properties for ${k} (log: ${LOG})")
  endif()
endforeach()
# ptxas says so when it serializes wgmma (C7511, C7515) or waits on one before a register it
# defines is used (C7517): either way the tensor cores idle between instructions.
string(REGEX MATCH "[^\n]*(wgmma[^\n]*serialized|warpgroup.wait is injected)[^\n]*" serialized "${err}")
if(serialized)
  message(FATAL_ERROR "ptxas serializes wgmma in ${SRC} (log: ${LOG}):\n${serialized}")
endif()
# Every function ptxas compiled: out-of-line bodies must keep everything in registers and shared
# memory; the loop kernel may hold at most CALL_SAVE bytes, the registers it saves around the call
# to an out-of-line body (the gemv family's one shared copy, kernels/common/gemv.cuh), and so may
# the dispatcher it calls (run_body).
set(kCallSave ${CALL_SAVE})
string(REGEX MATCHALL "Function properties for [^\n]+\n[^\n]*bytes spill loads" blocks "${err}")
foreach(block ${blocks})
  string(REGEX MATCH "Function properties for ([^\n]+)" _ "${block}")
  set(fn "${CMAKE_MATCH_1}")
  string(REGEX MATCH "([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads" m "${block}")
  if(NOT m)
    message(FATAL_ERROR "cannot read the stack frame and spills of ${fn} from ptxas -v (log: ${LOG})")
  endif()
  set(limit 0)
  if(fn STREQUAL ENTRY)
    set(limit ${kCallSave})
    set(props "${block}")
  endif()
  # The loop's one call to the bodies it does not inline (kernels/common/interp/loop.cuh): with
  # the wgmma bodies inlined into the kernel, ptxas has it save a few callee-saved registers too
  # (spill stores without a stack frame of its own), once per slice, never inside a body's loop.
  string(FIND "${fn}" "run_body" dispatcher)  # (not if(MATCHES): it would reset CMAKE_MATCH_n)
  if(NOT dispatcher EQUAL -1)
    set(limit ${kCallSave})
  endif()
  if(CMAKE_MATCH_1 GREATER limit OR CMAKE_MATCH_2 GREATER limit OR CMAKE_MATCH_3 GREATER limit)
    message(FATAL_ERROR "${fn} uses local memory: ${m} (log: ${LOG}; allowed: ${limit} bytes). The interpreter "
                        "must keep every body in registers and shared memory: shrink the body that grew, or index "
                        "register arrays only with compile-time constants.")
  endif()
  if(fn STREQUAL ENTRY)
    set(entry_m "${m}")
  endif()
endforeach()
string(FIND "${err}" "Function properties for ${ENTRY}" at)
string(SUBSTRING "${err}" ${at} 400 props)
set(m "${entry_m}")
string(REGEX MATCH "Used ([0-9]+) registers" r "${props}")
message(STATUS "${ENTRY}: ${r}, ${m}")
file(READ ${CUBIN} hex HEX)
string(LENGTH "${hex}" hexlen)
math(EXPR n "${hexlen} / 2")
# The bytes as one string literal of \x escapes (each followed by a backslash or the closing quote,
# so none runs into the next): gcc compiles it in a fraction of a second, a brace list of 3 MB of
# 0x.. items in about 10 s. The array holds the literal's terminating zero too; the image is n bytes.
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" bytes "${hex}")
math(EXPR n_with_zero "${n} + 1")
file(WRITE ${OUT}.tmp "// generated by cmake/build_interp.cmake from ${SRC}; do not edit\n#include \"interp/cuda_backend.hpp\"\n\n#pragma GCC diagnostic ignored \"-Woverlength-strings\"\n\nnamespace met::interp {\nnamespace {\nalignas(64) const unsigned char kImage[${n_with_zero}] = \"${bytes}\";\n}  // namespace\n\nInterpImage ${FUNC}() { return {kImage, ${n}}; }\n\n}  // namespace met::interp\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
