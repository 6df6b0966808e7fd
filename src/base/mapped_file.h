// MappedFile: a read-only memory map of a whole file, so model weights are used in place without a copy.
// It owns the mapping and nothing else; validation of what is inside belongs to the format readers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/status.h"

namespace rwd {

class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }
  // Drops the pages wholly inside `range` (part of bytes()) from this process's memory, for bytes that a copy
  // now serves; read again, they come back from the file.
  void release(std::span<const uint8_t> range) const;

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rwd
