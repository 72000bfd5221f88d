// libFuzzer target: an A/B log as `specd ab report` reads it (docs/ab-testing.md): every line
// parsed as a record (speculative/ab_record.cpp), then the report built from the records that
// parsed and rendered as text and JSON. Only specd::Error (a malformed line, naming it) is
// expected; a crash, a sanitizer report, a hang or another exception is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ab/report.hpp"
#include "specd/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<specd::speculative::AbRecord> records;
  size_t start = 0;
  for (size_t n = 1; start <= text.size(); ++n) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    try {
      records.push_back(specd::speculative::parse_ab_line(line, "fuzz.jsonl:" + std::to_string(n)));
    } catch (const specd::Error&) {
    }
  }
  try {
    specd::ab::ReportOptions options;
    options.resamples = 50;  // the bootstrap's cost is not under test
    const specd::ab::Report report = specd::ab::build_report(records, options);
    (void)specd::ab::render_text(report);
    (void)specd::ab::render_json(report);
  } catch (const specd::Error&) {
  }
  return 0;
}
