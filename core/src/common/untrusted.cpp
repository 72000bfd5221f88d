#include "common/untrusted.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/ordered_json_builder.hpp"
#include "specd/error.hpp"

namespace specd {

namespace {

// Closes a descriptor on scope exit.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// The offset at which nesting first exceeds `max_depth`, or npos. Follows the JSON grammar's
// string rules exactly (a string starts at '"' outside a string, a backslash escapes the next
// byte), so on every prefix a parser accepts it counts the depth that parser reaches.
size_t excess_nesting_at(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > max_depth) return i;
        break;
      case ']':
      case '}':
        --depth;
        break;
      default:
        break;
    }
  }
  return std::string_view::npos;
}

}  // namespace

std::string read_file_limited(const std::filesystem::path& file, uint64_t max_bytes, std::string_view what) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the fstat below refuses it.
  Fd fd{::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (fd.fd < 0) {
    const int err = errno;
    throw Error(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kModelFormat,
                file.string() + ": cannot open: " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) {
    throw Error(ErrorCode::kModelFormat, file.string() + ": cannot stat: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) throw Error(ErrorCode::kModelFormat, file.string() + ": not a regular file");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    throw Error(ErrorCode::kModelFormat, file.string() + ": " + std::to_string(size) + " bytes, more than the " +
                                             std::to_string(max_bytes) + "-byte limit for " + std::string(what));
  }
  std::string text(static_cast<size_t>(size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(ErrorCode::kModelFormat, file.string() + ": cannot read: " + std::strerror(errno));
    if (n == 0) break;  // shrank while reading: parse what is there
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

namespace {

// Replays a failed parse through the SAX interface to learn which value it failed in: keeps the
// path of open containers (depth is bounded by the nesting check that ran first).
class ErrorLocator final : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return done(); }
  bool boolean(bool) override { return done(); }
  bool number_integer(number_integer_t) override { return done(); }
  bool number_unsigned(number_unsigned_t) override { return done(); }
  bool number_float(number_float_t, const string_t&) override { return done(); }
  bool string(string_t&) override { return done(); }
  bool binary(binary_t&) override { return done(); }
  bool start_object(std::size_t) override { return open(true); }
  bool key(string_t& k) override {
    stack_.back().key = clip(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    for (const Frame& f : stack_) {
      // Appended piecewise: g++ 12 warns (-Wrestrict) on "[" + std::to_string(...).
      if (f.object) {
        if (!path_.empty()) path_ += '.';
        path_ += f.key;
      } else {
        path_ += '[';
        path_ += std::to_string(f.index);
        path_ += ']';
      }
    }
    return false;
  }
  const std::string& path() const { return path_; }

 private:
  struct Frame {
    bool object;
    std::string key;
    size_t index = 0;
  };
  bool open(bool object) {
    stack_.push_back({object, {}, 0});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return done();
  }
  bool done() {
    if (!stack_.empty() && !stack_.back().object) ++stack_.back().index;
    return true;
  }
  std::vector<Frame> stack_;
  std::string path_;
};

// parse_json for either JSON type; the error replay only locates the failure, so it always runs
// as nlohmann::json.
template <class Json>
Json parse_limited(std::string_view text) {
  // JSON text never holds a raw NUL (strings escape it), and nlohmann's lexer would take one for
  // the end of the input: "{...}\0garbage" would parse as "{...}".
  if (const size_t at = text.find('\0'); at != std::string_view::npos)
    throw JsonError("a NUL byte at byte " + std::to_string(at) + " (JSON text has none; escape it as \\u0000)");
  if (const size_t at = excess_nesting_at(text, kMaxJsonDepth); at != std::string_view::npos) {
    throw JsonError("nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels at byte " + std::to_string(at));
  }
  if constexpr (std::is_same_v<Json, nlohmann::ordered_json>) {
    // Linear in the members of each object (ordered_json_builder.hpp); on any refusal the DOM
    // parser below runs and reports it exactly as before.
    OrderedJsonBuilder builder;
    if (nlohmann::ordered_json::sax_parse(text.begin(), text.end(), &builder)) return std::move(builder.result());
  }
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's message ends with "last read: '<token>'", which can be a whole long string
    // token: keep the description, clip the excerpt.
    std::string what = e.what();
    if (const size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    ErrorLocator locator;
    nlohmann::json::sax_parse(text.begin(), text.end(), &locator);
    JsonError err(clip(what, 160) + (locator.path().empty() ? "" : " (in " + locator.path() + ")"));
    err.path = locator.path();
    err.invalid_utf8 = what.find("UTF-8") != std::string::npos || what.find("surrogate") != std::string::npos;
    err.number_overflow = e.id == 406;
    throw err;
  }
}

template <class Json>
const char* type_name_of(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

}  // namespace

nlohmann::json parse_json(std::string_view text) {
  return parse_limited<nlohmann::json>(text);
}
nlohmann::ordered_json parse_ordered_json(std::string_view text) {
  return parse_limited<nlohmann::ordered_json>(text);
}

const char* json_type_name(const nlohmann::json& v) {
  return type_name_of(v);
}
const char* json_type_name(const nlohmann::ordered_json& v) {
  return type_name_of(v);
}

std::string clip(std::string_view text, size_t max_chars) {
  if (text.size() <= max_chars) return std::string(text);
  size_t cut = max_chars;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a code point
  return std::string(text.substr(0, cut)) + "...";
}

}  // namespace specd
