#!/bin/sh
# Fails if an object compiled with ISA flags (-mavx2, ...) defines a weak symbol: an inline function or
# template instantiation there may be chosen by the linker for every caller, and would then execute
# AVX2 instructions on a CPU without them. Usage: check_isa_objects.sh OBJECT...
status=0
for obj in "$@"; do
  # DW.ref.__gxx_personality_v0 is excepted: a weak data word holding the address of libstdc++'s
  # exception personality routine (emitted where a TU has unwind landing pads, e.g. under ASan), not
  # code; whichever copy the linker keeps points at the same generic function.
  # "typeinfo [name] for <function type>" (V) is excepted too: the read-only type descriptors clang's UBSan
  # (-fsanitize=function, the asan preset) emits for the function types a TU calls through pointers; data
  # that identifies a type, the same bytes in every copy, never code.
  weak=$(nm -C --defined-only "$obj" | grep -E ' [WVu] ' | grep -v ' V DW\.ref\.__gxx_personality_v0$' |
         grep -vE ' V typeinfo (name )?for [^(]*\(' || true)
  if [ -n "$weak" ]; then
    echo "FAIL: $obj defines weak symbols:"
    echo "$weak"
    status=1
  else
    echo "ok: $obj ($(nm --defined-only "$obj" | grep -c ' T ') global function(s), no weak symbols)"
  fi
done
exit $status
