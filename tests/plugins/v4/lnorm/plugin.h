/* lnorm/plugin.h as it was at ABI version 4, its comments removed: the structs, enums and macros a
 * plugin source compiles against, so that tests/CMakeLists.txt builds a real version-4 binary from an
 * example. The documented header is kernels/include/lnorm/plugin.h (its "Versions" paragraph). */
#ifndef LNORM_PLUGIN_H
#define LNORM_PLUGIN_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
#define LNORM_PLUGIN_ABI_VERSION 4u
enum lnorm_dtype { LNORM_F32 = 0, LNORM_F64 = 1, LNORM_F16 = 2, LNORM_BF16 = 3 };
#define LNORM_DTYPE_BIT(d) (1u << (unsigned)(d))
enum lnorm_op {
  LNORM_LAYERNORM = 0, LNORM_RMSNORM = 1, LNORM_ADD_LAYERNORM = 2, LNORM_ADD_RMSNORM = 3,
  LNORM_LAYERNORM_BWD = 4, LNORM_RMSNORM_BWD = 5
};
#define LNORM_OP_BIT(o) (1u << (unsigned)(o))
typedef struct lnorm_problem {
  int64_t rows;
  int64_t cols;
  int32_t dtype;
  int32_t threads;
  double eps;
  int32_t has_gamma;
  int32_t has_beta;
  int32_t op;
  int32_t param_dtype;
  double gamma_offset;
  int32_t residual_dtype;
} lnorm_problem;
typedef struct lnorm_tensors {
  const void* x;
  const void* gamma;
  const void* beta;
  void* y;
  void* mean;
  void* rstd;
  const void* residual;
  void* h;
  const void* dy;
  void* dx;
  void* dgamma;
  void* dbeta;
  const void* saved_mean;
  const void* saved_rstd;
} lnorm_tensors;
typedef struct lnorm_plugin_kernel {
  const char* name;
  const char* summary;
  uint32_t dtypes;
  int (*why_not)(const lnorm_problem* problem, char* reason, size_t reason_size);
  void (*run)(const lnorm_problem* problem, const lnorm_tensors* tensors);
  uint32_t ops;
} lnorm_plugin_kernel;
typedef struct lnorm_plugin {
  uint32_t abi_version;
  const char* name;
  size_t kernel_count;
  const lnorm_plugin_kernel* kernels;
} lnorm_plugin;
#if defined(__GNUC__)
#define LNORM_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define LNORM_PLUGIN_EXPORT
#endif
#define LNORM_PLUGIN_ENTRY_SYMBOL "lnorm_plugin_entry"
typedef const lnorm_plugin* (*lnorm_plugin_entry_fn)(void);
LNORM_PLUGIN_EXPORT const lnorm_plugin* lnorm_plugin_entry(void);
#ifdef __cplusplus
}
#endif
#endif
