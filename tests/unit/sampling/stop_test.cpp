#include "sampling/stop.hpp"

#include <gtest/gtest.h>

namespace specd::sampling {
namespace {

// Feeds pieces one by one; returns (streamed text, stopped).
std::pair<std::string, bool> feed(StopStringMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) {
    auto r = m.push(p);
    out += r.text;
    if (r.stopped) return {out, true};
  }
  return {out + m.flush(), false};
}

TEST(StopStrings, StopStringSpanningTokensIsExcluded) {
  StopStringMatcher m({"\n\nUser:"});
  const auto [text, stopped] = feed(m, {"Hello", " there", ".\n", "\nUs", "er", ":", " more"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "Hello there.");
}

TEST(StopStrings, PartialMatchIsHeldBackThenReleased) {
  StopStringMatcher m({"STOP"});
  auto r = m.push("abcST");
  EXPECT_EQ(r.text, "abc");  // "ST" could start "STOP"
  r = m.push("OX");
  EXPECT_EQ(r.text, "STOX");
  EXPECT_FALSE(r.stopped);
  r = m.push("ST");
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(m.flush(), "ST");  // end of stream: it was not a stop string after all
}

TEST(StopStrings, EarliestOfSeveralWins) {
  StopStringMatcher m({"cd", "b"});
  const auto [text, stopped] = feed(m, {"abcd"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "a");
}

TEST(StopStrings, WithinOneTokenAndNothingAfterStop) {
  StopStringMatcher m({"."});
  auto r = m.push("one. two");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "one");
  EXPECT_EQ(m.push("three").text, "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStrings, NoStopsPassesThrough) {
  StopStringMatcher m;
  EXPECT_EQ(m.push("abc").text, "abc");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStrings, MultiByteUtf8) {
  StopStringMatcher m({"é!"});
  const auto [text, stopped] = feed(m, {"caf", "é", "!"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "caf");
}

}  // namespace
}  // namespace specd::sampling
