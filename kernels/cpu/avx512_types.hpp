// Storage-type tags of the AVX-512 kernels (storage_tags.hpp, shared with avx2_cr), named inside the
// anonymous namespace of each translation unit that includes the operation layers and bodies
// (avx512_native_ops.hpp, avx512_emulated_ops.hpp, avx512_body.hpp; see avx512_body.hpp for why).
// storage_tags.hpp must be included at file scope first.
using ::lnorm::cpu::storage::BF16;
using ::lnorm::cpu::storage::F16;
using ::lnorm::cpu::storage::F32;
