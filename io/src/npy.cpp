// .npy reading and writing. Format reference: numpy/lib/format.py (NEP 1). The header is a Python dict
// literal, so it is parsed with a small recursive-descent parser for the literal subset numpy emits;
// anything else is a clear error rather than a guess.
#include "lnorm/npy.hpp"

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>
#include <random>
#include <string_view>
#include <utility>

#include "lnorm/temp_files.hpp"

namespace lnorm::io {

// Data bytes are handed to the caller as they sit on disk, and .npy data is little-endian.
static_assert(std::endian::native == std::endian::little, "lnorm::io assumes a little-endian host");
// fseeko must address files larger than 4 GiB.
static_assert(sizeof(off_t) >= 8, "build with 64-bit file offsets (_FILE_OFFSET_BITS=64)");

void detail::FileCloser::operator()(std::FILE* f) const noexcept {
  if (f != nullptr) std::fclose(f);
}

namespace {

constexpr std::string_view kMagic{"\x93NUMPY", 6};
constexpr std::uint64_t kMaxHeaderLen = 1u << 20;  // numpy's own headers are < 1 KiB; 1 MiB is absurd
constexpr int kMaxNesting = 16;                    // numpy never nests deeper than 3 (structured dtypes)
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr const char* kSupported =
    "supported: '<f4' (f32), '<f8' (f64), '<f2' (f16), '<u2' (bf16 bit patterns), '|u1' (fp8 bit patterns, E8M0 "
    "scales), '|i1' (int8)";

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw NpyError(path + ": " + what);
}

std::string errno_text() { return std::strerror(errno); }

// Source text quoted into a one-line message: control and non-ASCII bytes flattened, long text cut.
std::string excerpt(std::string_view text) {
  constexpr std::size_t kMax = 60;
  std::string out;
  for (char c : text.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(c);
    out += u < 0x20 ? ' ' : u >= 0x7F ? '?' : c;
  }
  if (text.size() > kMax) out += "...";
  return out;
}

// a*b for non-negative a, b; false on int64 overflow.
bool checked_mul(std::int64_t a, std::int64_t b, std::int64_t& out) {
  if (a != 0 && b > kInt64Max / a) return false;
  out = a * b;
  return true;
}

std::string shape_repr(const std::vector<std::int64_t>& shape) {  // Python's repr of a tuple
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// Normalizes descr to "<xN" (or "|u1", "|i1") and returns the item size; the message explains the fix for common mistakes.
std::size_t check_descr(const std::string& path, std::string& descr) {
  struct Known { std::string_view type; std::size_t size; };
  constexpr Known kKnown[] = {{"f4", 4}, {"f8", 8}, {"f2", 2}, {"u2", 2}};
  // One-byte types have no byte order: numpy writes '|u1', '|i1' (and accepts '<', '>', '=' for them).
  if (descr.size() == 3 && (descr.substr(1) == "u1" || descr.substr(1) == "i1") &&
      (descr[0] == '|' || descr[0] == '<' || descr[0] == '>' || descr[0] == '=')) {
    descr[0] = '|';
    return 1;
  }
  if (descr.size() == 3) {
    for (const Known& k : kKnown) {
      if (std::string_view(descr).substr(1) != k.type) continue;
      // '=' is native order, which is little-endian here (see static_assert above).
      if (descr[0] == '<' || descr[0] == '=') {
        descr[0] = '<';
        return k.size;
      }
      if (descr[0] == '>')
        fail(path, "big-endian dtype '" + descr + "' is not supported; convert with x.astype('<" +
                       std::string(k.type) + "')");
    }
  }
  fail(path, "unsupported dtype '" + excerpt(descr) + "'; " + kSupported);
}

// ---- Python literal parser (the subset ast.literal_eval would accept in a numpy header) ----

struct PyValue {
  enum class Kind { Str, Int, Bool, None, Tuple, List, Dict, Other };
  Kind kind = Kind::Other;
  std::string_view source;     // the literal's text, for messages
  std::string str;             // Str
  std::int64_t integer = 0;    // Int (valid unless too_big)
  bool too_big = false;        // Int beyond int64
  bool boolean = false;        // Bool
  std::vector<PyValue> items;  // Tuple/List elements; Dict as key, value, key, value, ...
};

class LiteralParser {
 public:
  LiteralParser(std::string_view src, const std::string& path) : src_(src), path_(path) {}

  // The whole header: one dict, then only whitespace (numpy pads with spaces and a final '\n').
  PyValue parse_header() {
    skip_space();
    if (peek() != '{') bad("it does not start with '{'");
    PyValue dict = parse_value(0);
    skip_space();
    if (pos_ != src_.size()) bad("unexpected text after the dict");
    return dict;
  }

 private:
  [[noreturn]] void bad(const std::string& why) const {
    fail(path_, "malformed header: " + why + " (at byte " + std::to_string(pos_) + " of header '" +
                    excerpt(src_) + "')");
  }
  char peek() const { return pos_ < src_.size() ? src_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < src_.size() && (src_[pos_] == ' ' || src_[pos_] == '\t' || src_[pos_] == '\n' ||
                                  src_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) bad(std::string("expected '") + c + "'");
    ++pos_;
  }

  PyValue parse_value(int depth) {
    if (depth > kMaxNesting) bad("nested too deeply");
    skip_space();
    const std::size_t begin = pos_;
    PyValue v;
    const char c = peek();
    if (c == '\'' || c == '"') {
      v = parse_string();
    } else if (c == '(' || c == '[') {
      v = parse_sequence(depth);
    } else if (c == '{') {
      v = parse_dict(depth);
    } else if (c == '-' || c == '+' || (c >= '0' && c <= '9')) {
      v = parse_number();
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t end = pos_;
      while (end < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_'))
        ++end;
      const std::string_view word = src_.substr(pos_, end - pos_);
      if (word == "True" || word == "False") {
        v.kind = PyValue::Kind::Bool;
        v.boolean = word == "True";
      } else if (word == "None") {
        v.kind = PyValue::Kind::None;
      } else {
        bad(std::string(word).insert(0, 1, '\'') + "' is not a Python literal");
      }
      pos_ = end;
    } else {
      bad(c == '\0' ? std::string("unexpected end") : "unexpected character '" + std::string(1, c) + "'");
    }
    // A value unwrapped from "(x)" keeps its own, inner source text.
    if (v.source.empty()) v.source = src_.substr(begin, pos_ - begin);
    return v;
  }

  PyValue parse_string() {
    const char quote = src_[pos_++];
    PyValue v;
    v.kind = PyValue::Kind::Str;
    while (peek() != quote) {
      const char c = peek();
      if (c == '\0' || c == '\n') bad("unterminated string");
      // numpy never writes escapes in the keys or dtypes we accept; rejecting them keeps this simple.
      if (c == '\\') bad("escape sequences in strings are not supported");
      v.str += c;
      ++pos_;
    }
    ++pos_;
    return v;
  }

  PyValue parse_sequence(int depth) {
    const char open = src_[pos_++];
    const char close = open == '(' ? ')' : ']';
    PyValue v;
    v.kind = open == '(' ? PyValue::Kind::Tuple : PyValue::Kind::List;
    bool saw_comma = false;
    for (;;) {
      skip_space();
      if (peek() == close) break;
      v.items.push_back(parse_value(depth + 1));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        saw_comma = true;
      } else if (peek() != close) {
        bad(std::string("expected ',' or '") + close + "'");
      }
    }
    ++pos_;
    // "(5)" is just 5 in Python, not a tuple: numpy would reject it as a shape, and so do we.
    if (open == '(' && v.items.size() == 1 && !saw_comma) return std::move(v.items.front());
    return v;
  }

  PyValue parse_dict(int depth) {
    ++pos_;  // '{'
    PyValue v;
    v.kind = PyValue::Kind::Dict;
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      v.items.push_back(parse_value(depth + 1));
      expect(':');
      v.items.push_back(parse_value(depth + 1));
      skip_space();
      if (peek() == ',') ++pos_;
      else if (peek() != '}') bad("expected ',' or '}'");
    }
    ++pos_;
    return v;
  }

  // Integers become Int; anything number-like that is not a plain integer (2.5, 1e3, 0x10, 3L) is
  // kept as Other so the shape check can say "non-integer dimension" rather than "malformed".
  PyValue parse_number() {
    PyValue v;
    const std::size_t begin = pos_;
    bool negative = false;
    while (peek() == '-' || peek() == '+') negative ^= src_[pos_++] == '-';
    const std::size_t digits_begin = pos_;
    while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '.' || peek() == '_') ++pos_;
    const std::string_view body = src_.substr(digits_begin, pos_ - digits_begin);
    if (body.empty()) bad("sign without a number");
    v.kind = PyValue::Kind::Int;
    for (char d : body) {
      if (d < '0' || d > '9') {
        v.kind = PyValue::Kind::Other;
        break;
      }
      const std::int64_t digit = d - '0';
      if (v.integer > (kInt64Max - digit) / 10) v.too_big = true;
      else v.integer = v.integer * 10 + digit;
    }
    if (negative) v.integer = -v.integer;
    v.source = src_.substr(begin, pos_ - begin);
    return v;
  }

  std::string_view src_;
  const std::string& path_;
  std::size_t pos_ = 0;
};

// Checks the parsed dict like numpy's _read_array_header does, and fills descr, item_size and shape.
void interpret_header(const std::string& path, const PyValue& dict, NpyHeader& h) {
  if (dict.kind != PyValue::Kind::Dict) fail(path, "malformed header: not a dict");
  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
  for (std::size_t i = 0; i < dict.items.size(); i += 2) {
    const PyValue& key = dict.items[i];
    if (key.kind != PyValue::Kind::Str)
      fail(path, "malformed header: key " + excerpt(key.source) + " is not a string");
    const PyValue** slot = key.str == "descr" ? &descr
                           : key.str == "fortran_order" ? &fortran
                           : key.str == "shape" ? &shape : nullptr;
    if (slot == nullptr)
      fail(path, "unexpected key '" + excerpt(key.str) +
                     "' in header; expected exactly 'descr', 'fortran_order' and 'shape'");
    if (*slot != nullptr) fail(path, "malformed header: duplicate key '" + key.str + "'");
    *slot = &dict.items[i + 1];
  }
  const std::pair<const PyValue*, const char*> required[] = {
      {descr, "descr"}, {fortran, "fortran_order"}, {shape, "shape"}};
  for (const auto& [value, name] : required)
    if (value == nullptr) fail(path, std::string("header is missing the key '") + name + "'");

  if (fortran->kind != PyValue::Kind::Bool)
    fail(path, "fortran_order must be True or False, not " + excerpt(fortran->source));
  h.fortran_order = fortran->boolean;

  if (descr->kind != PyValue::Kind::Str)
    fail(path, "unsupported dtype " + excerpt(descr->source) + " (structured); " + kSupported);
  h.descr = descr->str;
  h.item_size = check_descr(path, h.descr);

  if (shape->kind != PyValue::Kind::Tuple)
    fail(path, "shape must be a tuple of integers, not " + excerpt(shape->source));
  h.shape.clear();
  for (const PyValue& dim : shape->items) {
    if (dim.kind != PyValue::Kind::Int)
      fail(path, "shape has a non-integer dimension " + excerpt(dim.source));
    if (dim.too_big) fail(path, "shape dimension " + excerpt(dim.source) + " does not fit in int64");
    h.shape.push_back(dim.integer);
  }
}

// Shared by reader and writer: element count and byte size, overflow-checked.
void compute_sizes(const std::string& path, NpyHeader& h) {
  // An array with a zero dimension is empty however large the others are, so check that first.
  std::int64_t elements = 1;
  bool has_zero = false;
  for (std::int64_t d : h.shape) {
    if (d < 0) fail(path, "shape has a negative dimension " + std::to_string(d));
    has_zero = has_zero || d == 0;
  }
  if (has_zero) {
    elements = 0;
  } else {
    for (std::int64_t d : h.shape)
      if (!checked_mul(elements, d, elements))
        fail(path, "shape " + shape_repr(h.shape) + " has too many elements (overflows int64)");
  }
  std::int64_t bytes = 0;
  if (!checked_mul(elements, static_cast<std::int64_t>(h.item_size), bytes))
    fail(path, "shape " + shape_repr(h.shape) + " of '" + h.descr + "' is too large (byte size overflows int64)");
  h.elements = elements;
}

std::uint64_t data_bytes(const NpyHeader& h) {
  return static_cast<std::uint64_t>(h.elements) * h.item_size;  // no overflow: checked in compute_sizes
}

// numpy's _write_array_header + _wrap_header: sorted keys, spare room for growing the first axis
// (GROWTH_AXIS_MAX_DIGITS = 21), then spaces and '\n' so the data starts on a 64-byte boundary.
// Note numpy pads a full 64 bytes when the length is already aligned; that is reproduced on purpose.
std::string format_header(const NpyHeader& h) {
  std::string dict = "{'descr': '" + h.descr + "', 'fortran_order': False, 'shape': " +
                     shape_repr(h.shape) + ", }";
  if (!h.shape.empty()) dict.append(21 - std::to_string(h.shape.front()).size(), ' ');
  const std::size_t hlen = dict.size() + 1;  // + '\n'
  for (int version : {1, 2}) {
    const std::size_t len_bytes = version == 1 ? 2 : 4;
    const std::size_t pad = 64 - (kMagic.size() + 2 + len_bytes + hlen) % 64;
    const std::uint64_t field = hlen + pad;
    if (version == 1 && field > 0xFFFF) continue;
    std::string out(kMagic);
    out += static_cast<char>(version);
    out += '\0';
    for (std::size_t i = 0; i < len_bytes; ++i) out += static_cast<char>((field >> (8 * i)) & 0xFF);
    return out + dict + std::string(pad, ' ') + '\n';
  }
  return {};  // unreachable: a 4-byte length always fits a header built from int64 dims
}

std::string unique_tmp_suffix() {
  static std::atomic<std::uint64_t> counter{0};
  static const std::uint64_t salt = [] {
    std::random_device rd;
    return (std::uint64_t{rd()} << 32) ^ rd();
  }();
  char buf[64];
  std::snprintf(buf, sizeof buf, ".tmp.%ld.%llu.%08llx", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(counter.fetch_add(1)),
                static_cast<unsigned long long>(salt & 0xFFFFFFFFu));
  return buf;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// NpyReader

namespace {

// The prefix and header checks shared by NpyReader (bytes from a file) and parse_npy (bytes in memory):
// `read(dst, n)` copies up to n of the next bytes and returns how many it copied. Nothing larger than
// the header (at most kMaxHeaderLen) is allocated, and the data size the header promises is compared
// with `file_size` before anyone allocates a buffer for the data.
template <class Read>
NpyHeader read_header(const std::string& path, std::uint64_t file_size, Read&& read) {
  unsigned char prefix[12];
  const std::size_t got = read(prefix, 8);
  if (got < kMagic.size() || std::memcmp(prefix, kMagic.data(), kMagic.size()) != 0)
    fail(path, file_size == 0 ? "not a .npy file (it is empty)" : "not a .npy file (bad magic)");
  if (got < 8) fail(path, "truncated header (no format version)");
  const int major = prefix[6];
  const int minor = prefix[7];
  std::size_t len_bytes = 0;
  if (major == 1 && minor == 0) len_bytes = 2;
  else if ((major == 2 || major == 3) && minor == 0) len_bytes = 4;
  else
    fail(path, "unknown .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                   " (supported: 1.0, 2.0, 3.0)");
  if (read(prefix + 8, len_bytes) != len_bytes) fail(path, "truncated header (no header length)");
  std::uint64_t header_len = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) header_len |= std::uint64_t{prefix[8 + i]} << (8 * i);
  if (header_len > kMaxHeaderLen)
    fail(path, "header length " + std::to_string(header_len) + " is absurd (more than 1 MiB)");
  const std::uint64_t prefix_len = 8 + len_bytes;
  if (prefix_len + header_len > file_size)
    fail(path, "truncated header: it should be " + std::to_string(header_len) + " bytes but the file has " +
                   std::to_string(file_size - prefix_len) + " after the prefix");

  std::string text(header_len, '\0');
  if (read(text.data(), text.size()) != text.size())
    fail(path, "truncated header (read failed: " + errno_text() + ")");
  NpyHeader header;
  interpret_header(path, LiteralParser(text, path).parse_header(), header);
  compute_sizes(path, header);
  header.data_offset = prefix_len + header_len;

  const std::uint64_t have = file_size - header.data_offset;
  const std::uint64_t want = data_bytes(header);
  const std::string promise = "header promises " + std::to_string(header.elements) + " elements (" +
                              std::to_string(want) + " bytes) but the file has " + std::to_string(have) +
                              " bytes of data";
  if (have < want) fail(path, "file is truncated: " + promise);
  if (have > want) fail(path, "unexpected trailing bytes after the data: " + promise);
  return header;
}

}  // namespace

NpyReader::NpyReader(const std::string& path) : path_(path) {
  file_.reset(std::fopen(path.c_str(), "rb"));
  if (!file_) fail(path, "cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(::fileno(file_.get()), &st) != 0) fail(path, "cannot stat: " + errno_text());
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  header_ = read_header(path, static_cast<std::uint64_t>(st.st_size),
                        [this](void* dst, std::size_t n) { return std::fread(dst, 1, n, file_.get()); });
}

NpyHeader parse_npy(std::string_view bytes, const std::string& name) {
  std::size_t pos = 0;
  return read_header(name, bytes.size(), [&](void* dst, std::size_t n) {
    const std::size_t take = std::min(n, bytes.size() - pos);
    if (take > 0) std::memcpy(dst, bytes.data() + pos, take);
    pos += take;
    return take;
  });
}

namespace {

// The column-major data `f` of an array of `shape` reordered to row-major in `c` (item bytes each): walk the C
// order with an odometer over the indices, keeping the Fortran offset in step.
void fortran_to_c(const std::vector<std::byte>& f, std::vector<std::byte>& c, const std::vector<std::int64_t>& shape,
                  std::size_t item) {
  const std::size_t dims = shape.size();
  std::vector<std::int64_t> stride(dims), index(dims, 0);  // Fortran strides in elements
  std::int64_t s = 1;
  for (std::size_t d = 0; d < dims; ++d) stride[d] = s, s *= shape[d];
  c.resize(f.size());
  const std::int64_t n = static_cast<std::int64_t>(f.size() / item);
  std::int64_t off = 0;
  for (std::int64_t k = 0; k < n; ++k) {
    std::memcpy(c.data() + static_cast<std::size_t>(k) * item, f.data() + static_cast<std::size_t>(off) * item, item);
    for (std::size_t d = dims; d-- > 0;) {  // the last index moves fastest in C order
      if (++index[d] < shape[d]) {
        off += stride[d];
        break;
      }
      off -= stride[d] * (shape[d] - 1);
      index[d] = 0;
    }
  }
}

}  // namespace

void NpyReader::read(std::int64_t first, std::int64_t count, void* dst) {
  if (!file_) fail(path_, "read from a moved-from reader");
  if (first < 0 || count < 0 || first > header_.elements || count > header_.elements - first)
    fail(path_, "cannot read " + std::to_string(count) + " elements from element " + std::to_string(first) +
                    ": the array has " + std::to_string(header_.elements) + " elements");
  if (count == 0) return;
  // One dimension of more than one element or none: the two orders are the same bytes.
  std::size_t long_dims = 0;
  for (std::int64_t d : header_.shape) long_dims += d > 1;
  if (!header_.fortran_order || long_dims <= 1) return read_file(first, count, dst);
  if (c_order_.empty()) {
    std::vector<std::byte> f(static_cast<std::size_t>(header_.elements) * header_.item_size);
    read_file(0, header_.elements, f.data());
    fortran_to_c(f, c_order_, header_.shape, header_.item_size);
  }
  std::memcpy(dst, c_order_.data() + static_cast<std::size_t>(first) * header_.item_size,
              static_cast<std::size_t>(count) * header_.item_size);
}

void NpyReader::read_file(std::int64_t first, std::int64_t count, void* dst) {
  const std::uint64_t offset = header_.data_offset + static_cast<std::uint64_t>(first) * header_.item_size;
  const std::size_t bytes = static_cast<std::size_t>(count) * header_.item_size;
  if (::fseeko(file_.get(), static_cast<off_t>(offset), SEEK_SET) != 0)
    fail(path_, "cannot seek to byte " + std::to_string(offset) + ": " + errno_text());
  if (std::fread(dst, 1, bytes, file_.get()) != bytes) {
    const bool io_error = std::ferror(file_.get()) != 0;
    const std::string why = io_error ? errno_text() : "unexpected end of file (did it shrink after opening?)";
    std::clearerr(file_.get());
    fail(path_, "cannot read " + std::to_string(bytes) + " bytes at byte " + std::to_string(offset) + ": " + why);
  }
}

std::vector<std::byte> read_all(NpyReader& reader) {
  std::vector<std::byte> data(data_bytes(reader.header()));
  reader.read(0, reader.header().elements, data.data());
  return data;
}

// ---------------------------------------------------------------------------------------------------
// NpyWriter

NpyWriter::NpyWriter(std::string path, std::string descr, std::vector<std::int64_t> shape)
    : path_(std::move(path)) {
  header_.descr = std::move(descr);
  header_.item_size = check_descr(path_, header_.descr);
  header_.shape = std::move(shape);
  compute_sizes(path_, header_);
  const std::string head = format_header(header_);
  header_.data_offset = head.size();

  // "x" (C11, glibc): never reuse a name that exists, e.g. a stale temp file left by a killed run.
  for (int attempt = 0; attempt < 8 && !file_; ++attempt) {
    std::string candidate = path_ + unique_tmp_suffix();
    file_.reset(std::fopen(candidate.c_str(), "wbx"));
    if (file_) tmp_path_ = std::move(candidate), temp_slot_ = register_temp(tmp_path_);  // only a file we created is ever removed
    else if (errno != EEXIST) break;
  }
  if (!file_) fail(path_, "cannot create output file: " + errno_text());
  if (std::fwrite(head.data(), 1, head.size(), file_.get()) != head.size())
    discard("cannot write header: " + errno_text());
}

NpyWriter::NpyWriter(NpyWriter&& other) noexcept { *this = std::move(other); }

NpyWriter& NpyWriter::operator=(NpyWriter&& other) noexcept {
  if (this != &other) {
    if (!committed_) abandon();
    path_ = std::move(other.path_);
    tmp_path_ = std::exchange(other.tmp_path_, {});
    header_ = std::move(other.header_);
    file_ = std::move(other.file_);
    bytes_written_ = other.bytes_written_;
    finished_ = other.finished_;
    committed_ = other.committed_;
    temp_slot_ = std::exchange(other.temp_slot_, -1);
  }
  return *this;
}

NpyWriter::~NpyWriter() {
  if (!committed_) abandon();
}

void NpyWriter::abandon() noexcept {
  file_.reset();
  if (!tmp_path_.empty()) std::remove(tmp_path_.c_str());
  tmp_path_.clear();
  unregister_temp(std::exchange(temp_slot_, -1));
}

// Callers build `what` (with errno_text()) before the call, so remove() cannot clobber errno first.
void NpyWriter::discard(const std::string& what) {
  abandon();
  fail(path_, what);
}

void NpyWriter::write(const void* data, std::size_t bytes) {
  if (committed_) fail(path_, "write after commit");
  if (!file_) fail(path_, "write after an earlier error; the output was discarded");
  const std::uint64_t want = data_bytes(header_);
  if (bytes > want - bytes_written_)
    discard("writing " + std::to_string(bytes) + " more bytes would exceed the " + std::to_string(want) +
            " bytes of shape " + shape_repr(header_.shape) + " of '" + header_.descr + "'");
  if (bytes == 0) return;
  if (std::fwrite(data, 1, bytes, file_.get()) != bytes) discard("cannot write: " + errno_text());
  bytes_written_ += bytes;
}

void NpyWriter::commit() {
  finish();
  publish();
}

void NpyWriter::finish() {
  if (committed_ || finished_) fail(path_, "commit called twice");
  if (!file_) fail(path_, "commit after an earlier error; the output was discarded");
  const std::uint64_t want = data_bytes(header_);
  if (bytes_written_ != want)
    discard("only " + std::to_string(bytes_written_) + " of " + std::to_string(want) +
            " data bytes were written (shape " + shape_repr(header_.shape) + " of '" + header_.descr +
            "'); the output was discarded");
  // fsync before rename: otherwise a crash soon after could leave the new name pointing at an empty file.
  if (std::fflush(file_.get()) != 0 || ::fsync(::fileno(file_.get())) != 0)
    discard("cannot flush output: " + errno_text());
  if (std::fclose(file_.release()) != 0) discard("cannot close output: " + errno_text());
  finished_ = true;
}

void NpyWriter::publish() {
  if (!finished_ || committed_) fail(path_, "publish without finish, or twice");
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    discard("cannot move the finished file into place: " + errno_text());
  tmp_path_.clear();
  unregister_temp(std::exchange(temp_slot_, -1));
  committed_ = true;
}

void NpyWriter::unpublish() noexcept {
  if (committed_) std::remove(path_.c_str());
}

void save(const std::string& path, const std::string& descr, const std::vector<std::int64_t>& shape,
          const void* data) {
  NpyWriter writer(path, descr, shape);
  const std::uint64_t bytes = data_bytes(writer.header());
  if (bytes > 0 && data == nullptr) fail(path, "save called with no data for a non-empty array");
  writer.write(data, static_cast<std::size_t>(bytes));
  writer.commit();
}

}  // namespace lnorm::io
