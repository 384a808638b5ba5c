// lnorm/npy.hpp — strict, streaming reader and atomic writer for NumPy .npy files.
//
// Only what the harness exchanges is accepted: arrays (C order, or Fortran order: np.save of a transposed array,
// read whole and served in C order) of '<f4' (f32), '<f8' (f64), '<f2' (f16),
// '<u2' (bf16 bit patterns), '|u1' (fp8 bit patterns, mx's E8M0 scales) and '|i1' (int8). Everything else is rejected with an NpyError whose message is one line:
// "<path>: <what is wrong>", so the CLI can print it as is and exit 2.
//
// Safety: the header is parsed as a Python dict literal (not pattern-matched), and the data size it
// promises is checked against the real file size before anything is allocated, so a corrupt or hostile
// header fails fast instead of allocating terabytes. Offsets are 64-bit throughout (files > 4 GiB work).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace lnorm::io {

struct NpyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What a .npy header says. descr is normalized to one of "<f4", "<f8", "<f2", "<u2", "|u1", "|i1".
struct NpyHeader {
  std::string descr;
  std::vector<std::int64_t> shape;  // may be empty (0-d scalar: 1 element)
  std::size_t item_size = 0;        // bytes per element
  std::int64_t elements = 0;        // product of shape (1 for 0-d)
  std::uint64_t data_offset = 0;    // byte offset of the data in the file
  bool fortran_order = false;       // the file holds the data column-major (numpy's fortran_order: True)
};

namespace detail {
struct FileCloser {
  void operator()(std::FILE* f) const noexcept;
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;
}  // namespace detail

// Opens a .npy file, validates header and size, then reads element ranges on demand.
// Not thread-safe: read() moves the file position. Use one reader per thread.
class NpyReader {
 public:
  explicit NpyReader(const std::string& path);  // throws NpyError

  const NpyHeader& header() const { return header_; }
  const std::string& path() const { return path_; }

  // Reads elements [first, first+count), counted in C order, into dst (count*item_size bytes) with one fread.
  // Throws NpyError if the range is outside the array or on I/O failure. A Fortran-order file is read whole on
  // the first call and reordered to C order in memory (a column-major array has no C-order row to stream: every
  // row reaches across the whole file), so it costs one copy of the array in memory.
  void read(std::int64_t first, std::int64_t count, void* dst);

 private:
  void read_file(std::int64_t first, std::int64_t count, void* dst);
  std::string path_;
  NpyHeader header_;
  detail::FilePtr file_;
  std::vector<std::byte> c_order_;  // a Fortran-order file's data in C order, once read
};

// The same checks as NpyReader on a whole .npy file held in memory (the fuzz target uses it): returns the
// header, whose data are bytes [data_offset, bytes.size()). `name` starts every NpyError message.
NpyHeader parse_npy(std::string_view bytes, const std::string& name);

// Writes a .npy file (numpy's exact version 1.0 header layout) to `path + ".tmp.<unique>"` in the same
// directory and renames it over `path` only on commit(), so an interrupted or failed run never leaves a
// partial output file. The destructor removes the temporary file if commit() was never called.
class NpyWriter {
 public:
  // Throws NpyError for an unsupported descr, a bad shape, or when the file cannot be created
  // (e.g. "<path>: cannot create output file: No such file or directory").
  NpyWriter(std::string path, std::string descr, std::vector<std::int64_t> shape);
  NpyWriter(const NpyWriter&) = delete;
  NpyWriter& operator=(const NpyWriter&) = delete;
  NpyWriter(NpyWriter&& other) noexcept;             // the moved-from writer owns nothing
  NpyWriter& operator=(NpyWriter&& other) noexcept;  // abandons this writer's own temp file first
  ~NpyWriter();  // removes the temp file if not committed; never throws

  const NpyHeader& header() const { return header_; }
  // The temporary file until commit() (for a crash handler that must unlink it without unwinding).
  const std::string& temp_path() const { return tmp_path_; }

  // Appends raw element bytes in C order. Throws NpyError when more bytes than the shape holds are
  // written, on I/O failure (e.g. disk full), or after commit(). After any NpyError from write() or
  // commit() the temp file is already gone and the writer only throws from then on.
  void write(const void* data, std::size_t bytes);

  // Checks exactly elements*item_size bytes were written, flushes, syncs, closes and renames into
  // place. On failure the temp file is removed and NpyError is thrown. commit() is finish() then publish():
  // a command with several outputs finishes every one (the steps that fail on a full disk) before it
  // publishes any, so it leaves all of them or none.
  void commit();
  void finish();   // the checks, flush, fsync and close: the data is on disk, under the temporary name
  void publish();  // the rename into place (after finish())
  // A published file taken back (its rename undone by removing it): a later output of the set failed.
  void unpublish() noexcept;

 private:
  void abandon() noexcept;                             // closes and removes the temp file
  [[noreturn]] void discard(const std::string& what);  // abandon(), then throw "<path>: <what>"

  std::string path_;
  std::string tmp_path_;
  NpyHeader header_;
  detail::FilePtr file_;
  std::uint64_t bytes_written_ = 0;
  bool finished_ = false;
  bool committed_ = false;
  int temp_slot_ = -1;  // lnorm/temp_files.hpp: removed by a signal handler until published or abandoned
};

// Whole-file helpers for tests and small tensors.
std::vector<std::byte> read_all(NpyReader& reader);  // allocates elements*item_size bytes
void save(const std::string& path, const std::string& descr, const std::vector<std::int64_t>& shape,
          const void* data);  // data holds product(shape)*item_size bytes

}  // namespace lnorm::io
