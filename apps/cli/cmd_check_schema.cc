// dsv4 check-schema FILE... [--best-effort] [--json-whitespace compact|flexible]: compiles each
// JSON Schema as response_format would (no model), one JSON line per file on stdout:
//   {"file", "ok": bool, "error": message or null, "relaxed": ["PATH: KEYWORD", ...], "nodes"}
// Exit code 0 when every file compiles, else 1 (scripts/schemastore.py reads the lines).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "io/file_util.h"
#include "base/ordered_json.h"
#include "runtime/grammar_cache.h"

namespace dsv4::cli {
namespace {

struct CheckSchemaArgs {
  std::vector<std::string> files;
  bool best_effort = false;
  std::string whitespace = "compact";
};

constexpr uint64_t kMaxSchemaBytes = uint64_t{1} << 20;  // as dsv4 generate --json-schema

OrderedJson check_one(const CheckSchemaArgs& a, const std::string& file) {
  OrderedJson line = {{"file", file}, {"ok", false}, {"error", nullptr}, {"relaxed", OrderedJson::array()},
                      {"nodes", 0}};
  Result<std::vector<uint8_t>> bytes = read_file(file, kMaxSchemaBytes);
  if (!bytes.ok()) {
    line["error"] = bytes.message();
    return line;
  }
  OutputConstraint c;
  c.json_schema.assign(bytes->begin(), bytes->end());
  c.strict = !a.best_effort;
  c.whitespace_flexible = a.whitespace == "flexible";
  Result<grammar::Grammar> g = compile_constraint(c);
  if (!g.ok()) {
    line["error"] = g.message();
    return line;
  }
  line["ok"] = true;
  line["relaxed"] = g->relaxed;
  line["nodes"] = g->nodes.size();
  return line;
}

}  // namespace

Command add_check_schema(CLI::App& app) {
  auto a = std::make_shared<CheckSchemaArgs>();
  CLI::App* sub = app.add_subcommand("check-schema", "Compile JSON Schema files as response_format does (no model)");
  sub->add_option("files", a->files, "JSON Schema files")->required();
  sub->add_flag("--best-effort", a->best_effort, "strict: false: relax the keywords the engine cannot enforce");
  sub->add_option("--json-whitespace", a->whitespace, "compact or flexible")
      ->capture_default_str()
      ->check(CLI::IsMember({"compact", "flexible"}));
  return {sub, [a]() {
            bool all = true;
            for (const std::string& f : a->files) {
              const OrderedJson line = check_one(*a, f);
              all = all && line["ok"].get<bool>();
              std::printf("%s\n", line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
            }
            return all ? 0 : 1;
          }};
}

}  // namespace dsv4::cli
