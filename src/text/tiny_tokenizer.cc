#include "text/tiny_tokenizer.h"

#include <map>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/file_util.h"
#include "text/added_tokens.h"
#include "text/byte_level.h"
#include "text/tokenizer.h"

namespace dsv4 {
namespace {

using ojson = nlohmann::ordered_json;

constexpr const char* kR1 = "\\p{N}{1,3}";
constexpr const char* kR2 = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+";
constexpr const char* kR3 =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

struct Marker {
  int id;
  const char* content;
  bool special;
};
constexpr Marker kMarkers[] = {
    {0, "<｜begin▁of▁sentence｜>", true}, {1, "<｜end▁of▁sentence｜>", true},
    {2, "<｜▁pad▁｜>", true},             {500, "<｜User｜>", false},
    {501, "<｜Assistant｜>", false},      {502, "<think>", false},
    {503, "</think>", false},            {504, "｜DSML｜", false},
    {505, "<｜latest_reminder｜>", false}, {506, "<｜action｜>", false},
    {507, "<｜query｜>", false},          {508, "<｜authority｜>", false},
    {509, "<｜domain｜>", false},         {510, "<｜title｜>", false},
    {511, "<｜read_url｜>", false},
};

// Fixed training corpus (used 3 times).
constexpr const char* kCorpus =
    "The quick brown fox jumps over the lazy dog. It's a fine day, isn't it? We'll see: "
    "don't worry, they're here!\n"
    "Hello world. Hello there, my friend; how are you doing today? I am doing well, thanks.\n"
    "def add(a, b):\n    return a + b\n\nfor (int i = 0; i < n; ++i) {\n\tsum += x[i] * 2;\n}\n"
    "if (x == y && z != 0) { print(\"ok\"); } else { return -1; }\n"
    "Numbers: 1 22 333 4444 55555 1234567890 3.14159 2024-05-17 12:30:45 $19.99 100%\n"
    "你好，世界！我们今天学习中文。这是一个测试句子，包括标点符号。中国人民很好。\n"
    "こんにちは、世界。ひらがなとカタカナ・テスト。ありがとうございます。\n"
    "Привет, мир! Как дела? Хорошо, спасибо.\n"
    "naïve café résumé über straße. 안녕하세요 세계.\n"
    "<｜User｜>What is the weather?<｜Assistant｜><think>The user asks.</think>It is sunny."
    "<｜end▁of▁sentence｜>\n"
    "<tool_result>{\"name\": \"get_weather\", \"city\": \"Paris\"}</tool_result>\n"
    "<｜DSML｜invoke name=\"search\">\n<｜DSML｜parameter name=\"query\" string=\"true\">"
    "hello</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
    "You have access to the following tools. Use them when needed; the answer should be short.\n"
    "the the the and and and of of in in to to is is that that with with for for on on\n";

void add_pipeline_blocks(ojson& j) {
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", ojson::array()}};
  ojson splits = ojson::array();
  for (const char* re : {kR1, kR2, kR3})
    splits.push_back({{"type", "Split"},
                      {"pattern", {{"Regex", re}}},
                      {"behavior", "Isolated"},
                      {"invert", false}});
  splits.push_back({{"type", "ByteLevel"},
                    {"add_prefix_space", false},
                    {"trim_offsets", true},
                    {"use_regex", false}});
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", splits}};
  j["post_processor"] = {{"type", "ByteLevel"},
                         {"add_prefix_space", true},
                         {"trim_offsets", false},
                         {"use_regex", true}};
  j["decoder"] = {{"type", "ByteLevel"},
                  {"add_prefix_space", true},
                  {"trim_offsets", true},
                  {"use_regex", true}};
}

// vocab: ids 0..2, the 256 byte symbols (§1.6 order), then the merged tokens in id
// order; chat_markers false leaves out ids 500..511 (the untrained seed).
ojson tokenizer_json(const std::vector<std::string>& symbol_of,
                     const std::vector<std::pair<std::string, std::string>>& merges,
                     MergesForm form, bool chat_markers = true) {
  ojson j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  ojson added = ojson::array();
  for (const Marker& m : kMarkers) {
    if (!chat_markers && m.id >= 3) continue;
    added.push_back({{"id", m.id},
                     {"content", m.content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", !m.special},
                     {"special", m.special}});
  }
  j["added_tokens"] = added;
  add_pipeline_blocks(j);
  ojson vocab = ojson::object();
  for (size_t id = 0; id < symbol_of.size(); ++id) vocab[symbol_of[id]] = id;
  ojson merge_list = ojson::array();
  for (const auto& [l, r] : merges) {
    if (form == MergesForm::kStrings) merge_list.push_back(l + " " + r);
    else merge_list.push_back(ojson::array({l, r}));
  }
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"vocab", vocab},
                {"merges", merge_list}};
  return j;
}

std::string config_json() {
  ojson j;
  j["add_bos_token"] = false;
  j["add_eos_token"] = false;
  j["bos_token"] = {{"__type", "AddedToken"}, {"content", kMarkers[0].content}, {"lstrip", false},
                    {"normalized", true}, {"rstrip", false}, {"single_word", false}};
  j["clean_up_tokenization_spaces"] = false;
  j["eos_token"] = {{"__type", "AddedToken"}, {"content", kMarkers[1].content}, {"lstrip", false},
                    {"normalized", true}, {"rstrip", false}, {"single_word", false}};
  j["legacy"] = true;
  j["model_max_length"] = 1024;
  j["pad_token"] = {{"__type", "AddedToken"}, {"content", kMarkers[1].content}, {"lstrip", false},
                    {"normalized", true}, {"rstrip", false}, {"single_word", false}};
  j["sp_model_kwargs"] = ojson::object();
  j["unk_token"] = nullptr;
  j["tokenizer_class"] = "PreTrainedTokenizerFast";
  return j.dump(2) + "\n";
}

Status write_text_file(const std::string& path, const std::string& text) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  return write_file_atomic(path, {std::span<const uint8_t>(p, text.size())});
}

}  // namespace

Result<TinyTokenizerFiles> make_tiny_tokenizer(MergesForm form) {
  // Ids 0..258: markers 0..2 and the byte symbols.
  std::vector<std::string> symbol_of = {kMarkers[0].content, kMarkers[1].content, kMarkers[2].content};
  std::vector<int> byte_order;
  for (int b = 0; b < 256; ++b)
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) byte_order.push_back(b);
  for (int b = 0; b < 256; ++b)
    if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) byte_order.push_back(b);
  int32_t byte_id[256];
  for (int b : byte_order) {
    byte_id[b] = static_cast<int32_t>(symbol_of.size());
    symbol_of.push_back(bytes_to_symbols(std::string(1, static_cast<char>(b))));
  }

  // Pre-tokenize the corpus with the untrained tokenizer, markers removed (§5.2 step 2).
  Result<Tokenizer> seed = Tokenizer::from_json(tokenizer_json(symbol_of, {}, form, false).dump(),
                                                  "tiny seed");
  if (!seed.ok()) return seed.status();
  AddedTokenMatcher markers;
  for (const Marker& m : kMarkers) markers.add(m.content, m.id);
  std::string corpus;
  for (int k = 0; k < 3; ++k) corpus += kCorpus;
  std::map<std::string, int64_t> piece_count;
  size_t pos = 0;
  AddedTokenMatcher::Match match;
  while (pos <= corpus.size()) {
    const bool found = markers.find(corpus, pos, match);
    const size_t end = found ? match.begin : corpus.size();
    for (const std::string& p : seed->pre_tokenize(std::string_view(corpus).substr(pos, end - pos)))
      ++piece_count[p];
    if (!found) break;
    pos = match.begin + match.size;
  }
  std::vector<std::vector<int32_t>> pieces;
  std::vector<int64_t> counts;
  for (const auto& [p, c] : piece_count) {
    std::vector<int32_t> ids;
    for (char ch : p) ids.push_back(byte_id[static_cast<uint8_t>(ch)]);
    pieces.push_back(std::move(ids));
    counts.push_back(c);
  }

  // 241 merges (§5.2 step 3).
  std::vector<std::pair<std::string, std::string>> merges;
  for (int r = 0; r < kTinyMerges; ++r) {
    std::map<std::pair<int32_t, int32_t>, int64_t> pair_count;
    for (size_t i = 0; i < pieces.size(); ++i)
      for (size_t k = 0; k + 1 < pieces[i].size(); ++k)
        pair_count[{pieces[i][k], pieces[i][k + 1]}] += counts[i];
    std::pair<int32_t, int32_t> best{-1, -1};
    int64_t best_count = 0;
    for (const auto& [pair, c] : pair_count)  // map order: ties go to the smaller pair
      if (c > best_count) {
        best = pair;
        best_count = c;
      }
    if (best_count < 2)
      return Status::errorf("tiny tokenizer: the corpus yields only {} merges, need {}", r, kTinyMerges);
    const int32_t id = static_cast<int32_t>(symbol_of.size());
    const std::string merged = symbol_of[best.first] + symbol_of[best.second];
    for (const std::string& s : symbol_of)
      if (s == merged) return Status::errorf("tiny tokenizer: merge {} repeats the token \"{}\"", r, s);
    merges.push_back({symbol_of[best.first], symbol_of[best.second]});
    symbol_of.push_back(symbol_of[best.first] + symbol_of[best.second]);
    for (std::vector<int32_t>& p : pieces) {
      size_t w = 0;
      for (size_t k = 0; k < p.size(); ++k) {
        if (k + 1 < p.size() && p[k] == best.first && p[k + 1] == best.second) {
          p[w++] = id;
          ++k;
        } else {
          p[w++] = p[k];
        }
      }
      p.resize(w);
    }
  }
  return TinyTokenizerFiles{tokenizer_json(symbol_of, merges, form).dump(2) + "\n", config_json()};
}

Status write_tiny_tokenizer(const std::string& dir) {
  Result<TinyTokenizerFiles> files = make_tiny_tokenizer();
  if (!files.ok()) return files.status();
  DSV4_RETURN_IF_ERROR(write_text_file(dir + "/tokenizer.json", files->tokenizer_json));
  return write_text_file(dir + "/tokenizer_config.json", files->tokenizer_config_json);
}

}  // namespace dsv4
