// Output format: accepted prefix, one emitted token, -1 padding — for all, none and some drafts
// accepted, and for different proposal lengths (including 0) in one batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "plugins/verifiers/verifier_test_util.hpp"

namespace specd::test {
namespace {

// Gives `token` probability 0 and renormalises the row.
void forbid(float* row, int64_t vocab, int64_t token) {
  row[token] = 0.0f;
  double total = 0.0;
  for (int64_t i = 0; i < vocab; ++i) total += row[i];
  for (int64_t i = 0; i < vocab; ++i) row[i] = static_cast<float>(row[i] / total);
}

// q = p at every position: every draft passes p(x) >= u·q(x).
void copy_target_to_draft(HostBatch& hb) {
  for (int32_t i = 0; i < hb.num_seqs; ++i)
    for (int32_t pos = 0; pos < hb.k_max; ++pos)
      std::copy(hb.target_row(i, pos), hb.target_row(i, pos) + hb.vocab, hb.draft_row(i, pos));
}

class RejectionFormat : public ::testing::TestWithParam<int> {};

TEST_P(RejectionFormat, AllDraftsAcceptedThenBonus) {
  HostBatch hb = random_batch(10, 5, 3000, true, 11 + GetParam(), /*random_lengths=*/false);
  copy_target_to_draft(hb);
  hb.run(*make_verifier("rejection"));
  expect_well_formed(hb);
  for (int32_t i = 0; i < hb.num_seqs; ++i) {
    EXPECT_EQ(hb.accepted[static_cast<size_t>(i)], 5);
    const auto row = hb.out_row(i);
    for (int32_t pos = 0; pos < 5; ++pos) EXPECT_EQ(row[static_cast<size_t>(pos)], hb.draft_token(i, pos));
    EXPECT_GE(row[5], 0);
  }
}

TEST_P(RejectionFormat, NoDraftAcceptedEmitsRecoveredToken) {
  HostBatch hb = random_batch(10, 5, 3000, true, 21 + GetParam(), false);
  for (int32_t i = 0; i < hb.num_seqs; ++i) forbid(hb.target_row(i, 0), hb.vocab, hb.draft_token(i, 0));
  hb.run(*make_verifier("rejection"));
  expect_well_formed(hb);
  for (int32_t i = 0; i < hb.num_seqs; ++i) {
    EXPECT_EQ(hb.accepted[static_cast<size_t>(i)], 0);
    const auto row = hb.out_row(i);
    EXPECT_NE(row[0], hb.draft_token(i, 0)) << "the residual max(0, p - q) has no mass on the rejected draft";
    for (int32_t pos = 1; pos <= 5; ++pos) EXPECT_EQ(row[static_cast<size_t>(pos)], -1);
  }
}

TEST_P(RejectionFormat, SomeDraftsAcceptedKeepsThePrefix) {
  HostBatch hb = random_batch(10, 5, 3000, true, 31 + GetParam(), false);
  copy_target_to_draft(hb);
  std::mt19937_64 rng(GetParam());
  std::vector<int32_t> expected(10);
  for (int32_t i = 0; i < hb.num_seqs; ++i) {
    const int32_t m = std::uniform_int_distribution<int32_t>(0, 5)(rng);
    expected[static_cast<size_t>(i)] = m;
    if (m < 5) forbid(hb.target_row(i, m), hb.vocab, hb.draft_token(i, m));
  }
  hb.run(*make_verifier("rejection"));
  expect_well_formed(hb);
  for (int32_t i = 0; i < hb.num_seqs; ++i) {
    const int32_t m = expected[static_cast<size_t>(i)];
    EXPECT_EQ(hb.accepted[static_cast<size_t>(i)], m) << "sequence " << i;
    const auto row = hb.out_row(i);
    for (int32_t pos = 0; pos < m; ++pos) EXPECT_EQ(row[static_cast<size_t>(pos)], hb.draft_token(i, pos));
    if (m < 5) {
      EXPECT_NE(row[static_cast<size_t>(m)], hb.draft_token(i, m));
    }
    for (int32_t pos = m + 1; pos <= 5; ++pos) EXPECT_EQ(row[static_cast<size_t>(pos)], -1);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, RejectionFormat, ::testing::Range(0, 5));

// Per-sequence proposal lengths in one batch, including 0 (decode normally). Entries past
// num_drafted — draft tokens and probability rows — are garbage and must be ignored.
class VariableLengths : public ::testing::TestWithParam<std::string> {};

TEST_P(VariableLengths, EachSequenceUsesOnlyItsOwnDrafts) {
  const std::vector<int32_t> lengths = {0, 3, 1, 5, 0, 2};
  HostBatch hb = random_batch(6, 5, 500, true, 41, false);
  for (int32_t i = 0; i < 6; ++i) {
    const int32_t n = lengths[static_cast<size_t>(i)];
    hb.num_drafted[static_cast<size_t>(i)] = n;
    for (int32_t pos = 0; pos < n; ++pos) {
      // A peaked target whose argmax is the draft, with q = p: every verifier accepts.
      float* p = hb.target_row(i, pos);
      for (int64_t t = 0; t < hb.vocab; ++t) p[t] = 0.5f / static_cast<float>(hb.vocab - 1);
      p[hb.draft_token(i, pos)] = 0.5f;
      std::copy(p, p + hb.vocab, hb.draft_row(i, pos));
    }
    for (int32_t pos = n; pos < 5; ++pos) {
      hb.draft_token(i, pos) = -12345;
      hb.draft_row(i, pos)[0] = std::nanf("");
      hb.target_row(i, pos + 1)[0] = std::nanf("");
    }
  }
  hb.run(*make_verifier(GetParam()));
  expect_well_formed(hb);
  for (int32_t i = 0; i < 6; ++i) {
    const int32_t n = lengths[static_cast<size_t>(i)];
    EXPECT_EQ(hb.accepted[static_cast<size_t>(i)], n) << "sequence " << i;
    const auto row = hb.out_row(i);
    for (int32_t pos = 0; pos < n; ++pos) EXPECT_EQ(row[static_cast<size_t>(pos)], hb.draft_token(i, pos));
    EXPECT_GE(row[static_cast<size_t>(n)], 0);
    for (int32_t pos = n + 1; pos <= 5; ++pos) EXPECT_EQ(row[static_cast<size_t>(pos)], -1);
  }
}

INSTANTIATE_TEST_SUITE_P(AllVerifiers, VariableLengths, ::testing::Values("rejection", "typical_acceptance", "greedy"),
                         VerifierName());

}  // namespace
}  // namespace specd::test
