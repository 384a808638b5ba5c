// The extension module lnorm._lnorm. The public API (argument docs, CheckResult, torch tensors,
// assert_layernorm_close, the Hypothesis strategy) is the Python package in ../lnorm/, which calls
// these functions; they check every argument and raise TypeError/ValueError on bad input.
#include "bindings.hpp"

PYBIND11_MODULE(_lnorm, m) {
  m.doc() = "lnorm: exact LayerNorm reference, check and property-based verify (C++ core)";
  lnorm::python::bind_reference(m);
  lnorm::python::bind_verify(m);
  lnorm::python::bind_backward(m);
  lnorm::python::bind_quant(m);
}
