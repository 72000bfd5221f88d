// The A/B log line format and its writer (speculative/ab_log.hpp): lines round-trip, malformed
// lines are refused naming file:line and the field, and the file rotates by size.
#include "speculative/ab_log.hpp"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ab/report.hpp"
#include "specd/error.hpp"

using specd::speculative::AbLogWriter;
using specd::speculative::AbRecord;
using specd::speculative::AbShadowTrace;
using specd::speculative::parse_ab_line;
using specd::speculative::to_json_line;

namespace fs = std::filesystem;

namespace {

AbRecord sample_record(uint64_t id) {
  AbRecord r;
  r.id = id;
  r.arm = "typical";
  r.verifier = "typical_acceptance";
  r.assigned = "user";
  r.finish = "length";
  r.temperature = 0.8;
  r.k = 4;
  r.prompt_tokens = 12;
  r.generated_tokens = 9;
  r.decode_steps = 4;
  r.ttft_s = 0.01;
  r.tpot_s = 0.002;
  r.latency_s = 0.03;
  r.step_s = 0.02;
  r.drafted = {4, 4, 3};
  r.accepted = {4, 1, 0};
  r.logprob_sum = -3.5;
  r.logprob_tokens = 8;
  AbShadowTrace s;
  s.arm = "rejection";
  s.verifier = "rejection";
  s.lossless = true;
  s.k = 4;
  s.drafted = {4, 4, 0};
  s.accepted = {3, 1, -1};
  s.compared_tokens = 6;
  s.differing_tokens = 1;
  s.logprob_sum = -4.0;
  s.logprob_tokens = 6;
  s.verify_s = 0.0001;
  r.shadows.push_back(s);
  return r;
}

std::string error_of(const std::string& line) {
  try {
    parse_ab_line(line, "log.jsonl:7");
  } catch (const specd::Error& e) {
    return e.what();
  }
  return "";
}

fs::path work_dir() {
  const fs::path d = fs::path(SPECD_TEST_WORK_DIR) / "ab_log";
  fs::create_directories(d);
  return d;
}

std::vector<std::string> lines_of(const fs::path& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST(AbLog, LineRoundTrips) {
  const AbRecord r = sample_record(42);
  const std::string line = to_json_line(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_NE(line.find("\"accepted_at\":[2,1,1,1]"), std::string::npos) << "per-position counts for readers: " << line;
  const AbRecord p = parse_ab_line(line, "x");
  EXPECT_EQ(p.id, 42u);
  EXPECT_EQ(p.arm, "typical");
  EXPECT_EQ(p.assigned, "user");
  EXPECT_TRUE(p.completed());
  EXPECT_EQ(p.drafted, r.drafted);
  EXPECT_EQ(p.accepted, r.accepted);
  EXPECT_DOUBLE_EQ(p.tpot_s, 0.002);
  ASSERT_EQ(p.shadows.size(), 1u);
  EXPECT_EQ(p.shadows[0].arm, "rejection");
  EXPECT_EQ(p.shadows[0].accepted, (std::vector<int32_t>{3, 1, -1}));
  EXPECT_EQ(p.shadows[0].differing_tokens, 1);
  EXPECT_EQ(to_json_line(p), line);
}

TEST(AbLog, MalformedLinesNameTheLineAndTheField) {
  EXPECT_NE(error_of("{not json").find("log.jsonl:7: not a JSON line"), std::string::npos);
  std::string line = to_json_line(sample_record(1));
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = line;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  EXPECT_NE(error_of(replace("\"arm\":\"typical\"", "\"arm\":7")).find("log.jsonl:7: field 'arm' must be a string"),
            std::string::npos);
  EXPECT_NE(error_of(replace("\"accepted\":[4,1,0]", "\"accepted\":[4,1]")).find("field 'accepted'"),
            std::string::npos);
  EXPECT_NE(error_of(replace("\"accepted\":[4,1,0]", "\"accepted\":[4,5,0]")).find("accepted more than it drafted"),
            std::string::npos);
  EXPECT_NE(error_of(replace("\"accepted\":[3,1,-1]", "\"accepted\":[3,1]")).find("shadow.rejection"),
            std::string::npos);
  EXPECT_NE(error_of(replace("\"v\":1", "\"v\":2")).find("field 'v'"), std::string::npos);
  EXPECT_NE(error_of("[1, 2]").find("expected a JSON object"), std::string::npos);
}

// `specd ab report` reads logs it did not write: regular files only (a FIFO blocked it forever,
// /dev/zero never ends a line), a line refused once it passes 16 MiB (not after reading all of
// it: /dev/zero took 2 GB), and the requests' nesting limit (a 30 MB "[[[..." line took 2.2 GB).
TEST(AbLog, ReportRefusesHostileLogsClearly) {
  auto error_reading = [](const fs::path& file) -> std::string {
    try {
      specd::ab::read_ab_logs({file.string()});
    } catch (const specd::Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_reading("/dev/zero").find("/dev/zero: not a regular file"), std::string::npos);
  const fs::path fifo = work_dir() / "fifo.jsonl";
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(error_reading(fifo).find("not a regular file"), std::string::npos);
  EXPECT_NE(error_reading(work_dir() / "absent.jsonl").find("cannot read A/B log"), std::string::npos);

  const fs::path deep = work_dir() / "deep.jsonl";
  std::ofstream(deep) << to_json_line(sample_record(1)) << "\n" << std::string(100000, '[') << "\n";
  EXPECT_NE(error_reading(deep).find("deep.jsonl:2: not a JSON line: nesting deeper than 64 levels"), std::string::npos)
      << error_reading(deep);

  const fs::path long_line = work_dir() / "long.jsonl";
  {
    std::ofstream out(long_line, std::ios::binary);
    const std::string chunk(1 << 20, 'x');
    for (int i = 0; i < 20; ++i) out << chunk;  // 20 MiB without a newline
  }
  EXPECT_NE(error_reading(long_line).find("long.jsonl:1: line longer than 16 MiB"), std::string::npos);
  fs::remove(long_line);

  // Lines of every length around the reader's 4 KiB chunk, the last one without a newline.
  const fs::path ok = work_dir() / "ok.jsonl";
  {
    std::ofstream out(ok, std::ios::binary);
    out << "\n" << to_json_line(sample_record(1)) << "\n   \n";
    for (const size_t len : {4094, 4095, 4096, 4097, 8191, 8192, 20000}) {  // padded with spaces
      const std::string line = to_json_line(sample_record(len));
      out << line << std::string(len - line.size(), ' ') << "\n";
    }
    out << to_json_line(sample_record(2));
  }
  const auto records = specd::ab::read_ab_logs({ok.string()});
  ASSERT_EQ(records.size(), 9u);
  EXPECT_EQ(records[1].id, 4094u);
  EXPECT_EQ(records[7].id, 20000u);
  EXPECT_EQ(records[8].id, 2u);
}

TEST(AbLog, WriterAppendsAndRotatesBySize) {
  const fs::path file = work_dir() / "rotate.jsonl";
  for (const char* suffix : {"", ".1", ".2", ".3"}) fs::remove(file.string() + suffix);
  const size_t line_bytes = to_json_line(sample_record(1)).size() + 1;
  {
    // Rotates after every 3rd line; keeps 2 rotated files.
    AbLogWriter writer(file.string(), static_cast<int64_t>(3 * line_bytes), 2);
    for (uint64_t id = 1; id <= 10; ++id) writer.push(sample_record(id));
  }  // the destructor writes what is queued
  EXPECT_FALSE(fs::exists(file.string() + ".3"));
  // Newest last: .2 holds ids 4-6, .1 holds 7-9, the file holds 10.
  std::vector<uint64_t> ids;
  for (const std::string& f : {file.string() + ".2", file.string() + ".1", file.string()})
    for (const std::string& line : lines_of(f)) ids.push_back(parse_ab_line(line, f).id);
  EXPECT_EQ(ids, (std::vector<uint64_t>{4, 5, 6, 7, 8, 9, 10}));
}

TEST(AbLog, UnwritablePathIsAClearError) {
  const fs::path not_a_dir = work_dir() / "plain-file";
  std::ofstream(not_a_dir) << "x";
  const std::string path = (not_a_dir / "ab.jsonl").string();
  try {
    AbLogWriter writer(path, 1 << 20, 2);
    FAIL() << "expected an error";
  } catch (const specd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("speculative.ab_log: cannot open " + path + " for appending: Not a directory"),
              std::string::npos)
        << e.what();
  }
}

TEST(AbLog, MissingDirectoriesAreCreated) {
  const fs::path dir = work_dir() / "made" / "here";
  fs::remove_all(work_dir() / "made");
  { AbLogWriter writer((dir / "ab.jsonl").string(), 1 << 20, 2); }
  EXPECT_TRUE(fs::exists(dir / "ab.jsonl"));
}
