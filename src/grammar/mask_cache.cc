#include "grammar/mask_cache.h"

#include <algorithm>
#include <bit>

#include "base/check.h"

namespace dsv4::grammar {

MaskCache::MaskCache(int64_t words, int64_t max_bytes) : words_(std::max<int64_t>(words, 1)) {
  capacity_ = std::clamp<int64_t>(max_bytes / (words_ * static_cast<int64_t>(sizeof(uint64_t))), 0, kMaxEntries);
  entries_.reserve(static_cast<size_t>(capacity_));
  table_.assign(std::bit_ceil(static_cast<size_t>(2 * capacity_ + 1)), -1);
}

size_t MaskCache::slot_of(const StringMaskKey& key, uint64_t hash) const {
  const size_t mask = table_.size() - 1;
  for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
    const int32_t e = table_[slot];
    if (e < 0 || (entries_[e].hash == hash && entries_[e].key == key)) return slot;
  }
}

// Backward-shift deletion: the entries after the slot move up where their probe allows.
void MaskCache::erase_slot(size_t slot) {
  const size_t mask = table_.size() - 1;
  table_[slot] = -1;
  for (size_t next = (slot + 1) & mask; table_[next] >= 0; next = (next + 1) & mask) {
    const size_t home = entries_[table_[next]].hash & mask;
    // next may move to slot when its home is not in (slot, next] (cyclically)
    const bool stays = slot <= next ? (slot < home && home <= next) : (slot < home || home <= next);
    if (stays) continue;
    table_[slot] = table_[next];
    table_[next] = -1;
    slot = next;
  }
}

void MaskCache::unlink(int32_t e) {
  Entry& x = entries_[e];
  (x.newer >= 0 ? entries_[x.newer].older : newest_) = x.older;
  (x.older >= 0 ? entries_[x.older].newer : oldest_) = x.newer;
  x.newer = x.older = -1;
}

void MaskCache::push_newest(int32_t e) {
  entries_[e].older = newest_;
  entries_[e].newer = -1;
  (newest_ >= 0 ? entries_[newest_].newer : oldest_) = e;
  newest_ = e;
}

const uint64_t* MaskCache::find(const StringMaskKey& key) {
  const int32_t e = table_[slot_of(key, key.hash())];
  if (e < 0) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  if (e != newest_) {
    unlink(e);
    push_newest(e);
  }
  return entries_[e].bits.data();
}

uint64_t* MaskCache::insert(const StringMaskKey& key, std::shared_ptr<const void> pin) {
  const uint64_t hash = key.hash();
  DSV4_CHECK(capacity_ > 0, "mask cache: no room (max_bytes below one mask)");
  DSV4_CHECK(table_[slot_of(key, hash)] < 0, "mask cache: the key is already stored");
  int32_t e = 0;
  if (size() < capacity_) {
    e = static_cast<int32_t>(entries_.size());
    entries_.emplace_back();
    entries_.back().bits.resize(static_cast<size_t>(words_));
  } else {  // the least recent goes
    e = oldest_;
    erase_slot(slot_of(entries_[e].key, entries_[e].hash));
    unlink(e);
  }
  Entry& x = entries_[e];
  x.key = key;
  x.hash = hash;
  x.pin = std::move(pin);
  table_[slot_of(key, hash)] = e;
  push_newest(e);
  return x.bits.data();
}

}  // namespace dsv4::grammar
