// A/B arm assignment (speculative/arms.hpp): the traffic split follows the weights within a
// binomial bound, a user keeps its arm, an explicit name wins, unknown names are refused.
#include "speculative/arms.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

using specd::speculative::ArmAssigner;
using specd::speculative::ArmChoice;

namespace {

// |count − n·p| within 5 standard deviations of a Binomial(n, p).
void expect_binomial(int64_t count, int64_t n, double p, const std::string& what) {
  const double mean = static_cast<double>(n) * p;
  const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
  EXPECT_LE(std::abs(static_cast<double>(count) - mean), 5 * sd)
      << what << ": " << count << " of " << n << ", expected " << mean << " ± " << 5 * sd;
}

}  // namespace

TEST(ArmAssigner, RandomDrawSplitsTrafficByWeight) {
  const ArmAssigner arms({"a", "b", "off", "c"}, {1.0, 3.0, 0.0, 4.0}, 7);
  const int64_t n = 40000;
  std::vector<int64_t> counts(4, 0);
  for (int64_t id = 1; id <= n; ++id) {
    const auto a = arms.assign("", "", static_cast<uint64_t>(id));
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(a->choice, ArmChoice::kRandom);
    ++counts[static_cast<size_t>(a->arm)];
  }
  expect_binomial(counts[0], n, 1.0 / 8, "arm a");
  expect_binomial(counts[1], n, 3.0 / 8, "arm b");
  expect_binomial(counts[3], n, 4.0 / 8, "arm c");
  EXPECT_EQ(counts[2], 0) << "an arm of weight 0 is never drawn";
}

TEST(ArmAssigner, DrawIsSeededAndReproducible) {
  const ArmAssigner a({"x", "y"}, {1, 1}, 1), b({"x", "y"}, {1, 1}, 1), c({"x", "y"}, {1, 1}, 2);
  int differ = 0;
  for (uint64_t id = 1; id <= 200; ++id) {
    EXPECT_EQ(a.assign("", "", id)->arm, b.assign("", "", id)->arm);
    differ += a.assign("", "", id)->arm != c.assign("", "", id)->arm;
  }
  EXPECT_GT(differ, 50) << "another seed draws another assignment";
}

TEST(ArmAssigner, UserIsStickyAndUsersSplitByWeight) {
  const ArmAssigner arms({"a", "b"}, {1.0, 1.0}, 3);
  const ArmAssigner restarted({"a", "b"}, {1.0, 1.0}, 99);  // another seed: user assignment does not depend on it
  int64_t in_b = 0;
  const int64_t users = 20000;
  for (int64_t u = 0; u < users; ++u) {
    const std::string user = "user-" + std::to_string(u);
    const auto first = arms.assign("", user, 1);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->choice, ArmChoice::kUser);
    for (uint64_t id : {2u, 17u, 12345u}) EXPECT_EQ(arms.assign("", user, id)->arm, first->arm) << user;
    EXPECT_EQ(restarted.assign("", user, 5)->arm, first->arm) << user;
    in_b += first->arm == 1;
  }
  expect_binomial(in_b, users, 0.5, "users on arm b");
}

TEST(ArmAssigner, ExplicitNameWinsAndUnknownIsRefused) {
  const ArmAssigner arms({"rejection", "typical"}, {1.0, 0.0}, 0);
  for (uint64_t id = 1; id <= 50; ++id) {
    const auto a = arms.assign("typical", "some-user", id);
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(a->arm, 1);
    EXPECT_EQ(a->choice, ArmChoice::kExplicit);
  }
  EXPECT_FALSE(arms.assign("greedy", "", 1).has_value());
  EXPECT_FALSE(arms.find("Typical").has_value()) << "names are case-sensitive";
  EXPECT_EQ(arms.list(), "rejection, typical");
}
