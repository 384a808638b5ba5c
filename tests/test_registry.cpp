// Specifications for appending kernels to the one registry (what --plugin does): appended kernels
// come after the built-in ones, are found by name, keep earlier pointers valid, and cannot take a
// name that is already registered.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "lnorm/registry.hpp"

namespace {

void untouched(const lnorm::Problem&, const lnorm::Tensors&) {}

lnorm::KernelInfo fake(std::string_view name) {
  lnorm::KernelInfo k;
  k.name = name;
  k.summary = "test kernel";
  k.takes = {.dtypes = {lnorm::DType::f32}, .forward_norms = {lnorm::Norm::layernorm}};
  k.forward = untouched;
  return k;
}

}  // namespace

// One test case: the registry is process-wide state, and appending cannot be undone.
TEST_CASE("registry: appended kernels come last, are found by name, keep pointers valid, refuse taken names",
          "[registry]") {
  const std::size_t builtins = lnorm::registry().size();
  const lnorm::KernelInfo* first = &lnorm::registry()[0];
  const std::string first_name(first->name);
  CHECK_THROWS_AS(lnorm::append_kernel(fake(first_name)), std::invalid_argument);  // a built-in name
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (std::size_t i = 0; i < lnorm::kMaxAppendedKernels; ++i) v.push_back("test:k" + std::to_string(i));
    return v;
  }();
  lnorm::append_kernel(fake(names[0]));
  CHECK_THROWS_AS(lnorm::append_kernel(fake(names[0])), std::invalid_argument);  // an appended name
  for (std::size_t i = 1; i < names.size(); ++i) lnorm::append_kernel(fake(names[i]));
  REQUIRE(lnorm::registry().size() == builtins + lnorm::kMaxAppendedKernels);
  CHECK(lnorm::registry()[builtins].name == "test:k0");
  CHECK(lnorm::registry().back().name == names.back());
  CHECK(lnorm::find_kernel("test:k7") == &lnorm::registry()[builtins + 7]);
  CHECK(first == &lnorm::registry()[0]);  // no reallocation: room was reserved
  CHECK(first->name == first_name);
  // Full: one more is refused, and the registry is unchanged.
  CHECK_THROWS_AS(lnorm::append_kernel(fake("test:one_too_many")), std::invalid_argument);
  CHECK(lnorm::registry().size() == builtins + lnorm::kMaxAppendedKernels);
}
