// A read-only memory map of one whole file (POSIX mmap). The checkpoint layer views tensors in
// place through it, so weights are paged in on first touch and shared with the page cache.
#pragma once

#include <cstddef>
#include <filesystem>

namespace specd::model {

class MappedFile {
 public:
  // Maps `path` read-only. Throws specd::Error: kNotFound when the file does not exist,
  // kModelFormat when it cannot be opened, stat'ed or mapped. An empty file maps to
  // data() == nullptr, size() == 0.
  static MappedFile open(const std::filesystem::path& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile() = default;
  void release() noexcept;

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace specd::model
