#include "cache/prefix_cache.h"

#include <algorithm>

#include "base/check.h"

namespace dsv4 {
namespace {

// 64-bit mixing (splitmix64 finalizer).
uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

// The root's seed: its rank and namespace.
uint64_t root_key(int32_t rank, std::string_view salt) {
  uint64_t h = mix(0x5ca1ab1eull, static_cast<uint64_t>(rank));
  h = mix(h, salt.size());
  for (unsigned char c : salt) h = mix(h, c);
  return h;
}

}  // namespace

PrefixCache::PrefixCache(int32_t block_tokens, int32_t capacity) : P_(block_tokens), entries_(capacity) {
  DSV4_CHECK(block_tokens > 0 && capacity >= 0);
  for (int32_t i = capacity - 1; i >= 0; --i) free_.push_back(i);
}

uint64_t PrefixCache::key_of(int32_t parent, const int32_t* tokens, int32_t wc, std::string_view salt) const {
  uint64_t h = mix(parent < 0 ? root_key(rank_of_root(parent), salt) : entries_[parent].key, static_cast<uint64_t>(wc));
  for (int32_t i = 0; i < P_; ++i) h = mix(h, static_cast<uint32_t>(tokens[i]));
  return h;
}

int32_t PrefixCache::find(int32_t parent, const int32_t* tokens, int32_t wc, std::string_view salt) const {
  const auto it = by_key_.find(key_of(parent, tokens, wc, salt));
  if (it == by_key_.end()) return -1;
  for (int32_t id : it->second) {
    const Entry& e = entries_[id];
    if (e.parent == parent && e.wc == wc && (parent >= 0 || e.salt == salt) &&
        std::equal(e.tokens.begin(), e.tokens.end(), tokens))
      return id;
  }
  return -1;
}

int64_t PrefixCache::cached_blocks(int32_t root, const int32_t* tokens, int64_t n, int32_t wc, bool need_mtp,
                                   std::string_view salt) const {
  DSV4_CHECK(root < 0);
  int64_t b = 0;
  for (int32_t parent = root; (b + 1) * P_ <= n; ++b) {
    const int32_t id = find(parent, tokens + b * P_, wc, salt);
    if (id < 0 || (need_mtp && !entries_[id].mtp)) break;
    parent = id;
  }
  return b;
}

std::vector<int32_t> PrefixCache::match(int32_t root, const int32_t* tokens, int64_t n, int32_t wc, bool need_mtp,
                                        std::string_view salt) {
  std::vector<int32_t> chain;
  const int64_t blocks = cached_blocks(root, tokens, n, wc, need_mtp, salt);
  for (int32_t b = 0, parent = root; b < blocks; ++b) {
    parent = find(parent, tokens + b * P_, wc, salt);
    chain.push_back(parent);
  }
  ++clock_;
  for (int32_t id : chain) entries_[id].last_use = clock_;
  return chain;
}

int32_t PrefixCache::insert(int32_t parent, const int32_t* tokens, int32_t wc, int32_t page, bool mtp,
                            std::string_view salt) {
  DSV4_CHECK(!free_.empty() && (parent < 0 || entries_[parent].live));
  const int32_t id = free_.back();
  free_.pop_back();
  Entry& e = entries_[id];
  e.key = key_of(parent, tokens, wc, salt);
  e.salt.assign(parent < 0 ? salt : std::string_view());
  e.parent = parent;
  e.wc = wc;
  e.page = page;
  e.mtp = mtp;
  e.children = 0;
  e.holders = 0;
  e.last_use = ++clock_;
  e.live = true;
  e.tokens.assign(tokens, tokens + P_);
  if (parent >= 0) ++entries_[parent].children;
  by_key_[e.key].push_back(id);
  ++size_;
  return id;
}

void PrefixCache::hold(int32_t id) {
  DSV4_CHECK(entries_[id].live);
  ++entries_[id].holders;
}

void PrefixCache::release(int32_t id) {
  DSV4_CHECK(entries_[id].live && entries_[id].holders > 0);
  --entries_[id].holders;
}

int32_t PrefixCache::evictable_count(const std::function<bool(int32_t page)>& evictable) const {
  // An entry that cannot go keeps all its ancestors too.
  std::vector<uint8_t> kept(entries_.size(), 0);
  for (int32_t id = 0; id < capacity(); ++id) {
    const Entry& e = entries_[id];
    if (!e.live || (e.holders == 0 && evictable(e.page))) continue;
    for (int32_t a = id; a >= 0 && !kept[a]; a = entries_[a].parent) kept[a] = 1;
  }
  int32_t n = 0;
  for (int32_t id = 0; id < capacity(); ++id) n += entries_[id].live && !kept[id];
  return n;
}

std::optional<PrefixCache::Entry> PrefixCache::evict(const std::function<bool(int32_t page)>& evictable) {
  int32_t best = -1;
  for (int32_t id = 0; id < capacity(); ++id) {
    const Entry& e = entries_[id];
    if (!e.live || e.children > 0 || e.holders > 0 || !evictable(e.page)) continue;
    if (best < 0 || e.last_use < entries_[best].last_use) best = id;
  }
  if (best < 0) return std::nullopt;
  Entry out = entries_[best];
  Entry& e = entries_[best];
  auto& ids = by_key_[e.key];
  ids.erase(std::find(ids.begin(), ids.end(), best));
  if (ids.empty()) by_key_.erase(e.key);
  if (e.parent >= 0) --entries_[e.parent].children;
  e.live = false;
  e.tokens.clear();
  e.salt.clear();
  free_.push_back(best);
  --size_;
  return out;
}

}  // namespace dsv4
