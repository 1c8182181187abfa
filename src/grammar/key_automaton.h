// KeyAutomaton: the keys an open object may take under patternProperties and propertyNames
// (schema_keys.h), for the matcher's key frames (json_matcher.h).
//
// Construction: the code point range is cut at every bound of every automaton's classes and of
// key text; the pieces with the same class in every automaton form one class. Breadth-first over
// tuples of states from the starts (at most kMaxKeyStates). Per label L, the states with
// infinitely many continuations to L: those that reach L's states, less those from which every
// path leaves that set (pruned backwards until none is left without a successor).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "grammar/regex.h"

namespace dsv4::grammar {

constexpr int32_t kMaxKeyStates = 4096;              // states of one key automaton
constexpr int64_t kMaxKeyWork = int64_t{1} << 24;    // (states x classes) x (labels + 1) building one
constexpr int kMaxKeyLabels = 64;                    // distinct sets of matching patterns
constexpr int kMaxKeyClasses = 4096;                 // code point classes of one key automaton (int16)

// The keys of an open object under patternProperties/propertyNames: a DFA over code points, the
// product of the patterns' automata and propertyNames', whose accepting states carry a label (the
// set of patterns the key matches, which decides the value's schema). Keys are JSON text without
// escapes, as open objects generate them: code points from U+0020 but '"', backslash, surrogates.
//
// No dead end: a key byte is taken only into a state from which infinitely many keys of some
// label (whose value fits the matcher's depth) continue, so a finite set of keys already present
// never blocks every way on; the key may close where its label allows it.
struct KeyAutomaton {
  int32_t start = -1;  // -1: no key at all
  int32_t n_states = 0, n_classes = 0;
  std::array<int16_t, 128> ascii_class{};  // -1: not key text
  std::vector<uint32_t> interval_start;    // sorted; interval i = [start[i], start[i + 1])
  std::vector<int16_t> interval_class;     // -1: not key text
  std::vector<int32_t> next;               // [state, class] -> state, -1: dead
  std::vector<int16_t> label;              // [state]: the key's label here, -1: not an allowed key
  std::vector<uint64_t> infinite;          // [state]: bit L, infinitely many keys of label L continue
  std::vector<uint8_t> loops;              // [state]: every key text code point leads back to it
  std::vector<uint64_t> label_patterns;    // [label]: bit i, patterns[i] matches
  std::vector<int32_t> label_value;        // [label]: the value's grammar node (the compiler fills it)

  int32_t class_of(uint32_t cp) const;
  int32_t step(int32_t state, uint32_t cp) const {
    const int32_t c = class_of(cp);
    return c < 0 ? -1 : next[static_cast<size_t>(state) * n_classes + c];
  }
  // Whether some code point in [lo, hi] steps from state into one with a bit of `labels` in infinite.
  bool steps_within(int32_t state, uint32_t lo, uint32_t hi, uint64_t labels) const;
};

// Where no state from the start has infinitely many keys on (KeyAutomaton::infinite is 0 there),
// the language is finite: its first `max` keys (UTF-8) in code point order, depth first.
std::vector<std::string> finite_keys(const KeyAutomaton& k, size_t max);

// The automaton of the patterns and propertyNames' automaton (`names`, nullptr: any key);
// `allowed(mask)`: whether a key matching
// exactly the patterns of mask may be present (additionalProperties false, a schema false).
// Errors name the keyword, the path and the bound.
Result<KeyAutomaton> build_key_automaton(const std::vector<const Regex*>& patterns, const Regex* names,
                                         const std::function<bool(uint64_t)>& allowed, const std::string& path);

}  // namespace dsv4::grammar
