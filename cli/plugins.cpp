#include "plugins.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <deque>
#include <utility>
#include <vector>

#include "crash_guard.hpp"
#include "inputs.hpp"
#include "lnorm/operands.hpp"
#include "lnorm/plugin.h"
#include "lnorm/registry.hpp"

namespace lnorm::cli {

namespace {

// One plugin kernel as the registry sees it. Lives (in a deque: stable addresses) until exit, as does
// the library: the registry holds string_views into these strings. Libraries are never dlclose'd.
// Version 1's kernel struct (lnorm/plugin.h before version 2 appended `ops`): the stride of a version-1
// plugin's kernel array. Its problem and tensors are prefixes of version 2's, so version-2 structs are
// handed to version-1 kernels as they are.
struct lnorm_plugin_kernel_v1 {
  const char* name;
  const char* summary;
  uint32_t dtypes;
  int (*why_not)(const lnorm_problem* problem, char* reason, size_t reason_size);
  void (*run)(const lnorm_problem* problem, const lnorm_tensors* tensors);
};

struct PluginKernel {
  std::string name;     // "<plugin>:<kernel>"
  std::string summary;
  std::string path;     // the file it came from
  std::uint32_t abi_version = LNORM_PLUGIN_ABI_VERSION;
  std::uint32_t dtypes = 0;
  std::vector<Op> ops;  // exactly the ops it declared
  QuantInput quant_input = QuantInput::not_handed;  // lnorm_kernel_decl.quant_input
  std::size_t problem_size = 0;                      // lnorm_kernel_decl.problem_size: the lnorm_problem it reads
  int (*why_not)(const lnorm_problem*, char*, size_t) = nullptr;
  void (*run)(const lnorm_problem*, const lnorm_tensors*) = nullptr;
};

std::deque<PluginKernel>& slots() {
  static std::deque<PluginKernel> s;
  return s;
}

static_assert(static_cast<int>(QuantInput::not_handed) == LNORM_QUANT_INPUT_NOT_HANDED &&
                  static_cast<int>(QuantInput::f32_y) == LNORM_QUANT_INPUT_F32_Y &&
                  static_cast<int>(QuantInput::x_dtype_y) == LNORM_QUANT_INPUT_X_DTYPE_Y &&
                  static_cast<int>(QuantInput::exact_y) == LNORM_QUANT_INPUT_EXACT_Y,
              "lnorm/plugin.h numbers the quantizer's inputs as lnorm/kernel.hpp does");
static_assert(static_cast<int>(DType::f32) == LNORM_F32 && static_cast<int>(DType::f64) == LNORM_F64 &&
                  static_cast<int>(DType::f16) == LNORM_F16 && static_cast<int>(DType::bf16) == LNORM_BF16,
              "lnorm/plugin.h numbers dtypes as lnorm::DType does (the dtype masks are passed through)");
static_assert(static_cast<int>(Epilogue::y_as_x) == LNORM_EPILOGUE_Y && static_cast<int>(Epilogue::quantized) == LNORM_EPILOGUE_QUANTIZED,
              "lnorm/plugin.h numbers the epilogues as lnorm/op.hpp does");
static_assert(code(Op::layernorm) == LNORM_LAYERNORM && code(Op::rmsnorm) == LNORM_RMSNORM &&
                  code(Op::add_layernorm) == LNORM_ADD_LAYERNORM && code(Op::add_rmsnorm) == LNORM_ADD_RMSNORM &&
                  code(Op::layernorm_bwd) == LNORM_LAYERNORM_BWD && code(Op::rmsnorm_bwd) == LNORM_RMSNORM_BWD,
              "lnorm/plugin.h numbers ops as lnorm/op.hpp's table codes them (the op masks are passed through)");

lnorm_problem to_c(const Problem& p) {
  lnorm_problem c{};
  c.rows = p.rows;
  c.cols = p.cols;
  c.dtype = static_cast<std::int32_t>(p.dtype);
  c.threads = p.threads;
  c.eps = p.eps;
  c.has_gamma = p.has_gamma ? 1 : 0;
  c.has_beta = p.has_beta ? 1 : 0;
  c.op = find_op(p.op) ? code(p.op) : -1;  // the number of versions 2-4's six ops; the parts below say the rest
  c.param_dtype = static_cast<std::int32_t>(p.param_dtype);
  c.gamma_offset = p.gamma_offset;
  c.residual_dtype = static_cast<std::int32_t>(p.op.prologue == Prologue::residual_add ? p.residual_dtype : p.dtype);
  c.struct_size = sizeof(lnorm_problem);
  c.norm = static_cast<std::int32_t>(p.op.norm);
  c.prologue = static_cast<std::int32_t>(p.op.prologue);
  c.epilogue = static_cast<std::int32_t>(p.op.epilogue);
  c.direction = static_cast<std::int32_t>(p.op.direction);
  if (p.op.epilogue == Epilogue::quantized) {
    c.quant_format = p.quant.format_info().abi;  // the ABI numbers are the part tables' (lnorm/quant.hpp)
    c.quant_scaling = p.quant.scaling_info().abi;
    c.quant_group = p.quant.group_size(p.cols);
    c.quant_scale = p.quant.scaling_info().scale_given ? p.quant.scale : 0.0f;
    c.quant_global_scale = p.quant.scaling_info().global_scale ? p.quant.global_scale : 0.0f;
    c.quant_mx_rule = info(p.quant.mx_rule).abi;
    c.quant_scale_format = info(p.quant.scale_format).abi;
  }
  return c;
}

// Plugin code called through the C ABI, where an exception has no place: one that comes out anyway (a C++ plugin's
// throw) ends the command with exit 1 naming where (PluginFailure), not as lnorm's internal error.
template <class Fn>
auto call_plugin(const std::string& where, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    throw PluginFailure("plugin kernel " + where + " threw an exception: " + e.what());
  } catch (...) {
    throw PluginFailure("plugin kernel " + where + " threw an exception (not a std::exception)");
  }
}

std::optional<std::string> plugin_why_not(const PluginKernel& k, const Problem& p) {
  // The declared ops exactly (the registry's declaration is their closure over norm, prologue, direction).
  if (std::find(k.ops.begin(), k.ops.end(), p.op) == k.ops.end()) return k.name + " does not implement " + std::string(name(p.op));
  // A version-1 kernel knows neither f32 parameters nor the offset: it is never handed them.
  if (k.abi_version == 1 && (p.param_dtype != p.dtype || p.gamma_offset != 0))
    return "a version-1 plugin kernel takes gamma/beta in x's dtype without an offset";
  // Parameters appended after the kernel was built are not in the struct it reads: never hand it a problem needing them.
  if (p.op.epilogue == Epilogue::quantized) {
    const auto reads = [&](std::size_t end) { return end <= k.problem_size; };
    if (p.quant.scaling_info().global_scale && !reads(offsetof(lnorm_problem, quant_global_scale) + sizeof(float)))
      return k.name + " was built before nvfp4 (its lnorm_problem has no quant_global_scale)";
    if (p.quant.mx_rule != MxRule::floor && !reads(offsetof(lnorm_problem, quant_mx_rule) + sizeof(std::int32_t)))
      return k.name + " was built before --mx-rule (its lnorm_problem has no quant_mx_rule: floor only)";
    if (p.quant.scale_format != ScaleFormat::f32 && !reads(offsetof(lnorm_problem, quant_scale_format) + sizeof(std::int32_t)))
      return k.name + " was built before --scale-format (its lnorm_problem has no quant_scale_format: f32 scales only)";
  }
  if (!k.why_not) return std::nullopt;
  const lnorm_problem c = to_c(p);
  std::array<char, 512> reason{};
  const RunningPluginKernel running(k.name.c_str());
  if (call_plugin(k.name + " (why_not)", [&] { return k.why_not(&c, reason.data(), reason.size()); }) == 0) return std::nullopt;
  reason.back() = '\0';  // a plugin that filled the buffer without a terminator
  return reason[0] ? std::string(reason.data()) : k.name + " gave no reason";
}

void plugin_run(const PluginKernel& k, const Problem& p, const Tensors& t) {
  const lnorm_problem c = to_c(p);
  lnorm_tensors ct = to_abi(t);  // every slot, from the operand table (lnorm/operands.hpp)
  // The handed y only to a kernel that says which y it writes there (lnorm_kernel_decl.quant_input).
  if (k.quant_input != QuantInput::f32_y && k.quant_input != QuantInput::x_dtype_y) ct.quant_y = nullptr;
  const RunningPluginKernel running(k.name.c_str());
  call_plugin(k.name, [&] { k.run(&c, &ct); });
}

// KernelInfo holds plain function pointers (the built-in kernels need no state), so each plugin
// kernel gets a pair of trampolines bound at compile time to its slot number: the built-in path
// stays as it was, at the price of a fixed number of slots (kMaxAppendedKernels).
template <std::size_t I>
std::optional<std::string> why_not_slot(const Problem& p) { return plugin_why_not(slots()[I], p); }
template <std::size_t I>
void run_slot(const Problem& p, const Tensors& t) { plugin_run(slots()[I], p, t); }

struct Trampolines {
  std::optional<std::string> (*why_not)(const Problem&);
  void (*run)(const Problem&, const Tensors&);
};
template <std::size_t... I>
constexpr std::array<Trampolines, sizeof...(I)> make_trampolines(std::index_sequence<I...>) {
  return {Trampolines{&why_not_slot<I>, &run_slot<I>}...};
}
constexpr auto kTrampolines = make_trampolines(std::make_index_sequence<kMaxAppendedKernels>{});

// A version-5 op declaration as lnorm's Op; an op this lnorm does not know is refused, named as the plugin
// names it and by its parts.
Op declared_op(const lnorm_op_desc& d, const std::string& where) {
  // A part's name, or its number when this lnorm does not know the value.
  const auto part = [](std::int32_t v, int known, std::string_view (*name_of)(int)) {
    return v >= 0 && v < known ? std::string(name_of(v)) : std::to_string(v);
  };
  const std::string parts =
      "norm " + part(d.norm, 2, [](int v) { return name(static_cast<Norm>(v)); }) + ", prologue " +
      part(d.prologue, 2, [](int v) { return std::string_view(v ? "residual_add" : "none"); }) + ", epilogue " +
      part(d.epilogue, 2, [](int v) { return std::string_view(v ? "quantized" : "y"); }) + ", direction " +
      part(d.direction, 2, [](int v) { return name(static_cast<Direction>(v)); });
  const std::string op_name = d.name ? "'" + std::string(d.name) + "' (" + parts + ")" : "(" + parts + ")";
  const bool parts_known = d.norm >= 0 && d.norm < 2 && d.prologue >= 0 && d.prologue < 2 && d.epilogue >= 0 && d.epilogue < 2 &&
                           d.direction >= 0 && d.direction < 2;
  if (parts_known) {
    const Op op{static_cast<Norm>(d.norm), static_cast<Prologue>(d.prologue), static_cast<Epilogue>(d.epilogue),
                static_cast<Direction>(d.direction)};
    if (find_op(op) && (op.epilogue == Epilogue::y_as_x || op.direction == Direction::fwd)) return op;
  }
  std::string known;
  for (const OpEntry& e : kOpTable) known += (known.empty() ? "" : ", ") + std::string(e.name);
  throw InputError(where + "declares the op " + op_name + ", which this lnorm does not know (it knows " + known +
                   "); a newer lnorm may, or leave the op out of its declaration");
}

bool valid_name(const char* s) {
  if (!s || !*s) return false;
  for (const char* c = s; *c; ++c) {
    const bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

void load_plugin(const std::string& path) {
  const std::string what = "--plugin " + path + ": ";
  // Without a '/', dlopen would search the library path instead of the file the user named.
  const std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  install_crash_guard();
  void* lib = nullptr;
  {
    // dlopen runs the library's static constructors: plugin code, named if it crashes.
    const std::string loading = path + " (loading it: its static constructors)";
    const RunningPluginKernel running(loading.c_str());
    lib = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!lib) throw InputError(what + "cannot load: " + ::dlerror());
  ::dlerror();
  void* sym = ::dlsym(lib, LNORM_PLUGIN_ENTRY_SYMBOL);
  if (!sym) {
    const char* err = ::dlerror();
    throw InputError(what + "not an lnorm plugin: no symbol " LNORM_PLUGIN_ENTRY_SYMBOL + std::string(err ? " (" + std::string(err) + ")" : ""));
  }
  const lnorm_plugin* plugin = nullptr;
  {
    const std::string entry_name = path + " (" LNORM_PLUGIN_ENTRY_SYMBOL ")";
    const RunningPluginKernel running(entry_name.c_str());
    plugin = call_plugin(entry_name, [&] { return reinterpret_cast<lnorm_plugin_entry_fn>(sym)(); });
  }
  if (!plugin) throw InputError(what + LNORM_PLUGIN_ENTRY_SYMBOL "() returned NULL");
  // The version is the first member in every ABI version: read it before anything else. Versions 1 to 4 are
  // read as they were (1: LayerNorm kernels, the v1 kernel struct's stride; 2-4: the v4 stride, the ops mask);
  // version 5 by the sizes it declares.
  const std::uint32_t version = plugin->abi_version;
  if (version < 1 || version > LNORM_PLUGIN_ABI_VERSION) {
    throw InputError(what + "plugin ABI version " + std::to_string(version) + ", but this lnorm reads versions 1 to " +
                     std::to_string(LNORM_PLUGIN_ABI_VERSION) + "; rebuild the plugin against this lnorm's lnorm/plugin.h");
  }
  if (!valid_name(plugin->name)) throw InputError(what + "plugin name must be letters, digits, '_' or '-' (and not empty)");
  if (plugin->kernel_count == 0 || !plugin->kernels) throw InputError(what + "plugin " + plugin->name + " declares no kernels");
  // Version 5's field of lnorm_plugin is read from a version-5 plugin only (older structs end at `kernels`).
  const lnorm_kernel_decl* const* decls = version >= 5 ? plugin->kernel_decls : nullptr;
  constexpr std::uint32_t kKnownDTypes = (1u << LNORM_F32) | (1u << LNORM_F64) | (1u << LNORM_F16) | (1u << LNORM_BF16);
  constexpr std::uint32_t kNormOpBits = LNORM_OP_BIT(LNORM_LAYERNORM) | LNORM_OP_BIT(LNORM_RMSNORM);
  constexpr std::uint32_t kAddOpBits = LNORM_OP_BIT(LNORM_ADD_LAYERNORM) | LNORM_OP_BIT(LNORM_ADD_RMSNORM);
  constexpr std::uint32_t kBwdOpBits = LNORM_OP_BIT(LNORM_LAYERNORM_BWD) | LNORM_OP_BIT(LNORM_RMSNORM_BWD);
  const std::uint32_t known_ops =
      kNormOpBits | (version >= 3 ? kAddOpBits : 0u) | (version >= 4 ? kBwdOpBits : 0u);
  std::vector<PluginKernel> found;
  for (std::size_t i = 0; i < plugin->kernel_count; ++i) {
    PluginKernel pk;
    const char* kname = nullptr;
    std::uint32_t mask = 0;
    if (version == 1) {
      const lnorm_plugin_kernel_v1& k = reinterpret_cast<const lnorm_plugin_kernel_v1*>(plugin->kernels)[i];
      kname = k.name, pk.summary = k.summary ? k.summary : "";
      pk.dtypes = k.dtypes, pk.why_not = k.why_not, pk.run = k.run, mask = LNORM_OP_BIT(LNORM_LAYERNORM);
    } else {
      const lnorm_plugin_kernel& k = plugin->kernels[i];
      kname = k.name, pk.summary = k.summary ? k.summary : "";
      pk.dtypes = k.dtypes, pk.why_not = k.why_not, pk.run = k.run, mask = k.ops;
    }
    // A declaration's field is read only when it lies inside the size the declaration gives.
    const lnorm_kernel_decl* decl = decls ? decls[i] : nullptr;
    const auto decl_has = [&](std::size_t end) { return decl && end <= decl->struct_size; };
    const bool listed = decl_has(offsetof(lnorm_kernel_decl, op_count) + sizeof(size_t)) && decl->op_count > 0;
    pk.abi_version = version;
    const std::string where = what + "kernel #" + std::to_string(i) + (kname ? std::string(" (") + kname + ")" : "") + ": ";
    if (decl_has(offsetof(lnorm_kernel_decl, quant_input) + sizeof(std::int32_t))) {
      const std::int32_t qi = decl->quant_input;
      if (qi < LNORM_QUANT_INPUT_NOT_HANDED || qi > LNORM_QUANT_INPUT_EXACT_Y)
        throw InputError(where + "quant_input is " + std::to_string(qi) + ", not an lnorm_quant_input (0 to 3)");
      pk.quant_input = static_cast<QuantInput>(qi);
    }
    if (decl_has(offsetof(lnorm_kernel_decl, problem_size) + sizeof(std::uint32_t))) {
      pk.problem_size = decl->problem_size;
    }
    if (!valid_name(kname)) throw InputError(where + "name must be letters, digits, '_' or '-' (and not empty)");
    if (!pk.run) throw InputError(where + "run is NULL");
    if (pk.dtypes == 0 || (pk.dtypes & ~kKnownDTypes)) throw InputError(where + "dtypes must be a nonempty set of LNORM_DTYPE_BIT(...)");
    if (listed) {
      if (!decl->ops) throw InputError(where + "op_count is " + std::to_string(decl->op_count) + " but ops is NULL");
      for (std::size_t j = 0; j < decl->op_count; ++j) pk.ops.push_back(declared_op(decl->ops[j], where));
    } else {
      if (mask & ~known_ops)
        throw InputError(where + "ops must be a set of LNORM_OP_BIT(...) (" +
                         (version >= 4   ? "LNORM_LAYERNORM, LNORM_RMSNORM, LNORM_ADD_LAYERNORM, LNORM_ADD_RMSNORM, "
                                             "LNORM_LAYERNORM_BWD, LNORM_RMSNORM_BWD"
                          : version == 3 ? "LNORM_LAYERNORM, LNORM_RMSNORM, LNORM_ADD_LAYERNORM, LNORM_ADD_RMSNORM in a "
                                             "version-3 plugin"
                                         : "LNORM_LAYERNORM, LNORM_RMSNORM in a version-2 plugin") + ")");
      for (Op o : kAllOps)
        if ((mask >> code(o)) & 1u) pk.ops.push_back(o);
      // A version-1 source rebuilt against a later header leaves ops zero: it is what it was, a LayerNorm
      // kernel that knows no parameter conventions (treated as version 1).
      if (version >= 2 && mask == 0) pk.ops = {Op::layernorm}, pk.abi_version = 1;
    }
    const std::string full = std::string(plugin->name) + ":" + kname;
    if (find_kernel(full)) throw InputError(where + full + " is already loaded");
    for (const PluginKernel& f : found)
      if (f.name == full) throw InputError(where + "two kernels named " + full);
    pk.name = full, pk.path = path;
    found.push_back(std::move(pk));
  }
  if (slots().size() + found.size() > kMaxAppendedKernels)
    throw InputError(what + "more than " + std::to_string(kMaxAppendedKernels) + " plugin kernels in one run");
  for (PluginKernel& k : found) {
    const std::size_t slot = slots().size();
    slots().push_back(std::move(k));
    const PluginKernel& stored = slots().back();
    KernelInfo info;
    info.name = stored.name;
    info.summary = stored.summary;
    info.takes.dtypes.bits = static_cast<std::uint8_t>(stored.dtypes);
    info.takes.prologues = PrologueSet{};
    for (Op o : stored.ops) {  // the closure of its ops over the parts; plugin_why_not refuses the rest by name
      if (o.direction == Direction::bwd) info.takes.backward_norms.bits |= NormSet{o.norm}.bits;
      else info.takes.forward_norms.bits |= NormSet{o.norm}.bits, info.takes.prologues.bits |= PrologueSet{o.prologue}.bits;
      if (o.epilogue == Epilogue::quantized) info.takes.epilogues = kWithQuant;
    }
    // The plugin's run takes every op whole (the fused add too) and declines storage it does not take in
    // why_not; a version-1 kernel's conventions are refused there by name.
    info.takes.fuses_add = true;
    info.takes.f32_residual = true;
    info.takes.quant_input = stored.quant_input;
    info.forward = kTrampolines[slot].run;
    info.backward = kTrampolines[slot].run;
    info.why_not = kTrampolines[slot].why_not;
    append_kernel(info);
  }
}

const std::string* plugin_path_of(const KernelInfo& kernel) {
  for (const PluginKernel& k : slots())
    if (k.name == kernel.name) return &k.path;
  return nullptr;
}

std::vector<std::string> plugin_paths() {
  std::vector<std::string> out;
  for (const PluginKernel& k : slots())
    if (std::find(out.begin(), out.end(), k.path) == out.end()) out.push_back(k.path);
  return out;
}

std::vector<std::string> with_plugin_paths(std::vector<std::string> inputs) {
  for (std::string& p : plugin_paths()) inputs.push_back(std::move(p));
  return inputs;
}

void add_plugin_flag(CLI::App* cmd) {
  cmd->add_option_function<std::vector<std::string>>(
         "--plugin", [](const std::vector<std::string>& paths) {
           for (const std::string& p : paths) load_plugin(p);
         },
         "Load this plugin's kernels (a shared library built against lnorm/plugin.h), repeatable; "
         "they are named <plugin>:<kernel>")
      ->type_name("PATH.so");
}

std::vector<const KernelInfo*> kernels_flag(const std::vector<std::string>& values) {
  std::vector<const KernelInfo*> kernels;
  for (const std::string& k : values) {
    if (k == "all") {
      for (const KernelInfo& info : registry()) kernels.push_back(&info);
    } else if (k == "plugins") {
      const std::size_t before = kernels.size();
      for (const KernelInfo& info : registry())
        if (plugin_path_of(info)) kernels.push_back(&info);
      if (kernels.size() == before) throw InputError("--kernel plugins: no --plugin was given");
    } else {
      kernels.push_back(&kernel_flag(k));
    }
  }
  return kernels;
}

}  // namespace lnorm::cli
