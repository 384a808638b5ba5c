/* FROZEN COPY of lnorm/plugin.h at ABI version 3 (before issue 24's backward), for tests/CMakeLists.txt's
 * test_plugin_add_rms: a plugin built against it is a version-3 binary, which lnorm must still load. Do not edit. */
/* lnorm plugin ABI: how a shared library hands its normalization kernels to `lnorm --plugin PATH.so`.
 *
 * Pure C (C99 and C++), so a plugin can be built by any compiler and does not depend on lnorm's C++
 * types or standard library. A plugin exports exactly one symbol,
 *
 *     const lnorm_plugin* lnorm_plugin_entry(void);   (declared below with C linkage)
 *
 * returning a pointer to static data that stays valid until the library is unloaded. lnorm reads
 * `abi_version` first and refuses a plugin whose version is not the one it was built with, naming the
 * file and both versions, before it reads any other field: the first member never moves, everything
 * after it may change when LNORM_PLUGIN_ABI_VERSION changes.
 *
 * The kernels see exactly what lnorm's own kernels see (kernels/include/lnorm/problem.hpp): a
 * rows x cols row-major matrix normalized along its rows, host buffers, eps already rounded to the
 * format it is used in (f32, or f64 for f64 data). The meaning of the outputs is docs/DESIGN.md's
 * "What LayerNorm means here" and "Ops"; `lnorm verify --plugin PATH.so` checks them against the exact
 * reference.
 *
 * Versions. 3 (this header): Add & Norm (LNORM_ADD_LAYERNORM, LNORM_ADD_RMSNORM) and the residual's
 * storage (lnorm_problem.residual_dtype, appended). 2: the op (LayerNorm or RMSNorm), gamma/beta storage and
 * the gamma offset in lnorm_problem, the operands of the ops to come in lnorm_tensors, and each kernel's ops;
 * all appended to version 1's structs, so an older kernel reads what it always read. lnorm still loads
 * versions 1 and 2: a version-2 kernel is offered LayerNorm and RMSNorm only, a version-1 kernel LayerNorm
 * with gamma/beta in x's dtype and no offset.
 *
 * Kernel names appear as "<plugin name>:<kernel name>" (e.g. "demo:two_pass"), so they never collide
 * with lnorm's own or another plugin's. Both names: letters, digits, '_' and '-' only.
 */
#ifndef LNORM_PLUGIN_H
#define LNORM_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version 3: the layout below. Bump on any change to the structs or the meaning of a field. */
#define LNORM_PLUGIN_ABI_VERSION 3u

/* Storage types, with the same numbers as lnorm::DType. */
enum lnorm_dtype { LNORM_F32 = 0, LNORM_F64 = 1, LNORM_F16 = 2, LNORM_BF16 = 3 };
/* A set of dtypes for lnorm_plugin_kernel.dtypes: LNORM_DTYPE_BIT(LNORM_F32) | LNORM_DTYPE_BIT(LNORM_F64). */
#define LNORM_DTYPE_BIT(d) (1u << (unsigned)(d))

/* Ops, with the same numbers as lnorm::Op (version 2; the add_ ones version 3).
 *   LNORM_LAYERNORM      y = (x - mean)*rstd*(C + gamma) + beta,  rstd = 1/sqrt(var + eps), mean and rstd per row
 *   LNORM_RMSNORM        y = x*rstd*(C + gamma) (+ beta),  rstd = 1/sqrt(mean(x^2) + eps); no mean (tensors.mean is NULL)
 *   LNORM_ADD_LAYERNORM  h = x + residual rounded once to residual_dtype (written to tensors.h), then LayerNorm
 *                        of h as stored: y, mean, rstd as above with h for x
 *   LNORM_ADD_RMSNORM    the same with RMSNorm */
enum lnorm_op { LNORM_LAYERNORM = 0, LNORM_RMSNORM = 1, LNORM_ADD_LAYERNORM = 2, LNORM_ADD_RMSNORM = 3 };
#define LNORM_OP_BIT(o) (1u << (unsigned)(o))

/* The problem: mirrors lnorm::Problem. */
typedef struct lnorm_problem {
  int64_t rows;      /* rows >= 1 */
  int64_t cols;      /* elements per row (the normalized dims flattened), >= 1 */
  int32_t dtype;     /* an lnorm_dtype: storage type of x, gamma, beta, y */
  int32_t threads;   /* the kernel may split rows across this many threads; results must not depend on it */
  double eps;        /* added to the variance inside the sqrt; already rounded to f32 unless dtype is f64 */
  int32_t has_gamma; /* 0: gamma is NULL and means 1 */
  int32_t has_beta;  /* 0: beta is NULL and means 0 */
  /* version 2 */
  int32_t op;           /* an lnorm_op, one of the kernel's ops */
  int32_t param_dtype;  /* storage of gamma and beta: dtype, or LNORM_F32 with f16/bf16 x */
  double gamma_offset;  /* C: y uses (C + gamma); 0 without gamma. Rounded as eps is */
  /* version 3 */
  int32_t residual_dtype; /* Add & Norm: storage of residual and h, dtype or LNORM_F32 with f16/bf16 x (flash-attn's
                             residual_in_fp32); a kernel declines what it does not take through why_not */
} lnorm_problem;

/* Host buffers, C order. x, y: rows*cols elements of dtype; gamma, beta: cols elements of param_dtype or
 * NULL; mean, rstd: rows elements of f32 (f64 when dtype is f64), mean NULL for RMSNorm. f16 is IEEE
 * binary16, bf16 the top 16 bits of an f32; both are stored as uint16_t. The kernel writes every element
 * of y and of each statistic it is given, and nothing else. */
typedef struct lnorm_tensors {
  const void* x;
  const void* gamma;
  const void* beta;
  void* y;
  void* mean;
  void* rstd;
  /* version 2: operands of the other ops: Add & Norm's residual (input) and h (output), rows*cols elements of
   * residual_dtype, NULL for the plain norms; backward (dy, dx, dgamma, dbeta) is to come, NULL */
  const void* residual;
  void* h;
  const void* dy;
  void* dx;
  void* dgamma;
  void* dbeta;
} lnorm_tensors;

typedef struct lnorm_plugin_kernel {
  const char* name;     /* unique within the plugin, e.g. "two_pass" */
  const char* summary;  /* one line: algorithm, accumulation type */
  uint32_t dtypes;      /* LNORM_DTYPE_BIT(...) of every dtype it takes */
  /* 0 when it can run this problem on this machine; otherwise nonzero, with the reason written into
   * reason[0..reason_size) as a NUL-terminated string ("needs AVX-512", "cols must be a multiple of 8").
   * NULL: always available for its dtypes. */
  int (*why_not)(const lnorm_problem* problem, char* reason, size_t reason_size);
  /* Normalizes x into y, mean and rstd. Host pointers in and out. */
  void (*run)(const lnorm_problem* problem, const lnorm_tensors* tensors);
  /* version 2: LNORM_OP_BIT(...) of every op it implements (nonempty); problem->op is one of them. A kernel
   * declines parameter conventions it does not take (f32 gamma/beta, an offset) through why_not. */
  uint32_t ops;
} lnorm_plugin_kernel;

typedef struct lnorm_plugin {
  uint32_t abi_version;  /* LNORM_PLUGIN_ABI_VERSION as the plugin was built; always the first member */
  const char* name;      /* the prefix of its kernels' names, e.g. "demo" */
  size_t kernel_count;
  const lnorm_plugin_kernel* kernels;
} lnorm_plugin;

#if defined(__GNUC__)
#define LNORM_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define LNORM_PLUGIN_EXPORT
#endif

/* The one symbol lnorm looks up with dlsym. Declared here with C linkage, so a C++ plugin defines it
 * simply as `const lnorm_plugin* lnorm_plugin_entry(void) { ... }` after including this header. */
#define LNORM_PLUGIN_ENTRY_SYMBOL "lnorm_plugin_entry"
typedef const lnorm_plugin* (*lnorm_plugin_entry_fn)(void);
LNORM_PLUGIN_EXPORT const lnorm_plugin* lnorm_plugin_entry(void);

#ifdef __cplusplus
}
#endif

#endif /* LNORM_PLUGIN_H */
