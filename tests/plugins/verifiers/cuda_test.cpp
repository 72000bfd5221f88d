// CUDA kernels against the CPU reference: for the same inputs and seeds, every verifier must
// emit exactly the same tokens on both devices (the fixed summation order and portable
// arithmetic in plugins/verifiers/common make this hold bit for bit). Built only in CUDA builds;
// skipped, with the reason, when no CUDA device is present.
#include <cuda_runtime.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "plugins/verifiers/verifier_test_util.hpp"

namespace specd::test {
namespace {

// Skips the test unless a CUDA device can be used.
#define SPECD_REQUIRE_CUDA_DEVICE()                                                              \
  do {                                                                                           \
    int count_ = 0;                                                                              \
    const cudaError_t err_ = cudaGetDeviceCount(&count_);                                        \
    if (err_ != cudaSuccess || count_ == 0)                                                      \
      GTEST_SKIP() << "no CUDA device available (" << cudaGetErrorString(err_) << "); the CUDA " \
                   << "verifier kernels are compiled but not run";                               \
  } while (0)

void check(cudaError_t err, const char* what) {
  ASSERT_EQ(err, cudaSuccess) << what << ": " << cudaGetErrorString(err);
}

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(const std::vector<T>& host) : n(host.size()) {
    if (n == 0) return;
    check(cudaMalloc(&ptr, n * sizeof(T)), "cudaMalloc");
    check(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::vector<T> download() const {
    std::vector<T> host(n);
    if (n > 0) check(cudaMemcpy(host.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return host;
  }
};

// Runs hb on the CUDA device (on a fresh stream); returns {out_tokens, num_accepted}, or the
// error text in *error.
std::pair<std::vector<int32_t>, std::vector<int32_t>> run_on_cuda(plugin::VerifierInstance& v, HostBatch& hb,
                                                                  std::string* error = nullptr) {
  DeviceBuffer<float> target(hb.target), draft(hb.draft);
  DeviceBuffer<int32_t> drafts(hb.drafts), num_drafted(hb.num_drafted), out(hb.out), accepted(hb.accepted);
  DeviceBuffer<uint64_t> seeds(hb.seeds), steps(hb.steps);
  cudaStream_t stream = nullptr;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  specd_verify_batch b = hb.view();
  b.device = {SPECD_DEVICE_CUDA, 0};
  b.stream = stream;
  b.target_probs = target.ptr;
  b.draft_probs = draft.ptr;
  b.draft_tokens = drafts.ptr;
  b.num_drafted = num_drafted.ptr;
  b.seeds = seeds.ptr;
  b.steps = steps.ptr;
  b.out_tokens = out.ptr;
  b.num_accepted = accepted.ptr;
  try {
    v.verify(b);
  } catch (const specd::Error& e) {
    if (error == nullptr) {
      ADD_FAILURE() << e.what();
    } else {
      *error = e.what();
    }
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  cudaStreamDestroy(stream);
  return {out.download(), accepted.download()};
}

class CudaMatchesCpu : public ::testing::TestWithParam<std::tuple<std::string, int32_t, bool>> {};

TEST_P(CudaMatchesCpu, SameTokensForTheSameUniforms) {
  SPECD_REQUIRE_CUDA_DEVICE();
  const auto [name, vocab, with_draft_probs] = GetParam();
  auto verifier = make_verifier(name);
  ASSERT_TRUE(verifier->capabilities().supports_cuda);
  for (uint64_t seed : {1u, 2u, 3u}) {
    // Random rows and drafts (mostly rejected), plus sequences whose drafts are the target's
    // likeliest tokens (often accepted), with random proposal lengths 0..k.
    const int32_t batch = vocab > 100000 ? 9 : 37;
    HostBatch hb = random_batch(batch, 6, vocab, with_draft_probs, seed * 131 + static_cast<uint64_t>(vocab));
    for (int32_t i = 0; i < hb.num_seqs; i += 2)
      for (int32_t pos = 0; pos < hb.k_max; ++pos) {
        const float* p = hb.target_row(i, pos);
        hb.draft_token(i, pos) = static_cast<int32_t>(std::max_element(p, p + vocab) - p);
      }
    hb.run(*verifier);
    const auto [out, accepted] = run_on_cuda(*verifier, hb);
    EXPECT_EQ(accepted, hb.accepted) << "seed " << seed;
    EXPECT_EQ(out, hb.out) << "seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(AllVerifiers, CudaMatchesCpu,
                         ::testing::Combine(::testing::Values("rejection", "typical_acceptance", "greedy"),
                                            ::testing::Values(7, 1000, 32000, 152064), ::testing::Bool()),
                         [](const auto& info) {
                           std::ostringstream name;
                           name << std::get<0>(info.param) << "_V" << std::get<1>(info.param)
                                << (std::get<2>(info.param) ? "_draft_probs" : "_one_hot");
                           return name.str();
                         });

TEST(CudaErrors, SameMessagesAsTheCpu) {
  SPECD_REQUIRE_CUDA_DEVICE();
  for (const char* name : kVerifierNames) {
    auto verifier = make_verifier(name);
    HostBatch hb = random_batch(5, 3, 300, true, 17, false);
    hb.draft_token(3, 1) = 300;
    std::string cuda_error;
    run_on_cuda(*verifier, hb, &cuda_error);
    EXPECT_EQ(cuda_error, verify_error(*verifier, hb.view())) << name;

    hb = random_batch(5, 3, 300, true, 17, false);
    hb.target_row(4, 2)[9] = std::nanf("");
    run_on_cuda(*verifier, hb, &cuda_error);
    EXPECT_EQ(cuda_error, verify_error(*verifier, hb.view())) << name;
    EXPECT_THAT(cuda_error, ::testing::HasSubstr("sequence 4, position 2: target probability of token 9 is nan"));
  }
}

}  // namespace
}  // namespace specd::test
