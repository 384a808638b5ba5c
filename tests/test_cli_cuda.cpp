// `lnorm list` and `lnorm verify` on the CUDA kernels, as this machine's device allows: without a
// device (CI, the development machines) they are listed unavailable with the runtime's reason and
// verify reports them skipped; with one, available and verified. Either way the CLI must agree with
// what the CUDA runtime says (device_unavailable_reason).
#include <catch2/catch.hpp>

#include <string>

#include "../kernels/cuda/device_api.hpp"
#include "cli_support.hpp"

using namespace lnorm::testing;

TEST_CASE("cli list: the CUDA kernels are listed after the CPU ones, available exactly when the runtime says so",
          "[cli][cuda]") {
  const auto why = lnorm::cuda::device_unavailable_reason();
  const Result r = cli("list --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  int seen = 0;
  for (const auto& k : j) {
    const std::string name = k["name"];
    if (name.rfind("cuda_", 0) != 0) {
      CHECK(seen == 0);  // no CPU kernel after a CUDA one
      continue;
    }
    ++seen;
    INFO(name);
    CHECK(k["available"] == !why.has_value());
    CHECK(k["dtypes"].contains("f32"));
    CHECK(k["dtypes"].contains("f16"));
    CHECK(k["dtypes"].contains("bf16"));
    CHECK_FALSE(k["dtypes"].contains("f64"));
    if (why) {
      CHECK(k["unavailable_reason"] == *why);
      CHECK_FALSE(k.contains("unavailable_detail"));  // the runtime's words: only with --verbose
    }
  }
  CHECK(seen == 3);
  const Result table = cli("list");
  CHECK_THAT(table.out, Contains("cuda_warp"));
  if (why) CHECK_THAT(table.out, Contains("[" + *why + "]"));
  if (why && why->find("GPU") != std::string::npos) {
    // Plain words by default ("no NVIDIA GPU or driver on this machine"), the CUDA error code under --verbose.
    CHECK_THAT(table.out, !Contains("cudaGetDeviceCount"));
    const std::string detail = lnorm::cuda::device_unavailable_detail();
    CHECK_THAT(detail, Contains("cudaGetDeviceCount"));
    CHECK_THAT(cli("list --verbose").out, Contains(detail));
    const auto jv = nlohmann::json::parse(cli("list --json --verbose").out);
    for (const auto& k : jv)
      if (std::string(k["name"]).rfind("cuda_", 0) == 0) CHECK(k["unavailable_detail"] == detail);
  }
}

TEST_CASE("cli verify: without a device the CUDA kernels are skipped with the reason, in the table and the JSON",
          "[cli][cuda]") {
  const auto why = lnorm::cuda::device_unavailable_reason();
  if (!why) {
    SUCCEED("a CUDA device is present: the gpu-labelled test gpu_verify_quick verifies the kernels");
    return;
  }
  TempDir t;
  const Result r = cli("verify --kernel cuda_warp --dtype f32 --quick --json " + t / "v.json");
  INFO(r.out);
  CHECK_THAT(r.out, Contains("skipped"));
  CHECK_THAT(r.out, Contains(*why));
  const auto j = load_json(t / "v.json");
  // Every op cuda_warp implements, each property skipped: LayerNorm's 12, RMSNorm's 13, and their Add & Norm's
  // with Add & Norm's 4 laws (16 and 17).
  REQUIRE(j["results"].size() == 58);
  for (const auto& res : j["results"]) {
    CHECK(res["kernel"] == "cuda_warp");
    CHECK(res["status"] == "skipped");
  }
  // Nothing failed, but nothing was verified either: the verdict says so, and a gate that verified nothing has not
  // passed (exit 1). (CI without a GPU runs `lnorm verify` on every kernel: the CPU kernels' cells pass there.)
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Contains("NOTHING VERIFIED: 0 passed, 0 failed"));
  CHECK_THAT(r.out, !Contains("PASS:"));
  CHECK_THAT(r.out, Contains("58 skipped"));
}
