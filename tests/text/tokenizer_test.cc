// The tokenizer on the tiny test tokenizer (text.md §5.3): loader blocks and
// refusals, id layout, added tokens in both passes, the pre-tokenizer pieces of
// §1.5, byte layer, multi-level merges, decoding, streaming, round trips.
#include "text/tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "support/tmp_dir.h"
#include "text/byte_level.h"
#include "text/tiny_tokenizer.h"
#include "text/tokenizer_dir.h"

namespace dsv4 {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int32_t>;

const std::string& tiny_json() {
  static const std::string text = make_tiny_tokenizer().value().tokenizer_json;
  return text;
}

const Tokenizer& tiny() {
  static const Tokenizer tok = Tokenizer::from_json(tiny_json(), "tiny").value();
  return tok;
}

std::string load_error(const json& j) {
  Result<Tokenizer> r = Tokenizer::from_json(j.dump(), "t.json");
  EXPECT_FALSE(r.ok());
  return r.ok() ? std::string() : r.message();
}

std::string decode_ok(const Ids& ids) { return tiny().decode(ids).value(); }

TEST(TinyTokenizerTest, Layout) {
  const Tokenizer& t = tiny();
  EXPECT_EQ(t.n_vocab(), kTinyVocab);
  EXPECT_EQ(t.n_merges(), static_cast<size_t>(kTinyMerges));
  EXPECT_EQ(t.token_id("<｜begin▁of▁sentence｜>"), 0);
  EXPECT_EQ(t.token_id("<｜end▁of▁sentence｜>"), 1);
  EXPECT_EQ(t.token_id("<｜User｜>"), 500);
  EXPECT_EQ(t.token_id("<think>"), 502);
  EXPECT_EQ(t.token_id("｜DSML｜"), 504);
  EXPECT_EQ(t.token_id("<｜read_url｜>"), 511);
  EXPECT_TRUE(t.is_special(0));
  EXPECT_FALSE(t.is_special(500));
  // Byte ids as in the real vocabulary (§1.6).
  EXPECT_EQ(t.encode("!", false), Ids{3});
  EXPECT_EQ(t.encode("~", false), Ids{96});
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    const std::optional<int32_t> id = t.token_id(bytes_to_symbols(one));
    ASSERT_TRUE(id.has_value());
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (b == 0x20) {
      EXPECT_EQ(*id, 223);
    }
    if (b == 0x0A) {
      EXPECT_EQ(*id, 201);
    }
    if (printable && b <= 0x7E) {
      EXPECT_EQ(*id, b - 0x21 + 3);
    }
    EXPECT_EQ(t.token_bytes(*id), one);
  }
  // Merge r creates id 259 + r: every merged token is longer than one byte.
  for (int id = 259; id < 500; ++id) EXPECT_GE(t.token_bytes(id).size(), 2u) << id;
}

TEST(TinyTokenizerTest, ArrayMergesGiveTheSameTokenizer) {
  const std::string arrays = make_tiny_tokenizer(MergesForm::kArrays).value().tokenizer_json;
  ASSERT_NE(arrays, tiny_json());
  EXPECT_TRUE(json::parse(arrays)["model"]["merges"][0].is_array());
  const Tokenizer t2 = Tokenizer::from_json(arrays, "arrays").value();
  const std::string text = "Hello world, 你好！ don't 12345 café\n\tx";
  EXPECT_EQ(t2.encode(text, true), tiny().encode(text, true));
}

TEST(TinyTokenizerTest, GenerationIsDeterministic) {
  EXPECT_EQ(make_tiny_tokenizer().value().tokenizer_json, tiny_json());
}

TEST(TinyTokenizerTest, AddedTokensBothPasses) {
  const Tokenizer& t = tiny();
  const Ids x = t.encode("x", false), y = t.encode("y", false);
  ASSERT_EQ(x.size(), 1u);
  EXPECT_EQ(t.encode("x<think>y", true), (Ids{x[0], 502, y[0]}));
  EXPECT_EQ(t.encode("<think></think>", true), (Ids{502, 503}));          // adjacent
  EXPECT_EQ(t.encode("x<｜end▁of▁sentence｜>y", true), (Ids{x[0], 1, y[0]}));  // pass 1
  EXPECT_EQ(t.encode("<｜User｜>hi<｜Assistant｜>", true).front(), 500);
  EXPECT_EQ(t.encode("<｜User｜>hi<｜Assistant｜>", true).back(), 501);
  // Marker text inside a word, and a marker between two pass-1 tokens.
  const Ids in_word = t.encode("ab｜DSML｜cd", true);
  EXPECT_EQ(std::count(in_word.begin(), in_word.end(), 504), 1);
  EXPECT_EQ(t.encode("<｜begin▁of▁sentence｜><think><｜end▁of▁sentence｜>", true), (Ids{0, 502, 1}));
  // Without allow_special the marker is plain text.
  const Ids plain = t.encode("x<think>y", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 502), 0);
  EXPECT_EQ(decode_ok(plain), "x<think>y");
  // "<<think>>": the marker inside angle brackets (§1.10 shape).
  const Ids lt = t.encode("<", false), gt = t.encode(">", false);
  EXPECT_EQ(t.encode("<<think>>", true), (Ids{lt[0], 502, gt[0]}));
}

// Pass 1 before pass 2: a normalized: false token wins over an overlapping
// normalized: true one even when the latter starts earlier.
TEST(TinyTokenizerTest, PassOneBeforePassTwo) {
  json j = json::parse(tiny_json());
  j["added_tokens"].push_back({{"id", 512}, {"content", "ab"}, {"special", false}, {"normalized", true}});
  j["added_tokens"].push_back({{"id", 513}, {"content", "bc"}, {"special", true}, {"normalized", false}});
  const Tokenizer t = Tokenizer::from_json(j.dump(), "t").value();
  const Ids a = t.encode("a", false);
  EXPECT_EQ(t.encode("abc", true), (Ids{a[0], 513}));
}

// encode_spans: added tokens only inside the given spans, one text for pieces and BPE.
TEST(TinyTokenizerTest, EncodeSpansMatchesAddedTokensOnlyInside) {
  const Tokenizer& t = tiny();
  const std::string text = "<｜User｜>a <think> b<｜end▁of▁sentence｜><｜Assistant｜></think>";
  const uint32_t n = static_cast<uint32_t>(text.size());
  const Span whole{0, n};
  EXPECT_EQ(t.encode_spans(text, {&whole, 1}), t.encode(text, true));
  EXPECT_EQ(t.encode_spans(text, {}), t.encode(text, false));
  // The middle (" a <think> b<｜end▁of▁sentence｜>") outside the spans: plain text there.
  const size_t mid_begin = std::string("<｜User｜>").size();
  const size_t mid_end = text.find("<｜Assistant｜>");
  const Span outer[] = {{0, static_cast<uint32_t>(mid_begin)},
                        {static_cast<uint32_t>(mid_end), static_cast<uint32_t>(n - mid_end)}};
  const Ids ids = t.encode_spans(text, outer);
  Ids want = {500};
  for (int32_t id : t.encode(text.substr(mid_begin, mid_end - mid_begin), false)) want.push_back(id);
  want.insert(want.end(), {501, 503});
  EXPECT_EQ(ids, want);
  EXPECT_EQ(decode_ok(ids), text);
  // A marker cut by a span edge is not matched.
  const Span cut{0, static_cast<uint32_t>(mid_begin - 1)};
  const Ids cut_ids = t.encode_spans(text, {&cut, 1});
  EXPECT_EQ(std::count(cut_ids.begin(), cut_ids.end(), 500), 0);
  EXPECT_EQ(decode_ok(cut_ids), text);
}

// Without added-token strings outside the spans, the ids are those of encode(text, true):
// pieces and BPE cross span edges as in one text.
TEST(TinyTokenizerTest, EncodeSpansKeepsIdsOfPlainGaps) {
  const Tokenizer& t = tiny();
  std::mt19937 rng(3);
  const char* parts[] = {"<｜User｜>", "<think>", "</think>", "｜DSML｜", "<｜end▁of▁sentence｜>", "hello", " world",
                         "  ", "\n\n", "123456", "你好", "'s", "<", ">", "｜", "\"", "=", "x", "🙂", "\t"};
  for (int iter = 0; iter < 500; ++iter) {
    std::string text;
    std::vector<Span> spans;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) {
      const std::string part = parts[rng() % std::size(parts)];
      const std::optional<int32_t> id = t.token_id(part);
      const bool is_marker = id && (*id < 3 || *id >= 500);
      if (is_marker || rng() % 3 == 0) {
        const uint32_t begin = static_cast<uint32_t>(text.size());
        if (!spans.empty() && spans.back().begin + spans.back().size == begin) {
          spans.back().size += static_cast<uint32_t>(part.size());
        } else {
          spans.push_back({begin, static_cast<uint32_t>(part.size())});
        }
      }
      text += part;
    }
    ASSERT_EQ(t.encode_spans(text, spans), t.encode(text, true)) << text;
  }
}

TEST(TinyTokenizerTest, EncodeSpansOnInvalidUtf8) {
  const Tokenizer& t = tiny();
  const std::string text = "a\xFF<think>\xC0<think>";
  const Span second{10, 7};  // the second <think>
  const Ids ids = t.encode_spans(text, {&second, 1});
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 502), 1);
  EXPECT_EQ(ids.back(), 502);
  EXPECT_EQ(decode_ok(ids), "a\uFFFD<think>\uFFFD<think>");
}

std::vector<std::string> pieces(const std::string& s) { return tiny().pre_tokenize(s); }
using Pieces = std::vector<std::string>;

TEST(TinyTokenizerTest, PreTokenizerPiecesOfSpec) {
  EXPECT_EQ(pieces("Hello! 毕老师！1 + 1 = 2"),
            (Pieces{"Hello", "!", " ", "毕老师", "！", "1", " +", " ", "1", " =", " ", "2"}));
  EXPECT_EQ(pieces("Hi 你好 123abc  \n\nend"),
            (Pieces{"Hi", " ", "你好", " ", "123", "abc", "  \n\n", "end"}));
  EXPECT_EQ(pieces("  \n  x   a"), (Pieces{"  \n", " ", " x", "  ", " a"}));
  EXPECT_EQ(pieces("don't ~/path a~b"), (Pieces{"don", "'t", " ~/", "path", " a", "~b"}));
  EXPECT_EQ(pieces("def f(x):\n    return x**2\n"),
            (Pieces{"def", " f", "(x", "):\n", "   ", " return", " x", "**", "2", "\n"}));
  EXPECT_EQ(pieces("12345678"), (Pieces{"123", "456", "78"}));
  EXPECT_EQ(pieces("カタ・カナ"), (Pieces{"カタ", "・", "カナ"}));
  EXPECT_EQ(pieces("a  "), (Pieces{"a", "  "}));            // (?!\S) at the end of a piece
  EXPECT_EQ(pieces("\tword café"), (Pieces{"\tword", " café"}));
  // Oniguruma's \s: U+0085 and U+3000 are spaces, U+180E and U+200B are not.
  EXPECT_EQ(pieces("a\u0085\u0085b"), (Pieces{"a", "\u0085", "\u0085b"}));
  EXPECT_EQ(pieces("a\u3000\u3000b"), (Pieces{"a", "\u3000", "\u3000b"}));
  EXPECT_EQ(pieces("x\u180E\u180Ey"), (Pieces{"x", "\u180E", "\u180Ey"}));
  EXPECT_EQ(pieces("\x01\x02"), (Pieces{"\x01\x02"}));  // no alternative matches: one gap
}

TEST(TinyTokenizerTest, ByteLayerAndMerges) {
  const Tokenizer& t = tiny();
  // An emoji with no merges is four byte tokens.
  const Ids e = t.encode("🙂", false);
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(decode_ok(e), "🙂");
  // Some merge ends inside a character (CJK bytes of the corpus).
  bool inside = false;
  for (int id = 259; id < 500 && !inside; ++id)
    inside = utf8_valid_prefix(t.token_bytes(id)) != t.token_bytes(id).size();
  EXPECT_TRUE(inside);
  // Multi-level merges: some merge's parts are merges themselves.
  const json j = json::parse(tiny_json());
  bool multi = false;
  for (const auto& m : j["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    const size_t sp = s.find(' ');
    const auto l = t.token_id(s.substr(0, sp)), r = t.token_id(s.substr(sp + 1));
    multi = multi || (*l >= 259 && *r >= 259);
  }
  EXPECT_TRUE(multi);
  // Frequent words of the corpus are single tokens.
  EXPECT_EQ(t.encode(" the", false).size(), 1u);
}

TEST(TinyTokenizerTest, ScanAndHeapMergeAgree) {
  const Tokenizer& t = tiny();
  std::mt19937 rng(3);
  const std::string alphabet = "the quick brown fox jumps; 你好世界 123 café";
  for (int iter = 0; iter < 200; ++iter) {
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 300);
    for (int k = 0; k < n; ++k) s += alphabet[rng() % alphabet.size()];
    s = utf8_lossy(s);
    // Whole string as one BPE piece: byte ids, then both algorithms.
    std::vector<int32_t> a, b;
    for (char c : s) a.push_back(*t.token_id(bytes_to_symbols(std::string(1, c))));
    b = a;
    BpeMerges merges;  // rebuild from the file to reach the private table
    const json j = json::parse(tiny_json());
    for (const auto& m : j["model"]["merges"]) {
      const std::string ms = m.get<std::string>();
      const size_t sp = ms.find(' ');
      merges.add(*t.token_id(ms.substr(0, sp)), *t.token_id(ms.substr(sp + 1)),
                 *t.token_id(ms.substr(0, sp) + ms.substr(sp + 1)));
    }
    std::vector<int32_t> c = a;
    merges.apply_scan(a);
    merges.apply_heap(b);
    merges.apply_buckets(c);
    ASSERT_EQ(a, b) << s;
    ASSERT_EQ(c, b) << s;
  }
  // A 50 000-letter word goes through the heap path.
  const std::string word(50000, 'e');
  EXPECT_EQ(decode_ok(t.encode(word, false)), word);
}

// The merges of a long piece do work linear in its length (counted, not timed): the candidates
// queued, the merges and the positions sorted grow 8x for 8x the symbols, and the ids equal the
// heap's. One (rank, position) heap of every candidate costs log n per pop, and its pops miss the
// cache once the piece's heap outgrows it: 32.8 -> 256 us/KiB from 64 KiB to 8 MiB before.
TEST(TinyTokenizerTest, LongPieceMergeWorkIsLinear) {
  const Tokenizer& t = tiny();
  BpeMerges merges;
  const json j = json::parse(tiny_json());
  for (const auto& m : j["model"]["merges"]) {
    const std::string ms = m.get<std::string>();
    const size_t sp = ms.find(' ');
    merges.add(*t.token_id(ms.substr(0, sp)), *t.token_id(ms.substr(sp + 1)),
               *t.token_id(ms.substr(0, sp) + ms.substr(sp + 1)));
  }
  const std::string pieces[] = {"e", "the", "ing", "ee e"};
  for (const std::string& unit : pieces) {
    BpeWork work[2];
    const size_t sizes[2] = {size_t{1} << 14, size_t{1} << 17};
    for (int k = 0; k < 2; ++k) {
      std::vector<int32_t> a;
      while (a.size() < sizes[k])
        for (char ch : unit) a.push_back(*t.token_id(bytes_to_symbols(std::string(1, ch))));
      std::vector<int32_t> b = a;
      merges.apply_buckets(a, &work[k]);
      merges.apply_heap(b);
      ASSERT_EQ(a, b) << unit;
    }
    EXPECT_GT(work[0].merges, 0) << unit;
    EXPECT_LE(work[1].candidates, 8 * work[0].candidates + 64) << unit;
    EXPECT_LE(work[1].merges, 8 * work[0].merges + 64) << unit;
    EXPECT_LE(work[1].sorted, 8 * work[0].sorted + 64) << unit;
    EXPECT_LE(work[1].candidates, 4 * static_cast<int64_t>(sizes[1])) << unit;
  }
}

TEST(TinyTokenizerTest, DecodeNonByteTokensAndErrors) {
  const Tokenizer& t = tiny();
  EXPECT_EQ(decode_ok({504}), "｜DSML｜");
  EXPECT_EQ(decode_ok({500, 501}), "<｜User｜><｜Assistant｜>");
  EXPECT_EQ(t.decode(Ids{0, 500, 1}, /*skip_special=*/true).value(), "<｜User｜>");
  // Lossy: a lone continuation byte and a truncated emoji.
  const int32_t b80 = *t.token_id(bytes_to_symbols("\x80"));
  const int32_t bF0 = *t.token_id(bytes_to_symbols("\xF0"));
  EXPECT_EQ(decode_ok({b80}), "\xEF\xBF\xBD");
  EXPECT_EQ(decode_ok({bF0, 3}), "\xEF\xBF\xBD!");
  Result<std::string> bad = t.decode(Ids{5, 512});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("512"), std::string::npos);
  EXPECT_FALSE(t.decode(Ids{-1}).ok());
}

TEST(TinyTokenizerTest, InvalidUtf8IsEncodedAsReplacementCharacter) {
  const Tokenizer& t = tiny();
  EXPECT_EQ(t.encode("a\xFF" "b", false), t.encode("a\uFFFDb", false));
  EXPECT_EQ(t.encode("\xF0\x9F\x99", false), t.encode("\uFFFD", false));
  EXPECT_EQ(decode_ok(t.encode("x\xC0\xAFy", true)), "x\uFFFD\uFFFDy");
}

// Random valid UTF-8 from all planes: decode(encode(s)) == s, deterministic.
TEST(TinyTokenizerTest, RoundTripRandomText) {
  const Tokenizer& t = tiny();
  std::mt19937 rng(11);
  const uint32_t specials[] = {0x09, 0x0A, 0x0D, 0x20, 0xA0, 0x85, 0x3000, 0x2028, 0x200D, 0x180E,
                               0xFEFF, 0x1F468, 0x1F469, 0x301, 0x4E2D, 0x3042, 0xAC00, 0x0416};
  for (int iter = 0; iter < 2000; ++iter) {
    std::string s;
    const int n = static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) {
      uint32_t cp;
      switch (rng() % 4) {
        case 0: cp = 0x20 + rng() % 0x5F; break;
        case 1: cp = specials[rng() % std::size(specials)]; break;
        case 2: cp = rng() % 0x110000; break;
        default: cp = rng() % 0x80; break;
      }
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
      utf8_append(s, cp);
    }
    if (rng() % 8 == 0) s += "<think>";
    const Ids ids = t.encode(s, true);
    ASSERT_EQ(decode_ok(ids), s);
    ASSERT_EQ(t.encode(s, true), ids);
  }
}

// Streaming: every split point of multi-byte characters; the text returned so far
// is always valid UTF-8 and the total equals whole-sequence decoding.
TEST(TinyTokenizerTest, StreamingDecodeNeverSplitsCharacters) {
  const Tokenizer& t = tiny();
  std::mt19937 rng(5);
  const std::string text = "你好，世界！🙂👩‍👩‍👧 café naïve Привет こんにちは <think>x</think>";
  Ids ids = t.encode(text, true);
  // Also byte tokens 3..258 in random order (lossy decoding of garbage).
  for (int k = 0; k < 300; ++k) ids.push_back(3 + static_cast<int32_t>(rng() % 256));
  StreamDecoder dec(t);
  std::string got;
  for (int32_t id : ids) {
    std::string part;
    ASSERT_TRUE(dec.push(id, part).ok());
    ASSERT_EQ(utf8_valid_prefix(part), part.size());
    got += part;
  }
  dec.finish(got);
  EXPECT_EQ(got, decode_ok(ids));
  // Every byte of a 4-byte character as its own token.
  StreamDecoder d2(t);
  std::string out;
  for (char c : std::string("🙂")) {
    ASSERT_TRUE(d2.push(*t.token_id(bytes_to_symbols(std::string(1, c))), out).ok());
    if (out.empty()) continue;
    EXPECT_EQ(out, "🙂");
  }
  EXPECT_EQ(out, "🙂");
  EXPECT_FALSE(d2.push(9999, out).ok());
}

// Refusals name the block and its type (or the field).
TEST(TinyTokenizerTest, RejectsUnsupportedBlocks) {
  const json base = json::parse(tiny_json());
  auto with = [&](const std::string& ptr, const json& v) {
    json j = base;
    j[json::json_pointer(ptr)] = v;
    return load_error(j);
  };
  auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(with("/normalizer", {{"type", "NFC"}}), "normalizer: type \"NFC\""));
  EXPECT_TRUE(has(with("/normalizer/normalizers", json::array({{{"type", "Lowercase"}}})),
                  "normalizer.normalizers[0]: type \"Lowercase\""));
  EXPECT_TRUE(has(with("/pre_tokenizer", {{"type", "Metaspace"}}), "pre_tokenizer: type \"Metaspace\""));
  EXPECT_TRUE(has(with("/pre_tokenizer/pretokenizers/0/behavior", "Removed"),
                  "pre_tokenizer.pretokenizers[0].behavior: \"Removed\""));
  EXPECT_TRUE(has(with("/pre_tokenizer/pretokenizers/3/use_regex", true), "use_regex"));
  EXPECT_TRUE(has(with("/pre_tokenizer/pretokenizers/0/pattern", {{"Regex", "(unclosed"}}),
                  "pre_tokenizer.pretokenizers[0].pattern"));
  // \C (one code unit) could end a piece inside a character.
  EXPECT_TRUE(has(with("/pre_tokenizer/pretokenizers/0/pattern", {{"Regex", "a\\C"}}),
                  "pre_tokenizer.pretokenizers[0].pattern: regex \"a\\C\""));
  EXPECT_TRUE(has(with("/decoder", {{"type", "WordPiece"}}), "decoder: type \"WordPiece\""));
  EXPECT_TRUE(has(with("/post_processor", {{"type", "TemplateProcessing"}}),
                  "post_processor: type \"TemplateProcessing\""));
  EXPECT_TRUE(has(with("/model/type", "Unigram"), "model: type \"Unigram\""));
  EXPECT_TRUE(has(with("/model/byte_fallback", true), "model.byte_fallback"));
  EXPECT_TRUE(has(with("/model/dropout", 0.1), "model.dropout"));
  EXPECT_TRUE(has(with("/model/ignore_merges", true), "model.ignore_merges"));
  EXPECT_TRUE(has(with("/added_tokens/3/lstrip", true), "added_tokens[3].lstrip"));
  EXPECT_TRUE(has(with("/model/merges/0", "nospace"), "model.merges[0]"));
  EXPECT_TRUE(has(with("/model/merges/0", 5), "model.merges[0]"));
  {
    json j = base;
    j["model"]["vocab"].erase("Ġ");
    j["model"]["vocab"]["not-a-byte"] = 223;
    EXPECT_TRUE(has(load_error(j), "model.vocab: no token for byte 0x20"));
  }
  EXPECT_TRUE(has(with("/added_tokens/3/id", 513), "id 500 has no token"));
  // An id beyond the number of entries is refused before any table is sized by it.
  EXPECT_TRUE(has(with("/added_tokens/3/id", 900), "id 900 is beyond the 515 tokens"));
  EXPECT_TRUE(has(with("/model/vocab/a", (1 << 30) - 1), "id 1073741823 is beyond"));
  EXPECT_TRUE(has(with("/truncation", {{"max_length", 5}}), "truncation"));
  json no_model = base;
  no_model.erase("model");
  EXPECT_TRUE(has(load_error(no_model), "model: missing"));
  EXPECT_TRUE(has(load_error(json::array()), "top level"));
  Result<Tokenizer> r = Tokenizer::from_json("{not json", "x.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "x.json: not valid JSON");
  // Deep nesting is refused at parse time (an error message printing it would recurse).
  const std::string deep = "{\"truncation\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  Result<Tokenizer> d = Tokenizer::from_json(deep, "x.json");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.message(), "x.json: nests deeper than 64 levels");
}

TEST(TinyTokenizerTest, ModelDirectoryWithConfig) {
  test::TmpDir dir;
  ASSERT_TRUE(write_tiny_tokenizer(dir.path()).ok());
  Result<TextModel> m = load_tokenizer_dir(dir.path());
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_FALSE(m->config.add_bos_token);
  EXPECT_EQ(m->config.bos_id, 0);
  EXPECT_EQ(m->config.eos_id, 1);
  EXPECT_EQ(encode_prompt(*m, "hi", true), m->tokenizer.encode("hi", true));
  // add_bos_token true puts BOS first.
  std::ofstream(dir.file("tokenizer_config.json"), std::ios::trunc)
      << R"({"add_bos_token": true, "bos_token": "<think>"})";
  m = load_tokenizer_dir(dir.path());
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(encode_prompt(*m, "hi", true).front(), 502);
  const Tokenizer& t = m->tokenizer;
  Result<TokenizerConfig> bad = parse_tokenizer_config(R"({"add_bos_token": 1})", "c.json", t);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("add_bos_token: expected boolean"), std::string::npos);
  bad = parse_tokenizer_config(R"({"eos_token": "<nope>"})", "c.json", t);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("eos_token: \"<nope>\" is not a token"), std::string::npos);
  bad = parse_tokenizer_config(R"({"add_bos_token": true})", "c.json", t);
  EXPECT_FALSE(bad.ok());
  bad = parse_tokenizer_config("{\"bos_token\": " + std::string(100000, '[') + std::string(100000, ']') + "}",
                               "c.json", t);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "c.json: nests deeper than 64 levels");
  // Missing tokenizer.json names the path.
  test::TmpDir empty;
  Result<TextModel> none = load_tokenizer_dir(empty.path());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.message().find("tokenizer.json"), std::string::npos);
}

}  // namespace
}  // namespace dsv4
