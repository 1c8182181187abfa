// Output parsing (text.md §3.14) and structured streaming (§4.4): the
// streaming parser, fed every split of a completion, releases exactly what
// the one-shot parser returns, tool-call arguments as fragments while they are generated.
#include "chat/parse.h"

#include <gtest/gtest.h>

#include "chat/examples.h"
#include "chat/py_json.h"

namespace dsv4::chat {
namespace {

using examples::kEos;

// The model's turn of example 3 (§3.15), as generated after `<｜Assistant｜><think>`.
const std::string kExample3Output =
    "Need the weather tool.</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
    "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
    "<｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter>\n"
    "</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + kEos;

ParsedMessage parse_ok(const std::string& text, ThinkingMode mode) {
  auto r = parse_completion(text, mode);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? *r : ParsedMessage{};
}

TEST(ChatParse, WorkedExamples) {
  ParsedMessage m1 = parse_ok("Hello! How can I help you today?" + kEos, ThinkingMode::kChat);
  EXPECT_EQ(m1.content, "Hello! How can I help you today?");
  EXPECT_EQ(m1.reasoning_content, "");
  EXPECT_TRUE(m1.tool_calls.empty());

  ParsedMessage m2 = parse_ok("Simple again.</think>3 + 3 = 6." + kEos, ThinkingMode::kThinking);
  EXPECT_EQ(m2.reasoning_content, "Simple again.");
  EXPECT_EQ(m2.content, "3 + 3 = 6.");
  EXPECT_TRUE(m2.tool_calls.empty());

  ParsedMessage m3 = parse_ok(kExample3Output, ThinkingMode::kThinking);
  EXPECT_EQ(m3.reasoning_content, "Need the weather tool.");
  EXPECT_EQ(m3.content, "");
  ASSERT_EQ(m3.tool_calls.size(), 1u);
  EXPECT_EQ(m3.tool_calls[0].name, "get_weather");
  EXPECT_EQ(m3.tool_calls[0].arguments, R"({"city": "Paris", "days": 2})");
  EXPECT_EQ(tool_call_json(m3.tool_calls[0], "call_0").dump(),
            R"({"id":"call_0","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"days\": 2}"}})");
}

TEST(ChatParse, CallsEdgeForms) {
  // Two invokes, content before the calls, an empty invoke (rendered with an empty line),
  // a multi-line string value with quotes, chat mode.
  const std::string text =
      "Let me check.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"a\">\n\n</｜DSML｜invoke>\n"
      "<｜DSML｜invoke name=\"b\">\n<｜DSML｜parameter name=\"q\" string=\"true\">x \"y\"\nz</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"o\" string=\"false\">{\"k\": [1]}</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls>" + kEos;
  ParsedMessage m = parse_ok(text, ThinkingMode::kChat);
  EXPECT_EQ(m.content, "Let me check.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].name, "a");
  EXPECT_EQ(m.tool_calls[0].arguments, "{}");
  EXPECT_EQ(m.tool_calls[1].arguments, R"({"q": "x \"y\"\nz", "o": {"k": [1]}})");
}

TEST(ChatParse, MalformedIsRejected) {
  auto fails = [](const std::string& text, ThinkingMode mode, const std::string& what) {
    auto r = parse_completion(text, mode);
    EXPECT_FALSE(r.ok()) << text;
    EXPECT_NE(r.message().find(what), std::string::npos) << r.message();
  };
  const auto T = ThinkingMode::kThinking;
  const auto C = ThinkingMode::kChat;
  fails("no close" + kEos, T, "</think>");
  fails("r\n\n<｜DSML｜tool_calls>\n</｜DSML｜tool_calls></think>" + kEos, T, "</think>");
  fails("no eos", C, "EOS");
  fails("a" + kEos + "b", C, "after the EOS");
  fails("a</think>b" + kEos, C, "unexpected </think>");
  fails("r</think>a<think>" + kEos, T, "unexpected <think>");
  const std::string head = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n";
  const std::string param = "<｜DSML｜parameter name=\"k\" string=\"true\">v</｜DSML｜parameter>\n";
  const std::string tail = "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  fails(head + param + tail, C, "EOS must follow");
  fails(head + param + tail + "x" + kEos, C, "EOS must follow");
  fails(head + param + param + tail + kEos, C, "duplicate parameter");
  fails(head + "<｜DSML｜parameter name=\"k\" string=\"maybe\">v</｜DSML｜parameter>\n" + tail + kEos, C, "parameter");
  fails(head + param + "junk" + tail + kEos, C, ">\\n");
  fails("\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke nam=\"f\">\n" + tail + kEos, C, "invoke tag");
  fails("\n\n<｜DSML｜tool_calls>x<｜DSML｜invoke name=\"f\">\n" + tail + kEos, C, ">\\n");
  fails(head + param + kEos, C, "not closed");
}

// Feeds `pieces` and accumulates every delta; finish() at the end. Checks the order of the
// call pieces: each call opens with its first piece (indices 0, 1, ...) and nothing follows
// its closing piece.
struct Stream {
  std::string reasoning, content;
  ToolCallJoiner calls;
  int n_opened = 0;
  bool open = false;
  bool truncated = false;
  std::string error;
  void add(const ChatDelta& d) {
    reasoning += d.reasoning;
    content += d.content;
    for (const ToolCallPiece& p : d.calls) {
      EXPECT_EQ(p.opens, !open) << "piece of call " << p.index;
      if (p.opens) n_opened++;
      EXPECT_EQ(p.index, n_opened - 1);
      open = !p.closes;
      calls.add(p);
    }
  }
};

// Released text is never taken back, so a partial marker released early would
// show in the accumulated fields: comparing them with the one-shot parse checks it.
Stream run(const std::vector<std::string>& pieces, bool in_reasoning) {
  ChatStreamParser parser(in_reasoning);
  Stream s;
  for (const std::string& piece : pieces) s.add(parser.feed(piece));
  s.add(parser.finish());
  s.truncated = parser.truncated();
  s.error = parser.error();
  return s;
}

void expect_same(const Stream& s, const ParsedMessage& m, const std::string& label) {
  EXPECT_EQ(s.reasoning, m.reasoning_content) << label;
  EXPECT_EQ(s.content, m.content) << label;
  ASSERT_EQ(s.calls.calls.size(), m.tool_calls.size()) << label;
  for (size_t k = 0; k < m.tool_calls.size(); ++k) {
    EXPECT_EQ(s.calls.calls[k].name, m.tool_calls[k].name) << label;
    EXPECT_EQ(s.calls.calls[k].arguments, m.tool_calls[k].arguments) << label;
  }
  EXPECT_FALSE(s.open) << label;
  EXPECT_FALSE(s.truncated) << label;
  EXPECT_EQ(s.error, "") << label;
}

// UTF-8 character boundaries of `text` (a decoded stream never splits a character).
std::vector<size_t> char_boundaries(const std::string& text) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) cuts.push_back(i);
  }
  return cuts;
}

struct Case {
  std::string text;
  ThinkingMode mode;
};

std::vector<Case> stream_cases() {
  return {
      {"Hello! How can I help you today?" + kEos, ThinkingMode::kChat},
      {"Simple again.</think>3 + 3 = 6." + kEos, ThinkingMode::kThinking},
      {kExample3Output, ThinkingMode::kThinking},
      {"a < b\n\n<not a call> </thin <｜end " + kEos, ThinkingMode::kChat},
      {"x\n\n</think>\n\ny\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"a\">\n\n</｜DSML｜invoke>\n"
       "<｜DSML｜invoke name=\"b\">\n<｜DSML｜parameter name=\"v\" string=\"true\"></｜DSML｜invoke>\"</｜DSML｜parameter>\n"
       "</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + kEos,
       ThinkingMode::kThinking},
  };
}

TEST(ChatStream, EverySplitPointMatchesOneShotParse) {
  for (const Case& c : stream_cases()) {
    ParsedMessage expected = parse_ok(c.text, c.mode);
    const bool in_reasoning = c.mode == ThinkingMode::kThinking;
    expect_same(run({c.text}, in_reasoning), expected, "whole");
    const std::vector<size_t> cuts = char_boundaries(c.text);
    for (size_t cut : cuts) {
      expect_same(run({c.text.substr(0, cut), c.text.substr(cut)}, in_reasoning), expected, "split at " + std::to_string(cut));
    }
    for (size_t a = 0; a < cuts.size(); a += 3) {  // pairs of cuts: three pieces
      for (size_t b = a + 1; b < cuts.size(); b += 5) {
        const size_t x = cuts[a], y = cuts[b];
        expect_same(run({c.text.substr(0, x), c.text.substr(x, y - x), c.text.substr(y)}, in_reasoning), expected,
                    "splits at " + std::to_string(x) + "," + std::to_string(y));
      }
    }
    // One character per piece.
    std::vector<std::string> chars;
    size_t prev = 0;
    for (size_t cut : cuts) {
      chars.push_back(c.text.substr(prev, cut - prev));
      prev = cut;
    }
    chars.push_back(c.text.substr(prev));
    expect_same(run(chars, in_reasoning), expected, "per character");
  }
}

// Strings with every escape, "<" inside values, a value ending in "<", non-string values,
// several calls: the concatenated fragments equal the one-shot arguments at any byte split
// (pieces split inside UTF-8 characters too) and in random chunks.
TEST(ChatStream, ArgumentFragmentsAtAnyByteSplit) {
  const std::string text =
      "Checking.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"search\">\n"
      "<｜DSML｜parameter name=\"q\" string=\"true\">a \"quoted\" \\ path\n\ttab \x01 é 世界 x<y <\n z<<</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"n\" string=\"false\">[1, {\"k\": \"v<\"}]<\n/｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"k\\\"ey\" string=\"true\"></｜DSML｜parameter>\n</｜DSML｜invoke>\n"
      "<｜DSML｜invoke name=\"b\">\n\n</｜DSML｜invoke>\n"
      "<｜DSML｜invoke name=\"c\">\n<｜DSML｜parameter name=\"x\" string=\"true\">/｜DSML｜</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + kEos;
  const ParsedMessage expected = parse_ok(text, ThinkingMode::kChat);
  ASSERT_EQ(expected.tool_calls.size(), 3u);
  EXPECT_EQ(expected.tool_calls[0].arguments,
            "{\"q\": \"a \\\"quoted\\\" \\\\ path\\n\\ttab \\u0001 é 世界 x<y <\\n z<<\", "
            "\"n\": [1, {\"k\": \"v<\"}], \"k\\\\\\\"ey\": \"\"}");
  EXPECT_EQ(expected.tool_calls[1].arguments, "{}");
  EXPECT_EQ(expected.tool_calls[2].arguments, "{\"x\": \"/｜DSML｜\"}");
  for (size_t cut = 1; cut < text.size(); ++cut)
    expect_same(run({text.substr(0, cut), text.substr(cut)}, false), expected, "split at " + std::to_string(cut));
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  expect_same(run(bytes, false), expected, "per byte");
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::string> chunks;
    for (size_t at = 0; at < text.size();) {
      const size_t n = std::uniform_int_distribution<size_t>(1, 12)(rng);
      chunks.push_back(text.substr(at, n));
      at += n;
    }
    expect_same(run(chunks, false), expected, "random chunks, trial " + std::to_string(trial));
  }
}

// Random call blocks written as text.md §3.8 renders them, with values made of the pieces
// that could confuse a scanner ("<", "/", "｜DSML｜", tags, escapes, split characters): the
// arguments equal §3.8's JSON built directly, in one piece and in random byte chunks.
TEST(ChatStream, RandomCallBlocksMatchTheRendering) {
  const std::vector<std::string> alphabet = {"a", "é", "世", "<", "/", "\n", "<\n", "\"", "\\", "\t", "\x01", " ",
                                             "｜DSML｜", "<｜DSML｜parameter", "</｜DSML｜invoke>", ">"};
  const std::vector<std::string> json_values = {"1", "-2.5", "null", "true", "[1, \"<\"]", "{\"k\": \"</\"}", "[]"};
  std::mt19937 rng(11);
  auto pick = [&rng](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    std::string text = "c\n\n<｜DSML｜tool_calls>\n";
    std::vector<ToolCall> want;
    const size_t n_calls = 1 + pick(3);
    for (size_t c = 0; c < n_calls; ++c) {
      ToolCall call{"f" + std::to_string(c), "{"};
      text += (c ? "\n" : "") + std::string("<｜DSML｜invoke name=\"") + call.name + "\">\n";
      const size_t n_params = pick(4);
      for (size_t k = 0; k < n_params; ++k) {
        const std::string key = "k" + std::to_string(k) + (pick(2) ? "\"<" : "");
        const bool is_string = pick(3) != 0;
        std::string value;
        if (is_string) {
          for (size_t n = pick(7); n > 0; --n) value += alphabet[pick(alphabet.size())];
        } else {
          value = json_values[pick(json_values.size())];
        }
        text += (k ? "\n" : "") + std::string("<｜DSML｜parameter name=\"") + key + "\" string=\"" +
                (is_string ? "true" : "false") + "\">" + value + "</｜DSML｜parameter>";
        call.arguments += (k ? ", " : "") + py_json_string(key) + ": " + (is_string ? py_json_string(value) : value);
      }
      call.arguments += "}";
      text += "\n</｜DSML｜invoke>";
      want.push_back(std::move(call));
    }
    text += "\n</｜DSML｜tool_calls>" + kEos;
    const ParsedMessage expected = parse_ok(text, ThinkingMode::kChat);
    ASSERT_EQ(expected.tool_calls.size(), want.size()) << text;
    for (size_t c = 0; c < want.size(); ++c) {
      EXPECT_EQ(expected.tool_calls[c].name, want[c].name) << text;
      EXPECT_EQ(expected.tool_calls[c].arguments, want[c].arguments) << text;
    }
    for (int split = 0; split < 10; ++split) {
      std::vector<std::string> chunks;
      for (size_t at = 0; at < text.size();) {
        const size_t n = 1 + pick(9);
        chunks.push_back(text.substr(at, n));
        at += n;
      }
      expect_same(run(chunks, false), expected, text);
    }
  }
}

// A call opens once its invoke tag is complete; each value streams as it arrives, less what
// may still end it.
TEST(ChatStream, PiecesFollowTheText) {
  ChatStreamParser parser(false);
  EXPECT_EQ(parser.feed("Hi\n").content, "Hi");
  EXPECT_TRUE(parser.feed("\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n").empty());
  ChatDelta d = parser.feed("<｜DSML｜parameter name=\"city\" string=\"true\">Par");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_TRUE(d.calls[0].opens);
  EXPECT_EQ(d.calls[0].index, 0);
  EXPECT_EQ(d.calls[0].name, "f");
  EXPECT_EQ(d.calls[0].arguments, "{\"city\": \"Par");
  EXPECT_EQ(d.content, "");
  d = parser.feed("is\"<");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_FALSE(d.calls[0].opens);
  EXPECT_EQ(d.calls[0].arguments, "is\\\"");  // the "<" may end the value: held
  d = parser.feed("/｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">1");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, "\", \"days\": 1");
  EXPECT_FALSE(d.calls[0].closes);
  d = parser.feed("2</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"g\">\n</｜DSML｜invoke>");
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[0].arguments, "2}");
  EXPECT_TRUE(d.calls[0].closes);
  EXPECT_TRUE(d.calls[1].opens && d.calls[1].closes);
  EXPECT_EQ(d.calls[1].index, 1);
  EXPECT_EQ(d.calls[1].arguments, "{}");
  EXPECT_FALSE(parser.done());
  EXPECT_TRUE(parser.feed("\n</｜DSML｜tool_calls>").empty());
  EXPECT_TRUE(parser.done());
  EXPECT_TRUE(parser.feed("ignored").empty());
}

// parallel_tool_calls false: the engine's text ends before kFirstCallStop; end_at_stop()
// completes the call and the block only where an invoke may end.
TEST(ChatStream, EndAtStopCompletesTheFirstCall) {
  const std::string head = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n";
  const std::string param = "<｜DSML｜parameter name=\"k\" string=\"true\">v</｜DSML｜parameter>\n";
  for (const std::string& body : {head, head + param}) {
    ChatStreamParser parser(false);
    Stream s;
    s.add(parser.feed(body));
    s.add(parser.end_at_stop());
    s.add(parser.finish());
    ASSERT_EQ(s.calls.calls.size(), 1u) << body;
    EXPECT_EQ(s.calls.calls[0].arguments, body == head ? "{}" : R"({"k": "v"})");
    EXPECT_TRUE(parser.done());
    EXPECT_FALSE(parser.truncated());
  }
  // Inside a value, or outside the call block: nothing added.
  ChatStreamParser in_value(false);
  in_value.feed(head + "<｜DSML｜parameter name=\"k\" string=\"true\">v");
  EXPECT_TRUE(in_value.end_at_stop().empty());
  in_value.finish();
  EXPECT_TRUE(in_value.truncated());
  ChatStreamParser content(false);
  EXPECT_EQ(content.feed("text").content, "text");
  EXPECT_TRUE(content.end_at_stop().empty());
}

TEST(ChatStream, Lenient) {
  // Cut off inside the calls: truncated; cut off in reasoning: held text is flushed.
  Stream cut = run({"r</think>c\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜para"}, true);
  EXPECT_EQ(cut.content, "c");
  EXPECT_TRUE(cut.truncated);
  Stream thinking = run({"still thinking </thi"}, true);
  EXPECT_EQ(thinking.reasoning, "still thinking </thi");
  Stream held = run({"answer\n\n<｜DSML"}, false);
  EXPECT_EQ(held.content, "answer\n\n<｜DSML");
  // Calls straight from reasoning: reasoning ended, no content.
  Stream direct = run({"r\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"}, true);
  EXPECT_EQ(direct.reasoning, "r");
  ASSERT_EQ(direct.calls.calls.size(), 1u);
  EXPECT_FALSE(direct.truncated);
  // A malformed call: earlier calls kept, error named, the rest dropped.
  Stream bad = run({"\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\nXX<｜DSML｜invoke name=\"g\">\n"
                    "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"},
                   false);
  EXPECT_EQ(bad.calls.calls.size(), 1u);
  EXPECT_NE(bad.error.find(">\\n"), std::string::npos);
  // EOS text ends the stream; later text is ignored.
  Stream eos = run({"done" + kEos + "more"}, false);
  EXPECT_EQ(eos.content, "done");
}

}  // namespace
}  // namespace dsv4::chat
