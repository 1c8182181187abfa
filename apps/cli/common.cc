// Helpers shared by the subcommands: error reporting, model-directory resolution and
// token-list options.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "commands.h"
#include "base/cpu.h"
#include "io/file_util.h"
#include "io/token_ids.h"
#include "model/isa_self_test.h"

namespace dsv4::cli {

namespace {
bool g_print_errors = true;  // the process's rank identity: off on ranks other than 0
}  // namespace

void set_error_printing(bool on) { g_print_errors = on; }

int fail(const Status& status) {
  if (g_print_errors) std::fprintf(stderr, "dsv4: error: %s\n", status.message().c_str());
  return 1;
}

Result<std::string> user_cache_root() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  // XDG base-directory rule: a relative path is invalid and ignored.
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/dsv4";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/') return std::string(home) + "/.cache/dsv4";
  return Status::error("cannot locate the user cache directory: neither XDG_CACHE_HOME nor HOME is set to an "
                       "absolute path");
}

Result<std::string> resolve_model_dir(const std::string& model_flag) {
  if (!model_flag.empty()) return model_flag;
  const char* env = std::getenv("DSV4_MODEL");
  if (env != nullptr && env[0] != '\0') return std::string(env);
  const std::string dir = DSV4_BUILTIN_MODEL_DIR;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(dir + "/config.json", ec))
    return Status::errorf(
        "the built-in model is missing: {}/config.json not found (the source tree's models/ folder, "
        "compiled into this binary; pass --model DIR or set DSV4_MODEL=DIR)",
        dir);
  return dir;
}

namespace {

constexpr uint64_t kMaxTokenFileBytes = uint64_t{256} << 20;

bool is_space(char ch) {
  return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

// A token file's items joined by single commas: whitespace next to a comma is dropped,
// whitespace alone between two items becomes a comma, and one trailing comma is dropped.
// Every comma is kept otherwise, so ",1" and "1,,2" still show their empty item.
std::string comma_list_of_file(std::string_view text) {
  std::string list;
  bool gap = false;    // whitespace since the last item character
  bool comma = false;  // a comma since the last item character
  for (char ch : text) {
    if (ch == ',') {
      list += ',';
      comma = true;
    } else if (is_space(ch)) {
      gap = true;
    } else {
      if (gap && !comma && !list.empty()) list += ',';
      list += ch;
      gap = comma = false;
    }
  }
  if (!list.empty() && list.back() == ',') list.pop_back();
  return list;
}

}  // namespace

Result<std::vector<int32_t>> parse_token_list_option(const std::string& option,
                                                     const std::string& value) {
  if (value.empty() || value[0] != '@') {
    Result<std::vector<int32_t>> ids = parse_token_ids(value);
    if (!ids.ok()) return ids.status().with_context(option);
    return ids;
  }
  const std::string path = value.substr(1);
  const std::string where = option + " " + value;
  if (path.empty()) return Status::errorf("{}: no file name after '@' (expected @FILE)", where);
  Result<std::vector<uint8_t>> bytes = read_file(path, kMaxTokenFileBytes);
  if (!bytes.ok()) return bytes.status().with_context(option);
  const std::string_view text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  const std::string list = comma_list_of_file(text);
  if (list.empty()) return Status::errorf("{}: the file holds no token ids", where);
  Result<std::vector<int32_t>> ids = parse_token_ids(list);
  if (!ids.ok()) return ids.status().with_context(where);
  return ids;
}

Status select_isa(const std::string& isa_flag) {
  Result<Isa> isa = parse_isa(isa_flag);
  if (!isa.ok()) return isa.status().with_context("--isa");
  set_kernel_isa(*isa);
  // The chosen variant must reproduce the portable one on this machine (a few ms).
  return isa_self_test(*isa).with_context("--isa " + std::string(isa_name(*isa)));
}

}  // namespace dsv4::cli
