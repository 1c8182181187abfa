// OrderedJson: nlohmann::basic_json whose objects keep their keys in insertion order (tool
// schemas and rendered arguments keep the order the client wrote) and find a key in O(1)
// expected. nlohmann::ordered_json finds and inserts by linear search, so parsing an object of
// n keys costs n^2/2 key comparisons (80,000 keys: 3.2e9). IndexedMap is its drop-in with a
// KeyIndex beside the entries. Duplicate keys keep the first position and take the last value.
#pragma once

#include <compare>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/key_index.h"

namespace dsv4 {

template <class Key, class T, class IgnoredLess = std::less<Key>,
          class Allocator = std::allocator<std::pair<const Key, T>>>
class IndexedMap {
 public:
  using Container = std::vector<std::pair<const Key, T>, Allocator>;
  using key_type = Key;
  using mapped_type = T;
  using value_type = typename Container::value_type;
  using allocator_type = Allocator;
  using size_type = typename Container::size_type;
  using difference_type = typename Container::difference_type;
  using reference = value_type&;
  using const_reference = const value_type&;
  using iterator = typename Container::iterator;
  using const_iterator = typename Container::const_iterator;
  using key_compare = std::equal_to<>;  // transparent: basic_json finds by string_view

  IndexedMap() = default;
  explicit IndexedMap(const Allocator& alloc) : items_(alloc) {}
  template <class It>
  IndexedMap(It first, It last, const Allocator& alloc = Allocator()) : items_(alloc) {
    insert(first, last);
  }
  IndexedMap(std::initializer_list<value_type> init, const Allocator& alloc = Allocator()) : items_(alloc) {
    insert(init.begin(), init.end());
  }

  iterator begin() noexcept { return items_.begin(); }
  iterator end() noexcept { return items_.end(); }
  const_iterator begin() const noexcept { return items_.begin(); }
  const_iterator end() const noexcept { return items_.end(); }
  const_iterator cbegin() const noexcept { return items_.cbegin(); }
  const_iterator cend() const noexcept { return items_.cend(); }
  size_type size() const noexcept { return items_.size(); }
  bool empty() const noexcept { return items_.empty(); }
  size_type max_size() const noexcept { return items_.max_size(); }
  void clear() noexcept {
    items_.clear();
    index_.clear();
  }

  template <class K>
  iterator find(const K& key) {
    const size_t at = position(key);
    return at == KeyIndex::kNotFound ? items_.end() : items_.begin() + static_cast<difference_type>(at);
  }
  template <class K>
  const_iterator find(const K& key) const {
    const size_t at = position(key);
    return at == KeyIndex::kNotFound ? items_.end() : items_.begin() + static_cast<difference_type>(at);
  }
  template <class K>
  size_type count(const K& key) const {
    return position(key) == KeyIndex::kNotFound ? 0 : 1;
  }

  template <class K>
  std::pair<iterator, bool> emplace(K&& key, T&& value) {
    const size_t at = position(key);
    if (at != KeyIndex::kNotFound) return {items_.begin() + static_cast<difference_type>(at), false};
    items_.emplace_back(std::forward<K>(key), std::move(value));
    index_.appended(items_.size(), key_at());
    return {std::prev(items_.end()), true};
  }
  std::pair<iterator, bool> insert(const value_type& item) {
    T copy = item.second;
    return emplace(item.first, std::move(copy));
  }
  std::pair<iterator, bool> insert(value_type&& item) { return emplace(item.first, std::move(item.second)); }
  template <class It>
  void insert(It first, It last) {
    for (; first != last; ++first) insert(*first);
  }

  template <class K>
  T& operator[](K&& key) {
    return emplace(std::forward<K>(key), T{}).first->second;
  }
  template <class K>
  const T& operator[](const K& key) const {
    return at(key);
  }
  template <class K>
  T& at(const K& key) {
    const auto it = find(key);
    if (it == end()) throw std::out_of_range("key not found");
    return it->second;
  }
  template <class K>
  const T& at(const K& key) const {
    const auto it = find(key);
    if (it == end()) throw std::out_of_range("key not found");
    return it->second;
  }

  // Erasing shifts the later entries (their keys are const: rebuilt in place) and re-indexes:
  // O(n), as nlohmann::ordered_map's.
  template <class K, std::enable_if_t<!std::is_convertible_v<K, const_iterator>, int> = 0>
  size_type erase(const K& key) {
    const auto it = find(key);
    if (it == end()) return 0;
    erase(it);
    return 1;
  }
  iterator erase(const_iterator pos) { return erase(pos, std::next(pos)); }
  iterator erase(const_iterator first, const_iterator last) {
    const auto offset = first - items_.cbegin();
    const auto removed = last - first;
    if (removed == 0) return items_.begin() + offset;
    auto to = items_.begin() + offset;
    for (auto from = to + removed; from != items_.end(); ++from, ++to) {
      to->~value_type();
      new (&*to) value_type(std::move(*from));
    }
    items_.resize(items_.size() - static_cast<size_type>(removed));
    index_.rebuild(items_.size(), key_at());
    return items_.begin() + offset;
  }

  void swap(IndexedMap& other) noexcept {
    items_.swap(other.items_);
    std::swap(index_, other.index_);
  }

  // Key comparisons made finding keys so far (tests: building n keys costs O(n)).
  uint64_t key_comparisons() const { return index_.comparisons(); }

  friend bool operator==(const IndexedMap& a, const IndexedMap& b) { return a.items_ == b.items_; }
  friend auto operator<=>(const IndexedMap& a, const IndexedMap& b) { return a.items_ <=> b.items_; }

 private:
  auto key_at() const {
    return [this](size_t i) -> std::string_view { return items_[i].first; };
  }
  template <class K>
  size_t position(const K& key) const {
    return index_.find(std::string_view(key), items_.size(), key_at());
  }

  Container items_;
  KeyIndex index_;
};

using OrderedJson = nlohmann::basic_json<IndexedMap>;

}  // namespace dsv4
