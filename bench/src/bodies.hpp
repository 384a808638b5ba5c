// One timed call per entry kind (bodies.cpp).
#pragma once

#include <memory>
#include <vector>

#include "lnorm/bench.hpp"

namespace lnorm::bench {

struct Body {
  virtual ~Body() = default;
  virtual void call() = 0;
};

std::unique_ptr<Body> make_body(const Entry& e, const Settings& s);  // null: not runnable
std::vector<std::byte> random_data(DType d, std::int64_t count, unsigned seed);

}  // namespace lnorm::bench
