// The store's table under keys that become full between visits (windows roll over, TATs pass): Robin Hood
// runs stay short and memory follows the live keys (include/ratelimit/README.md "Bounded memory").
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ratelimit/memory/sharded_store.hpp>

namespace {

/// A state that is full once the time passes `until` (as a window that rolled over).
struct Expiring {
  std::int64_t until = 0;
};

using Store = ratelimit::detail::ShardedStore<Expiring>;

TEST(FloorStoreLayout, RollingKeysKeepProbeRunsShort) {
  Store store(1'000'000, 1);
  std::int64_t now = 0;
  auto is_full = [&](const Expiring& s) { return s.until <= now; };
  auto check = [&](Expiring& s, bool) {
    s.until = now + 5000;  // full again 5000 checks later: a quarter of the keys live at a time
    return std::pair{0, true};
  };
  std::vector<std::string> keys;
  for (int i = 0; i < 20'000; ++i) keys.push_back("key-" + std::to_string(i * 7919));
  // Every key is full when the stream comes back to it (20,000 checks later): reclaimed or reused.
  for (int pass = 0; pass < 10; ++pass) {
    for (const std::string& key : keys) {
      ++now;
      store.update(key, store.hash(key), check, is_full);
    }
  }
  // Robin Hood at a load of at most 7/8 displaces a key a few slots from its home on average; reclaiming
  // in a sweeping band leaves the table dense just ahead of the band, with runs of hundreds.
  EXPECT_LT(store.mean_displacement(), 4.0) << "keys held " << store.size();
  // 5000 keys are live at a time: the table need not hold more than twice that.
  EXPECT_LT(store.table_bytes(), 10'000 * sizeof(Store::Slot));
}

}  // namespace
