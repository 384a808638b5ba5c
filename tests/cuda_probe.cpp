// lnorm_cuda_probe COMMAND [ARGS...] — runs COMMAND when the CUDA kernels can run here, else prints
// why not and exits 77, which ctest reports as skipped (SKIP_RETURN_CODE) for the tests labelled
// `gpu`: without a device they are skipped with the reason, never passed.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#ifdef LNORM_HAVE_CUDA
#include "../kernels/cuda/device_api.hpp"
#endif

int main(int argc, char** argv) {
  constexpr int kSkip = 77;
  if (argc < 2) {
    std::fprintf(stderr, "usage: lnorm_cuda_probe COMMAND [ARGS...]\n");
    return 2;
  }
#ifdef LNORM_HAVE_CUDA
  if (const auto why = lnorm::cuda::device_unavailable_reason()) {
    std::printf("SKIPPED: %s\n", why->c_str());
    return kSkip;
  }
#else
  std::printf("SKIPPED: lnorm was built without CUDA\n");
  return kSkip;
#endif
  std::fflush(stdout);
  ::execvp(argv[1], argv + 1);
  std::fprintf(stderr, "lnorm_cuda_probe: cannot run %s: %s\n", argv[1], std::strerror(errno));
  return 3;
}
