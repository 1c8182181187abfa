// Index of cached prompt blocks (runtime.md §7.1): block b of a prompt covers positions
// [b·P, (b+1)·P), P = page_tokens. Its key chains the previous block's entry, the
// prompt-row window Wc = min(prompt_len, W) (prompt rows depend on it at Level A,
// model.md §0.4.7) and the block's P token ids; a lookup compares all three, so a hash
// collision is a miss, never a wrong hit. An entry names the physical compressed-cache
// page of its block (the owner keeps one reference on it while the entry lives) and its
// slot, which the owner uses for the window-KV rows a hit needs (the cache stores no data).
//
// Entries are evicted least recently used first, leaves before their parents (a chain
// stays walkable), never while a sequence holds them as the parent of its next block, and
// only when the owner says the page is held by nobody else.
//
// Roots: with ranks a cached block's rows live on the rank that computed it, so every chain
// starts at its rank's root (root(rank), a negative parent id): a lookup from one rank's root
// never meets another rank's blocks. One rank: root(0) = -1.
//
// Salts (tenant isolation): a chain also starts in a namespace, the request's cache salt
// ("" the shared one). Block 0's key mixes the salt in and its entry keeps the salt, which a
// lookup compares like the tokens; every later block chains its parent's entry. So chains of
// different salts share no entry, and a salt collision of the hash is a miss too.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dsv4 {

class PrefixCache {
 public:
  struct Entry {
    uint64_t key = 0;
    int32_t parent = -1;   // entry of the previous block (block 0: its rank's root, < 0)
    int32_t wc = 0;        // Wc of the prompt that computed it
    int32_t page = -1;     // compressed-cache page of the block
    bool mtp = false;      // the owner stored the MTP layer's rows too
    int32_t children = 0;  // live entries whose parent this is
    int32_t holders = 0;   // sequences that will chain their next block onto this entry
    int64_t last_use = 0;
    bool live = false;
    std::vector<int32_t> tokens;  // [P]
    std::string salt;             // block 0: its chain's namespace ("" for later blocks)
  };

  PrefixCache(int32_t block_tokens, int32_t capacity);

  static constexpr int32_t root(int32_t rank) { return -1 - rank; }
  static constexpr int32_t rank_of_root(int32_t parent) { return -1 - parent; }

  int32_t block_tokens() const { return P_; }
  int32_t capacity() const { return static_cast<int32_t>(entries_.size()); }
  int32_t size() const { return size_; }
  bool full() const { return free_.empty(); }
  const Entry& entry(int32_t id) const { return entries_[id]; }

  // Entry of the block after `parent` (a root: the first block, in namespace `salt`) with these
  // P tokens and wc, or -1. The salt counts at a root only.
  int32_t find(int32_t parent, const int32_t* tokens, int32_t wc, std::string_view salt) const;
  // The longest chain of entries (block 0, 1, …) from `root` in namespace `salt` whose blocks
  // lie inside tokens [0, n) under wc, with mtp rows when need_mtp; match marks them used,
  // cached_blocks only counts them.
  std::vector<int32_t> match(int32_t root, const int32_t* tokens, int64_t n, int32_t wc, bool need_mtp,
                             std::string_view salt);
  int64_t cached_blocks(int32_t root, const int32_t* tokens, int64_t n, int32_t wc, bool need_mtp,
                        std::string_view salt) const;
  // A new entry (the caller checked find() == -1 and !full()); returns its id.
  int32_t insert(int32_t parent, const int32_t* tokens, int32_t wc, int32_t page, bool mtp, std::string_view salt);
  // A sequence chains its next block onto `id` (hold) or no longer (release); a held entry
  // is never evicted, so a later insert under it always finds it.
  void hold(int32_t id);
  void release(int32_t id);
  void touch(int32_t id) { entries_[id].last_use = ++clock_; }
  // Removes the least recently used unheld leaf whose page `evictable` accepts; returns it.
  std::optional<Entry> evict(const std::function<bool(int32_t page)>& evictable);
  // Entries that repeated evict() calls would remove (unheld, evictable, and with every
  // descendant so too).
  int32_t evictable_count(const std::function<bool(int32_t page)>& evictable) const;

 private:
  uint64_t key_of(int32_t parent, const int32_t* tokens, int32_t wc, std::string_view salt) const;

  int32_t P_;
  std::vector<Entry> entries_;
  std::vector<int32_t> free_;
  std::unordered_map<uint64_t, std::vector<int32_t>> by_key_;
  int64_t clock_ = 0;
  int32_t size_ = 0;
};

}  // namespace dsv4
