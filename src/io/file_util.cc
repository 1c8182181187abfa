// Atomic replace and bounded read (see file_util.h).
#include "io/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace dsv4 {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

Status write_all(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::errorf("{}: write failed: {}", path, errno_text(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status();
}

}  // namespace

Status write_file_atomic(const std::string& path, const std::vector<std::span<const uint8_t>>& parts) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::errorf("{}: cannot create: {}", tmp, errno_text(errno));
  Status st;
  for (std::span<const uint8_t> part : parts) {
    st = write_all(fd, part.data(), part.size(), tmp);
    if (!st.ok()) break;
  }
  if (st.ok() && ::fsync(fd) != 0) st = Status::errorf("{}: fsync failed: {}", tmp, errno_text(errno));
  if (::close(fd) != 0 && st.ok()) st = Status::errorf("{}: close failed: {}", tmp, errno_text(errno));
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    st = Status::errorf("{}: cannot rename {} into place: {}", path, tmp, errno_text(errno));
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

Result<std::vector<uint8_t>> read_file(const std::string& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::errorf("{}: cannot open: {}", path, errno_text(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::errorf("{}: cannot stat: {}", path, errno_text(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::errorf("{}: not a regular file", path);
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    ::close(fd);
    return Status::errorf("{}: file is {} bytes, more than the limit of {}", path, size, max_bytes);
  }
  std::vector<uint8_t> bytes(size);
  size_t done = 0;
  while (done < size) {
    const ssize_t r = ::read(fd, bytes.data() + done, size - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const int err = errno;
      ::close(fd);
      if (r == 0) return Status::errorf("{}: file shrank while reading ({} of {} bytes)", path, done, size);
      return Status::errorf("{}: read failed: {}", path, errno_text(err));
    }
    done += static_cast<size_t>(r);
  }
  ::close(fd);
  return bytes;
}

}  // namespace dsv4
