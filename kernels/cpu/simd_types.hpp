// Storage-type tags of the SIMD kernels (storage_tags.hpp), named inside the anonymous namespace of each
// translation unit that includes the operation layers and bodies (avx2_ops.hpp, avx512_ops.hpp,
// simd_emulated_ops.hpp, simd_body.hpp; see simd_body.hpp for why). storage_tags.hpp must be included at
// file scope first (cr_exact.hpp includes it).
using ::lnorm::cpu::storage::BF16;
using ::lnorm::cpu::storage::F16;
using ::lnorm::cpu::storage::F32;
using ::lnorm::cpu::storage::F64;
