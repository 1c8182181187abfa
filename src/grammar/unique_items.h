// uniqueItems over items the matcher keeps as 32-bit FNV-1a hashes of their JSON text
// (Node::unique_hashed; json_matcher.h): the text of each kind is a function of the value, so
// equal hashes are the only way two items can be equal.
//  - strings: without escapes (their bytes are the value); with a pattern or format, printable
//    ASCII without '"' and '\' (U+0020-U+007E less those two: one byte per code point);
//  - integers (unbounded, or a range of more than kMaxUniqueValues; numbers with integral bounds
//    and step too): canonical text (no leading zero, never -0, no fraction or exponent);
//  - enum values (more than kMaxUniqueValues): their compact texts, whose hashes differ
//    (checked at compile time);
//  - objects (listed, holding no other hashed array of objects): one required property's value of a kind
//    above (Node::unique_key); objects whose values there differ are distinct (a subset).
// Dead ends: a patterned item takes a character only where some accepting continuation from the
// new regex state is not among the array's items: UniqueStrings counts each state's
// continuations over that alphabet (saturating) and lists them where fewer than the items an
// array may hold; integers and enum values the same by counting digits and values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/json_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace dsv4::grammar {

constexpr uint32_t kUniqueHashBasis = 2166136261u, kUniqueHashPrime = 16777619u;  // FNV-1a (as open keys)

inline uint32_t unique_hash_byte(uint32_t h, uint8_t c) { return (h ^ c) * kUniqueHashPrime; }
uint32_t unique_hash_text(uint32_t h, const std::string& text);

// The characters a patterned item is generated with: printable ASCII except '"' and '\'.
inline bool unique_text_char(uint32_t c) { return c >= 0x20 && c <= 0x7E && c != '"' && c != '\\'; }

// Continuations of each state of a regex over unique_text_char's alphabet.
struct UniqueStrings {
  static constexpr int32_t kMany = kMaxUniqueStrings + 1;  // counts saturate here (infinite too)
  std::vector<int32_t> count;                          // [n_states] accepting continuations, <= kMany
  std::vector<std::vector<std::string>> completions;  // [n_states] the continuations where count < kMany
  int64_t shortest = -1;  // the shortest string matched from the start; −1: none
  int64_t longest = -1;   // the longest; −1: unbounded (or none)
};

// The table of re (states x 93 characters of work).
UniqueStrings unique_strings(const Regex& re);

// The frame of the uniqueItems array whose set the value on top of s joins (Node::unique_hashed:
// an item, or with Node::unique_key that property's value in an item); −1: none.
int32_t hashed_array_frame(const Grammar& g, const MatchStack& s);

// Whether a value of `node` may hold a uniqueItems array of objects kept as hashes
// (Node::unique_key), or a node not yet compiled (a $ref hop still empty): then an item holding
// it could overflow MatchStack::keys (arrays of scalars in it are fine).
bool may_hold_hashed_array(const Grammar& g, int32_t node);

// Whether the texts' hashes (from kUniqueHashBasis) differ pairwise.
bool distinct_hashes(const std::vector<std::string>& texts);

// The values of an anyOf whose branches (behind $ref hops) are all literals (oneOf/anyOf of
// consts): the texts of every branch; empty when node is no such anyOf.
std::vector<std::string> literal_alternatives(const Grammar& g, int32_t node);

// The plain string branch (no pattern, format or maxLength) of an anyOf whose every branch
// ($ref hops followed) is a string it accepts (a string of no less minLength, an enum of strings
// of at least its minLength): the anyOf's values are that branch's. −1: node is no such anyOf.
int32_t subsuming_string(const Grammar& g, int32_t node);

// The values of r (fraction_digits 0, step > 0) whose canonical text begins with a prefix: its
// magnitude `mag` of `digits` digits (0: none yet, all of that sign but 0), negative or not
// (never -0); at most `limit` of them, stored in out unless nullptr. Returns how many
// (saturated at limit).
int64_t ranged_continuations(const NumberRange& r, bool negative, int64_t mag, int32_t digits, int64_t limit,
                             int64_t* out);
// The hash of an integer's canonical text.
uint32_t integer_hash(int64_t value);

// The values an integer prefix may still become, saturated at limit: digits is the prefix's
// digit count (zero: only the '-' so far), zero whether it is "0" (which takes no more digits).
int64_t integer_continuations(int32_t digits, bool zero, int64_t limit);

}  // namespace dsv4::grammar
