// Decision lists (model/decisions.h): JSON round trip, parse errors naming the entry and the
// field, DecisionTable checks against the model (each error names the entry and the rule),
// lookup by key; the DSpark drafter's entries (dspark.md §3.10).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "model/config.h"
#include "model/decisions.h"

namespace dsv4 {
namespace {

ModelConfig tiny() { return preset_config("tiny", true).value(); }  // CSA layers 1, 3; hash 0, 1

::testing::AssertionResult has(const Status& st, const std::string& part) {
  if (!st.ok() && st.message().find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << st.message() << "' lacks '" << part << "'";
}

Status create(std::vector<Decision> d) { return DecisionTable::create(tiny(), std::move(d)).status(); }

TEST(Decisions, JsonRoundTripIgnoresOtherFields) {
  const std::vector<Decision> d = {{false, false, 2, 0, 5, {3, 1}}, {false, true, 1, 0, 7, {1, 0}},
                                   {true, false, 0, 0, 4, {7, 2}}};
  auto back = decisions_from_json(decisions_to_json(d));
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(decisions_to_json(*back), decisions_to_json(d));
  auto extra = decisions_from_json(
      R"({"decisions": [{"block": "main", "kind": "idx", "layer": 3, "pos": 11, "selected": [2, 0, 1], "margin": 0.5}]})");
  ASSERT_TRUE(extra.ok()) << extra.message();
  ASSERT_EQ(extra->size(), 1u);
  EXPECT_EQ((*extra)[0].selected, (std::vector<int32_t>{2, 0, 1}));
  EXPECT_TRUE((*extra)[0].idx);
  EXPECT_EQ((*extra)[0].pos, 11);
}

TEST(Decisions, ParseErrorsNameTheEntryAndField) {
  auto err = [](const char* text) { return decisions_from_json(text).status(); };
  EXPECT_TRUE(has(err("{"), "not valid JSON"));
  EXPECT_TRUE(has(err(R"({"other": []})"), "array \"decisions\""));
  EXPECT_TRUE(has(err(R"({"decisions": [3]})"), "decisions[0]: not an object"));
  const char* ok = R"({"block": "main", "kind": "moe", "layer": 0, "pos": 0, "selected": [1, 2]})";
  EXPECT_TRUE(decisions_from_json(std::string(R"({"decisions": [)") + ok + "]}").ok());
  // One malformed entry each: the field it gets wrong -> the message part.
  const std::pair<const char*, const char*> entries[] = {
      {R"("block": "main", "kind": "moe", "layer": 0, "selected": [1])", "decisions[0]: missing field \"pos\""},
      {R"("block": "side", "kind": "moe", "layer": 0, "pos": 0, "selected": [])", "\"block\" must be"},
      {R"("block": "mtp", "kind": "x", "layer": 0, "pos": 0, "selected": [])", "\"kind\" must be"},
      {R"("block": "mtp", "kind": "moe", "layer": -1, "pos": 0, "selected": [])", "\"layer\""},
      {R"("block": "mtp", "kind": "moe", "layer": 0, "pos": -3, "selected": [])", "\"pos\""},
      {R"("block": "mtp", "kind": "moe", "layer": 0, "pos": 0, "selected": 4)", "\"selected\" must be an array"},
      {R"("block": "mtp", "kind": "moe", "layer": 0, "pos": 0, "selected": [1.5])", "\"selected\"[0]"},
      {R"("block": "mtp", "kind": "moe", "layer": 0, "pos": 0, "selected": [9999999999])", "\"selected\"[0]"},
  };
  for (const auto& [entry, part] : entries)
    EXPECT_TRUE(has(err((std::string(R"({"decisions": [{)") + entry + "}]}").c_str()), part)) << entry;
}

TEST(Decisions, TableChecksEveryEntryAgainstTheModel) {
  EXPECT_TRUE(create({{false, false, 2, 0, 5, {3, 1}}, {false, true, 1, 0, 7, {1, 0}}, {true, false, 0, 0, 4, {7, 2}}})
                  .ok());
  EXPECT_TRUE(has(create({{false, false, 4, 0, 5, {3, 1}}}), "layer 4 outside [0, 4) of block main"));
  EXPECT_TRUE(has(create({{true, false, 1, 0, 5, {3, 1}}}), "layer 1 outside [0, 1) of block mtp"));
  EXPECT_TRUE(has(create({{false, false, 2, 0, 5, {3}}}), "1 ids selected, num_experts_per_tok = 2"));
  EXPECT_TRUE(has(create({{false, false, 2, 0, 5, {3, 8}}}), "selected[1] = 8 outside [0, 8)"));
  EXPECT_TRUE(has(create({{false, false, 2, 0, 5, {3, 3}}}), "selected[1] = 3 repeats selected[0]"));
  EXPECT_TRUE(create({{false, false, 0, 0, 5, {3, 3}}}).ok()) << "a hash layer's table row may repeat an id";
  EXPECT_TRUE(has(create({{false, true, 2, 0, 9, {0, 1}}}), "kind idx needs a CSA layer"));
  EXPECT_TRUE(has(create({{true, true, 0, 0, 9, {0, 1}}}), "kind idx needs a CSA layer"));
  // pos 9: (9 + 1) / 4 = 2 entries visible, index_topk 4.
  EXPECT_TRUE(has(create({{false, true, 1, 0, 9, {0}}}), "1 ids selected, the indexer picks min(index_topk = 4, (pos + 1) / 4 = 2) = 2"));
  EXPECT_TRUE(has(create({{false, true, 1, 0, 9, {0, 2}}}), "selected[1] = 2 outside [0, 2)"));
  EXPECT_TRUE(has(create({{false, true, 1, 0, 9, {1, 1}}}), "repeats"));
  EXPECT_TRUE(create({{false, true, 1, 0, 2, {}}}).ok()) << "no entry visible yet: an empty pick list";
  // Errors name the entry.
  EXPECT_TRUE(has(create({{false, false, 2, 0, 5, {3, 1}}, {false, false, 7, 0, 6, {3, 1}}}),
                  "decisions[1] (block main, kind moe, layer 7, pos 6)"));
  EXPECT_TRUE(has(create({{false, false, 2, 0, 5, {3, 1}}, {false, false, 2, 0, 5, {4, 1}}}),
                  "the same key as decisions[0]"));
}

TEST(Decisions, FindByKey) {
  auto t = DecisionTable::create(tiny(), {{false, false, 2, 3, 5, {3, 1}}, {false, true, 1, 0, 7, {1, 0}},
                                          {true, false, 0, 3, 5, {6, 2}}, {false, false, 2, 0, 5, {4, 0}}});
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->size(), 4u);
  ASSERT_NE(t->find(false, false, 2, 3, 5), nullptr);
  EXPECT_EQ(t->find(false, false, 2, 3, 5)->selected, (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(t->find(false, false, 2, 0, 5)->selected, (std::vector<int32_t>{4, 0}));
  EXPECT_EQ(t->find(true, false, 0, 3, 5)->selected, (std::vector<int32_t>{6, 2}));
  EXPECT_EQ(t->find(false, true, 1, 0, 7)->selected, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(t->find(false, false, 1, 0, 7), nullptr);  // other kind
  EXPECT_EQ(t->find(false, false, 2, 1, 5), nullptr);  // other sequence
  EXPECT_EQ(t->find(false, false, 2, 3, 6), nullptr);  // other position
  EXPECT_TRUE(DecisionTable().empty());
}

}  // namespace
}  // namespace dsv4

namespace dsv4 {
namespace {

// dspark.md §3.10: block dspark, kind moe keyed by (stage, anchor, row), kind draft by
// (anchor, row); JSON round trip, parse errors, table checks, lookup.
TEST(Decisions, DsparkEntries) {
  const ModelConfig ds = preset_config("tiny-ds", true).value();
  Decision moe{false, false, 2, 0, 7, {0, 4}, true, false, 3};
  Decision draft{false, false, 0, 0, 7, {311}, true, true, 1};
  const std::string text = decisions_to_json({moe, draft});
  EXPECT_NE(text.find(R"("block": "dspark", "kind": "moe", "stage": 2, "anchor": 7, "row": 3, "selected": [0, 4])"),
            std::string::npos) << text;
  EXPECT_NE(text.find(R"("block": "dspark", "kind": "draft", "anchor": 7, "row": 1, "selected": [311])"),
            std::string::npos) << text;
  auto back = decisions_from_json(text);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(decisions_to_json(*back), text);
  // Parse errors name the field.
  auto err = [](const char* entry) {
    return decisions_from_json(std::string(R"({"decisions": [{)") + entry + "}]}").status();
  };
  EXPECT_TRUE(has(err(R"("block": "dspark", "kind": "moe", "anchor": 7, "row": 0, "selected": [1, 2])"),
                  "missing field \"stage\""));
  EXPECT_TRUE(has(err(R"("block": "dspark", "kind": "draft", "anchor": 7, "selected": [1])"), "missing field \"row\""));
  EXPECT_TRUE(has(err(R"("block": "dspark", "kind": "idx", "anchor": 7, "row": 0, "selected": [1])"),
                  "\"kind\" of block dspark"));
  EXPECT_TRUE(has(err(R"("block": "dspark", "kind": "draft", "anchor": -1, "row": 0, "selected": [1])"), "\"anchor\""));
  // Table checks against the model.
  auto create_ds = [&](std::vector<Decision> d) { return DecisionTable::create(ds, std::move(d)).status(); };
  EXPECT_TRUE(create_ds({moe, draft}).ok());
  Decision bad = moe;
  bad.layer = 3;
  EXPECT_TRUE(has(create_ds({bad}), "stage 3 outside [0, 3)"));
  bad = draft;
  bad.selected = {1, 2};
  EXPECT_TRUE(has(create_ds({bad}), "a draft is one token"));
  bad.selected = {512};
  EXPECT_TRUE(has(create_ds({bad}), "outside [0, 512)"));
  EXPECT_TRUE(has(create({moe}), "no DSpark drafter"));
  // Lookup: the anchor is part of the key.
  Decision other = moe;
  other.pos = 8;
  other.selected = {5, 6};
  auto t = DecisionTable::create(ds, {moe, draft, other});
  ASSERT_TRUE(t.ok()) << t.message();
  ASSERT_NE(t->find_dspark(false, 2, 0, 7, 3), nullptr);
  EXPECT_EQ(t->find_dspark(false, 2, 0, 8, 3)->selected, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(t->find_dspark(true, 0, 0, 7, 1)->selected, (std::vector<int32_t>{311}));
  EXPECT_EQ(t->find_dspark(true, 0, 0, 7, 3), nullptr);
  EXPECT_EQ(t->find_dspark(false, 1, 0, 7, 3), nullptr);
  EXPECT_EQ(t->find(false, false, 2, 0, 7), nullptr);  // not a main-block key
}

}  // namespace
}  // namespace dsv4
