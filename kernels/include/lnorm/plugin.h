/* lnorm plugin ABI: how a shared library hands its normalization kernels to `lnorm --plugin PATH.so`.
 *
 * Pure C (C99 and C++), so a plugin can be built by any compiler and does not depend on lnorm's C++
 * types or standard library. A plugin exports exactly one symbol,
 *
 *     const lnorm_plugin* lnorm_plugin_entry(void);   (declared below with C linkage)
 *
 * returning a pointer to static data that stays valid until the library is unloaded. lnorm reads
 * `abi_version` first and refuses a version it does not know, naming the file and both versions, before it
 * reads any other field: the first member never moves.
 *
 * The rule from version 5 on: the version stays 5. lnorm_plugin_kernel is frozen (the stride of every plugin's
 * kernel array, so a source written for versions 2-4 rebuilt against this header is what it was); what a
 * kernel declares beyond it goes in an lnorm_kernel_decl, which carries its own size. lnorm_problem and
 * lnorm_tensors grow by appending fields and carry lnorm's size of them. Each side reads a field of the
 * other's struct only when it lies inside the size that struct gives; zero in an appended field means "not
 * given". A new op is new values of the parts an op is made of (norm, prologue, epilogue, direction), which a
 * kernel declares in its decl's ops; lnorm refuses a plugin that declares an op it does not know, naming the
 * op, and never hands a kernel an op it did not declare. New operands and parameters are appended fields.
 *
 * The kernels see exactly what lnorm's own kernels see (kernels/include/lnorm/problem.hpp): a
 * rows x cols row-major matrix normalized along its rows, host buffers, eps already rounded to the
 * format it is used in (f32, or f64 for f64 data). The meaning of the outputs is docs/DESIGN.md's
 * "What LayerNorm means here" and "Ops"; `lnorm verify --plugin PATH.so` checks them against the exact
 * reference.
 *
 * Versions. 5 (this header, the last number): the growth rule above; the op as its parts (lnorm_problem.norm,
 * prologue, epilogue, direction; lnorm_kernel_decl.ops); struct sizes. 4: the backward ops (LNORM_LAYERNORM_BWD, LNORM_RMSNORM_BWD) and the forward's saved
 * statistics they read (lnorm_tensors.saved_mean, saved_rstd, appended). 3: Add & Norm (LNORM_ADD_LAYERNORM,
 * LNORM_ADD_RMSNORM) and the residual's storage (lnorm_problem.residual_dtype, appended). 2: the op (LayerNorm or RMSNorm), gamma/beta storage and
 * the gamma offset in lnorm_problem, the operands of the ops to come in lnorm_tensors, and each kernel's ops;
 * all appended to version 1's structs, so an older kernel reads what it always read. lnorm still loads
 * versions 1 to 4: a version-4 kernel is offered the ops of its `ops` mask, a version-3 kernel the forward ops,
 * a version-2 kernel LayerNorm and RMSNorm only, a version-1 kernel LayerNorm with gamma/beta in x's dtype and
 * no offset.
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

/* Version 5: the layout below, grown by appending from now on (the rule above); never bumped again. */
#define LNORM_PLUGIN_ABI_VERSION 5u

/* Storage types, with the same numbers as lnorm::DType. */
enum lnorm_dtype { LNORM_F32 = 0, LNORM_F64 = 1, LNORM_F16 = 2, LNORM_BF16 = 3 };
/* A set of dtypes for lnorm_plugin_kernel.dtypes: LNORM_DTYPE_BIT(LNORM_F32) | LNORM_DTYPE_BIT(LNORM_F64). */
#define LNORM_DTYPE_BIT(d) (1u << (unsigned)(d))

/* Ops, with the same numbers as lnorm::Op (version 2; the add_ ones version 3; the _bwd ones version 4).
 *   LNORM_LAYERNORM      y = (x - mean)*rstd*(C + gamma) + beta,  rstd = 1/sqrt(var + eps), mean and rstd per row
 *   LNORM_RMSNORM        y = x*rstd*(C + gamma) (+ beta),  rstd = 1/sqrt(mean(x^2) + eps); no mean (tensors.mean is NULL)
 *   LNORM_ADD_LAYERNORM  h = x + residual rounded once to residual_dtype (written to tensors.h), then LayerNorm
 *                        of h as stored: y, mean, rstd as above with h for x
 *   LNORM_ADD_RMSNORM    the same with RMSNorm
 *   LNORM_LAYERNORM_BWD  the gradients of LayerNorm at x (and gamma) for the upstream gradient dy: with
 *                        g = dy*(C + gamma), xhat = (x - mean)*rstd and means over the row,
 *                        dx = rstd*(g - mean(g) - xhat*mean(g*xhat)) (x's dtype), and per column
 *                        dgamma = sum over rows of dy*xhat, dbeta = sum over rows of dy (param_dtype). Reads x,
 *                        gamma, dy and the forward's saved statistics (saved_mean, saved_rstd: lnorm passes the
 *                        exact ones rounded to the stats format, as a framework saves them; a kernel may use or
 *                        recompute them); writes dx, dgamma when has_gamma, dbeta when has_beta. dgamma and
 *                        dbeta must be the same bits for every `threads` (a fixed reduction order, not atomics).
 *   LNORM_RMSNORM_BWD    the same for RMSNorm: xhat = x*rstd, dx = rstd*(g - xhat*mean(g*xhat)); saved_mean NULL */
enum lnorm_op {
  LNORM_LAYERNORM = 0, LNORM_RMSNORM = 1, LNORM_ADD_LAYERNORM = 2, LNORM_ADD_RMSNORM = 3,
  LNORM_LAYERNORM_BWD = 4, LNORM_RMSNORM_BWD = 5
};
#define LNORM_OP_BIT(o) (1u << (unsigned)(o))

/* Version 5: an op as its parts (lnorm/op.hpp; docs/DESIGN.md "Ops"). The six ops above are
 *   LNORM_LAYERNORM = {LAYERNORM, NONE, Y, FWD}, LNORM_ADD_RMSNORM = {RMSNORM, RESIDUAL_ADD, Y, FWD},
 *   LNORM_LAYERNORM_BWD = {LAYERNORM, NONE, Y, BWD}, ... Later ops are new values of these parts. */
enum lnorm_norm { LNORM_NORM_LAYERNORM = 0, LNORM_NORM_RMSNORM = 1 };
enum lnorm_prologue { LNORM_PROLOGUE_NONE = 0, LNORM_PROLOGUE_RESIDUAL_ADD = 1 };
enum lnorm_epilogue {
  LNORM_EPILOGUE_Y = 0,         /* y in x's dtype */
  LNORM_EPILOGUE_QUANTIZED = 1  /* q = Q(y/s) instead of y, with its scales (lnorm/quant.hpp, docs/cli.md "Quantized
                                   outputs"): lnorm_problem.quant_* say the format and scaling, lnorm_tensors.q and
                                   scales are the outputs; y, mean and rstd are NULL. Appended to version 5 */
};
/* The quantized epilogue's formats and scalings, with the same numbers as lnorm::QuantFormat and lnorm::Scaling. */
enum lnorm_quant_format {
  LNORM_FP8_E4M3 = 0,
  LNORM_FP8_E5M2 = 1,
  LNORM_INT8 = 2,
  LNORM_FP8_E4M3FNUZ = 3, /* appended: AMD's FNUZ (bias 8, max 240; NaN 0x80 only, no -0) */
  LNORM_FP8_E5M2FNUZ = 4, /* appended: bias 16, max 57344; NaN 0x80 only, no Inf, no -0 */
  LNORM_FP4_E2M1 = 5      /* appended: OCP E2M1, max 6, no NaN/Inf; two codes a byte, element 2i in the low nibble */
};
enum lnorm_scaling {
  LNORM_SCALING_TENSOR = 0,
  LNORM_SCALING_ROW = 1,
  LNORM_SCALING_GROUP = 2,
  LNORM_SCALING_MX = 3,
  LNORM_SCALING_NVFP4 = 4 /* appended: fp4_e2m1 in blocks of 16, E4M3 block scales, quant_global_scale (lnorm/quant.hpp) */
};
/* mx's exponent rules (lnorm/quant.hpp MxRule), appended with lnorm_problem.quant_mx_rule */
enum lnorm_mx_rule { LNORM_MX_FLOOR = 0, LNORM_MX_CEIL = 1, LNORM_MX_EVEN = 2, LNORM_MX_RCEIL = 3 };
/* row and group scales' storage (lnorm/quant.hpp ScaleFormat), appended with lnorm_problem.quant_scale_format */
enum lnorm_scale_format { LNORM_SCALE_F32 = 0, LNORM_SCALE_UE8M0 = 1 };
enum lnorm_direction { LNORM_DIRECTION_FWD = 0, LNORM_DIRECTION_BWD = 1 };
typedef struct lnorm_op_desc {
  const char* name;   /* optional (NULL), for messages: what the plugin calls the op */
  int32_t norm;       /* an lnorm_norm */
  int32_t prologue;   /* an lnorm_prologue */
  int32_t epilogue;   /* an lnorm_epilogue */
  int32_t direction;  /* an lnorm_direction */
} lnorm_op_desc;

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
  /* version 5 */
  uint32_t struct_size; /* sizeof(lnorm_problem) as lnorm was built: fields past it are not given */
  int32_t norm;         /* the op as its parts (op above keeps the number of the six ops of versions 2-4, */
  int32_t prologue;     /*   -1 for an op without one) */
  int32_t epilogue;
  int32_t direction;
  /* version 5, appended: the quantized epilogue's parameters, read only when epilogue is LNORM_EPILOGUE_QUANTIZED */
  int32_t quant_format;   /* an lnorm_quant_format */
  int32_t quant_scaling;  /* an lnorm_scaling */
  int64_t quant_group;    /* elements per scale: the group's G, 32 for mx, cols for row and tensor */
  float quant_scale;      /* tensor scaling's s (q = Q(y / s)); 0 otherwise */
  /* appended (nvfp4): the global scale G the block scales are taken against, always resolved (> 0); 0 otherwise */
  float quant_global_scale;
  int32_t quant_mx_rule; /* appended: mx's exponent rule, an lnorm_mx_rule (LNORM_MX_FLOOR otherwise) */
  int32_t quant_scale_format; /* appended: row/group scales as f32 or UE8M0 codes, an lnorm_scale_format */
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
   * residual_dtype, NULL for the plain norms; the backward's (version 4): dy (input) and dx (output), rows*cols
   * elements of dtype; dgamma and dbeta (outputs), cols elements of param_dtype, NULL when not asked for. x,
   * gamma are the forward's inputs; beta, y, mean, rstd are NULL in a backward problem */
  const void* residual;
  void* h;
  const void* dy;
  void* dx;
  void* dgamma;
  void* dbeta;
  /* version 4: the backward's saved statistics (inputs), rows elements of f32 (f64 when dtype is f64);
   * saved_mean NULL for RMSNorm; both NULL in a forward problem */
  const void* saved_mean;
  const void* saved_rstd;
  /* version 5 */
  size_t struct_size; /* sizeof(lnorm_tensors) as lnorm was built: operands past it are not given */
  /* version 5, appended: the quantized epilogue's outputs (NULL otherwise): q, rows*cols codes (uint8 bit patterns
   * of fp8, or int8; fp4_e2m1: rows*cols/2 bytes, element 2i in byte i's low nibble), and scales, rows*(cols/quant_group) f32 (mx: uint8 E8M0 codes; nvfp4: uint8 E4M3 codes; NULL for tensor scaling) */
  void* q;
  void* scales;
  /* version 5, appended: NULL, or rows*cols f32 for the y the kernel's quantizer was handed (its
   * lnorm_kernel_decl.quant_input says which), written beside q so that verify can hold q and the scales to the
   * quantizer's contract applied to that y, bit for bit. Only for a kernel that declares quant_input 1 or 2 */
  void* quant_y;
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
  /* frozen here from version 5 on: what a kernel declares beyond these fields is in its lnorm_kernel_decl */
} lnorm_plugin_kernel;

/* Which y a quantizing kernel's quantizer reads (lnorm_kernel_decl.quant_input; lnorm::QuantInput). */
enum lnorm_quant_input {
  LNORM_QUANT_INPUT_NOT_HANDED = 0, /* not said: only q's budget against the exact y* is checked */
  LNORM_QUANT_INPUT_F32_Y = 1,      /* its f32 y, whatever x's dtype; written to lnorm_tensors.quant_y when given */
  LNORM_QUANT_INPUT_X_DTYPE_Y = 2,  /* its y rounded to x's dtype first (vLLM's order), as f32 to quant_y */
  LNORM_QUANT_INPUT_EXACT_Y = 3     /* the exact y*: q and the scales are the contract applied to y* itself */
};

/* Version 5: a kernel's declaration beyond lnorm_plugin_kernel, grown by appending fields. */
typedef struct lnorm_kernel_decl {
  size_t struct_size;        /* sizeof(lnorm_kernel_decl) as the plugin was built */
  const lnorm_op_desc* ops;  /* the ops it implements as their parts (op_count entries); when given, the */
  size_t op_count;           /*   kernel's `ops` mask is not read. It is handed only these ops, and declines */
                             /*   (why_not) storage and conventions it does not take */
  /* appended: an lnorm_quant_input, for a kernel with the quantized epilogue; 0 when not said */
  int32_t quant_input;
  /* appended: sizeof(lnorm_problem) as the plugin was built (0: not said). lnorm hands a kernel only the quantized
   * parameters its lnorm_problem has: nvfp4 needs quant_global_scale, an mx rule other than floor quant_mx_rule,
   * UE8M0 row/group scales quant_scale_format */
  uint32_t problem_size;
} lnorm_kernel_decl;

typedef struct lnorm_plugin {
  uint32_t abi_version;  /* LNORM_PLUGIN_ABI_VERSION as the plugin was built; always the first member */
  const char* name;      /* the prefix of its kernels' names, e.g. "demo" */
  size_t kernel_count;
  const lnorm_plugin_kernel* kernels;
  /* version 5: NULL, or kernel_count pointers, kernel i's declaration (NULL: its `ops` mask says it all) */
  const lnorm_kernel_decl* const* kernel_decls;
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
