// The plugin loader: loads good plugins, refuses broken ones with messages that name the file
// and the reason, routes plugin logs, and maps plugin failures to specd::Error.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "plugin/observations.hpp"
#include "plugin/probe.hpp"
#include "plugin/registry.hpp"
#include "specd/error.hpp"
#include "specd/log.hpp"

namespace fs = std::filesystem;
using specd::plugin::ComponentKind;
using specd::plugin::Params;
using specd::plugin::Registry;

namespace {

const fs::path kPlugins = SPECD_TEST_PLUGIN_DIR;

fs::path plugin_file(const std::string& dir, const std::string& name) {
  return kPlugins / dir / (name + ".so");
}

// Sets the value of the first dynamic entry with `tag` in an ELF64 file; false if there is none.
bool set_dynamic_entry(const fs::path& file, int64_t tag, uint64_t value) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  auto read = [&](uint64_t at, auto& v) {
    f.seekg(static_cast<std::streamoff>(at)), f.read(reinterpret_cast<char*>(&v), sizeof(v));
  };
  uint64_t phoff = 0;
  uint16_t phentsize = 0, phnum = 0;
  read(0x20, phoff);
  read(0x36, phentsize);
  read(0x38, phnum);
  for (uint16_t i = 0; i < phnum; ++i) {
    uint32_t type = 0;
    uint64_t offset = 0, size = 0;
    read(phoff + uint64_t{i} * phentsize, type);
    read(phoff + uint64_t{i} * phentsize + 8, offset);
    read(phoff + uint64_t{i} * phentsize + 32, size);
    if (type != 2) continue;  // PT_DYNAMIC
    for (uint64_t e = offset; e + 16 <= offset + size; e += 16) {
      int64_t t = 0;
      read(e, t);
      if (t != tag) continue;
      f.seekp(static_cast<std::streamoff>(e + 8));
      f.write(reinterpret_cast<const char*>(&value), sizeof(value));
      return true;
    }
  }
  return false;
}

// An empty directory under the test work directory (what an earlier run left is removed).
fs::path fresh_work_dir(const std::string& name) {
  const fs::path dir = fs::path(SPECD_TEST_WORK_DIR) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string load_error(const fs::path& file) {
  Registry reg;
  try {
    reg.load(file);
  } catch (const specd::Error& e) {
    EXPECT_EQ(e.code(), specd::ErrorCode::kPluginLoad);
    return e.what();
  }
  ADD_FAILURE() << "expected " << file << " to be refused";
  return {};
}

// Runs one propose call through the host-side wrapper on a single sequence.
std::vector<int32_t> propose_one(specd::plugin::ProposerInstance& p, const std::vector<int32_t>& tokens, int32_t k) {
  specd_sequence seq{};
  seq.struct_size = sizeof(seq);
  seq.seq_id = 7;
  seq.tokens = {tokens.data(), static_cast<int64_t>(tokens.size())};
  seq.num_prompt = static_cast<int64_t>(tokens.size());
  std::vector<int32_t> draft(static_cast<size_t>(k), -1);
  int32_t num_drafted = 0;
  specd_propose_batch b{};
  b.struct_size = sizeof(b);
  b.num_seqs = 1;
  b.seqs = &seq;
  b.max_draft = &k;
  b.k_max = k;
  b.vocab_size = 100;
  b.draft_tokens = draft.data();
  b.num_drafted = &num_drafted;
  p.propose(b);
  draft.resize(static_cast<size_t>(num_drafted));
  return draft;
}

Params yaml_params(const std::string& text, const std::string& path = "speculative.proposer") {
  return Params::from_yaml(YAML::Load(text), "test.yaml", path);
}

TEST(PluginLoader, LoadsGoodPluginAndDescribesIt) {
  Registry reg;
  const auto& info = reg.load(plugin_file("good", "test_good"));
  EXPECT_EQ(info.name, "test_good");
  EXPECT_EQ(info.version, "2.3.4");
  EXPECT_EQ(info.abi_major, SPECD_ABI_MAJOR);
  EXPECT_EQ(info.abi_minor, SPECD_ABI_MINOR);
  const auto* comp = reg.find(ComponentKind::kProposer, "test_repeat");
  ASSERT_NE(comp, nullptr);
  EXPECT_EQ(comp->description, "Repeats the last token");
  EXPECT_EQ(reg.find(ComponentKind::kVerifier, "test_repeat"), nullptr);
}

TEST(PluginLoader, CreatedProposerRunsWithParamsAndCapabilities) {
  Registry reg;
  reg.load(plugin_file("good", "test_good"));
  auto p = reg.create_proposer("test_repeat", yaml_params("{name: test_repeat, window: 2}"));
  EXPECT_EQ(p->capabilities().max_k, 2);
  EXPECT_EQ(propose_one(*p, {3, 4, 9}, 5), (std::vector<int32_t>{9, 9}));
  EXPECT_EQ(propose_one(*p, {3, 4, 9}, 1), (std::vector<int32_t>{9}));
}

TEST(PluginLoader, PluginLogsGoToHostSinkUnderPluginName) {
  std::vector<std::pair<std::string, std::string>> seen;
  specd::log::set_observer([&](const std::string& logger, specd::log::Level, std::string_view msg) {
    seen.emplace_back(logger, std::string(msg));
  });
  Registry reg;
  reg.load(plugin_file("good", "test_good"));
  reg.create_proposer("test_repeat", yaml_params("{window: 3}"));
  specd::log::set_observer(nullptr);
  bool found = false;
  for (const auto& [logger, msg] : seen)
    found = found || (logger == "plugin.test_good" && msg == "repeat proposer ready, window=3");
  EXPECT_TRUE(found) << "no record from logger plugin.test_good";
}

TEST(PluginLoader, RefusesLibraryWithoutEntrySymbol) {
  const std::string msg = load_error(plugin_file("no_entry", "test_no_entry"));
  EXPECT_NE(msg.find("test_no_entry.so"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no entry symbol specd_plugin_entry_v1"), std::string::npos) << msg;
}

TEST(PluginLoader, RefusesOtherAbiMajor) {
  const std::string msg = load_error(plugin_file("wrong_major", "test_wrong_major"));
  EXPECT_NE(msg.find("test_wrong_major.so"), std::string::npos) << msg;
  EXPECT_NE(msg.find("built for plugin ABI major 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("this host supports ABI major 1"), std::string::npos) << msg;
}

TEST(PluginLoader, RefusesDescriptorDeclaringOtherMajor) {
  const std::string msg = load_error(plugin_file("lying_major", "test_lying_major"));
  EXPECT_NE(msg.find("declares plugin ABI major 3"), std::string::npos) << msg;
}

TEST(PluginLoader, RefusesNewerMinor) {
  const std::string msg = load_error(plugin_file("newer_minor", "test_newer_minor"));
  EXPECT_NE(msg.find("test_newer_minor.so"), std::string::npos) << msg;
  const std::string expect = "built for plugin ABI 1." + std::to_string(SPECD_ABI_MINOR + 1) +
                             ", newer than this host's 1." + std::to_string(SPECD_ABI_MINOR);
  EXPECT_NE(msg.find(expect), std::string::npos) << msg;
}

TEST(PluginLoader, OlderMinorWithShorterVtableLoadsAndMissesOnlyItsOptionalEntries) {
  Registry reg;
  const auto& info = reg.load(plugin_file("older_minor", "test_older_minor"));
  EXPECT_EQ(info.abi_minor, 0u);
  auto p = reg.create_proposer("older", Params());
  EXPECT_EQ(p->abi_minor(), 0u);
  EXPECT_EQ(p->capabilities().keeps_state, 1);
  EXPECT_EQ(propose_one(*p, {3, 4}, 3), (std::vector<int32_t>{7, 7, 7}));
  // on_accept and on_release lie past its struct_size: absent, so these are no-ops. Reading the
  // words there would call a function that aborts the test.
  const std::vector<int32_t> emitted = {7, 7};
  p->on_accept(7, 1, {emitted.data(), 2});
  p->on_release(7);
  specd_prefill_batch prefill{};
  prefill.struct_size = sizeof(prefill);
  p->on_prefill(prefill);  // NULL in its vtable: absent too
}

TEST(PluginLoader, VtableTooShortForARequiredEntryIsRefused) {
  Registry reg;
  reg.load(plugin_file("older_minor", "test_older_minor"));
  try {
    reg.create_proposer("too_short", Params());
    FAIL() << "expected the proposer to be refused";
  } catch (const specd::Error& e) {
    EXPECT_EQ(e.code(), specd::ErrorCode::kPluginLoad);
    EXPECT_NE(std::string(e.what()).find("proposer 'too_short' has no propose function"), std::string::npos)
        << e.what();
  }
}

TEST(PluginLoader, RefusesDuplicateComponentWithinPlugin) {
  const std::string msg = load_error(plugin_file("dup_within", "test_dup_within"));
  EXPECT_NE(msg.find("declares proposer 'twice' twice"), std::string::npos) << msg;
}

TEST(PluginLoader, RefusesDuplicateComponentAcrossPluginsInOneDirectory) {
  Registry reg;
  reg.scan({kPlugins / "dup_across"});
  ASSERT_EQ(reg.plugins().size(), 1u);
  ASSERT_EQ(reg.refusals().size(), 1u);
  const std::string& msg = reg.refusals()[0].reason;
  EXPECT_NE(msg.find("dup_b.so"), std::string::npos) << msg;
  EXPECT_NE(msg.find("duplicate proposer name 'same_name': already provided by"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dup_a.so"), std::string::npos) << msg;
}

TEST(PluginLoader, EarlierSearchPathEntryShadowsLaterOne) {
  const fs::path override_dir = fs::path(SPECD_TEST_WORK_DIR) / "shadow_override";
  fs::create_directories(override_dir);
  fs::copy_file(plugin_file("good", "test_good"), override_dir / "my_good.so", fs::copy_options::overwrite_existing);
  Registry reg;
  reg.scan({override_dir, kPlugins / "good"});
  EXPECT_TRUE(reg.refusals().empty());
  ASSERT_EQ(reg.shadowed().size(), 1u);
  EXPECT_EQ(reg.shadowed()[0].name, "test_repeat");
  EXPECT_EQ(reg.find(ComponentKind::kProposer, "test_repeat")->plugin->path.filename(), "my_good.so");
}

// A file whose loading crashes the loader (here a constructor that faults; in the wild a corrupt
// dynamic section that passes the ELF check) is probed in a child process: it is refused by
// name with the signal, and the scan goes on to load the rest.
TEST(PluginLoader, AFileThatCrashesTheLoaderIsReportedAndTheRestLoad) {
  const fs::path dir = fs::path(SPECD_TEST_WORK_DIR) / "crashing_and_good";
  fs::create_directories(dir);
  fs::copy_file(plugin_file("crashing", "test_crashing"), dir / "a_crashing.so", fs::copy_options::overwrite_existing);
  fs::copy_file(plugin_file("good", "test_good"), dir / "b_good.so", fs::copy_options::overwrite_existing);
  Registry reg;
  reg.scan({dir});
  ASSERT_EQ(reg.refusals().size(), 1u);
  const std::string& msg = reg.refusals()[0].reason;
  EXPECT_NE(msg.find("a_crashing.so"), std::string::npos) << msg;
  EXPECT_NE(msg.find("crashed the loader (signal " + std::to_string(SIGSEGV)), std::string::npos) << msg;
  ASSERT_EQ(reg.plugins().size(), 1u);
  EXPECT_NE(reg.find(ComponentKind::kProposer, "test_repeat"), nullptr) << "the good plugin loaded";
}

// The probe goes through every step the host takes with a file, and unloads it again: an entry
// point that faults, a destructor that faults (the host would crash when it exits) and a dynamic
// section the loader stops on with its own assertion (exit status 127, no signal) are refused by
// name; before, each of these took the host down (the round-2 hostile campaign's 34 plugin files).
TEST(PluginLoader, EntryDestructorAndLoaderAssertionCrashesAreReported) {
  const fs::path dir = fresh_work_dir("crashing_later");
  fs::copy_file(plugin_file("crashing_entry", "test_crashing_entry"), dir / "a_entry.so");
  fs::copy_file(plugin_file("crashing_exit", "test_crashing_exit"), dir / "b_exit.so");
  // c_pltrel.so: the good plugin with DT_PLTREL (which must say DT_RELA) set to garbage.
  fs::copy_file(plugin_file("good", "test_good"), dir / "c_pltrel.so");
  ASSERT_TRUE(set_dynamic_entry(dir / "c_pltrel.so", 20, 0x7777)) << "no DT_PLTREL in the good plugin";
  fs::copy_file(plugin_file("good", "test_good"), dir / "d_good.so");
  Registry reg;
  reg.scan({dir});
  ASSERT_EQ(reg.refusals().size(), 3u);
  const std::string sig = "crashed the loader (signal " + std::to_string(SIGSEGV);
  EXPECT_NE(reg.refusals()[0].reason.find("a_entry.so: " + sig), std::string::npos) << reg.refusals()[0].reason;
  EXPECT_NE(reg.refusals()[1].reason.find("b_exit.so: " + sig), std::string::npos) << reg.refusals()[1].reason;
  EXPECT_NE(reg.refusals()[2].reason.find("c_pltrel.so: stopped the loader (exit status 127"), std::string::npos)
      << reg.refusals()[2].reason;
  ASSERT_EQ(reg.plugins().size(), 1u);
  EXPECT_NE(reg.find(ComponentKind::kProposer, "test_repeat"), nullptr) << "the good plugin loaded";
}

// A file the dynamic loader keeps after dlclose (here linked NODELETE; in the round-2 campaign,
// FINI_ARRAY / FINI_ARRAYSZ / RELASZ mutants) runs its destructors only at process exit, which
// the probe's child skipped: such a file passed the probe, loaded, and crashed the host when it
// exited. The child now runs them itself, so the file is refused and this test process exits
// cleanly (without the fix it loads here and the test binary dies at exit).
TEST(PluginLoader, AFileWhoseDestructorsOutliveDlcloseIsReported) {
  const fs::path dir = fresh_work_dir("crashing_nodelete");
  fs::copy_file(plugin_file("crashing_nodelete", "test_crashing_nodelete"), dir / "a_nodelete.so");
  fs::copy_file(plugin_file("good", "test_good"), dir / "b_good.so");
  Registry reg;
  reg.scan({dir});
  ASSERT_EQ(reg.refusals().size(), 1u);
  const std::string& msg = reg.refusals()[0].reason;
  EXPECT_NE(msg.find("a_nodelete.so: crashed the loader (signal " + std::to_string(SIGSEGV)), std::string::npos) << msg;
  ASSERT_EQ(reg.plugins().size(), 1u);
  EXPECT_NE(reg.find(ComponentKind::kProposer, "test_repeat"), nullptr) << "the good plugin loaded";
}

// The round-2 campaign's last plugin crashes: a file whose fini array is broken (here the good
// plugin with DT_FINI_ARRAYSZ 0) never has __cxa_finalize called for it in dlclose, so the
// destructors it registered stay in the exit list after it is unmapped and the host crashes when
// it exits. A forked probe cannot exit that way safely; the fresh-process helper
// (specd-plugin-probe) does, so the file is refused (without the helper this test binary loads it
// and dies at exit).
TEST(PluginLoader, AFileWhoseExitHandlersOutliveItIsReported) {
  ASSERT_FALSE(specd::plugin::probe_helper().empty()) << "specd-plugin-probe is built beside the tests";
  const fs::path dir = fresh_work_dir("fini_arraysz");
  fs::copy_file(plugin_file("good", "test_good"), dir / "a_fini.so");
  ASSERT_TRUE(set_dynamic_entry(dir / "a_fini.so", 28, 0)) << "no DT_FINI_ARRAYSZ in the good plugin";
  Registry reg;
  reg.scan({dir});
  ASSERT_EQ(reg.refusals().size(), 1u);
  const std::string& msg = reg.refusals()[0].reason;
  EXPECT_NE(msg.find("a_fini.so: crashed the loader (signal " + std::to_string(SIGSEGV)), std::string::npos) << msg;
  EXPECT_TRUE(reg.plugins().empty());
}

// A proposer's observations (ABI 1.4 record): counted and summed per name; a bad name, a value
// that is negative or not finite, and a 17th series are dropped, never stored.
TEST(PluginObservations, BoundedAndValidated) {
  specd::plugin::Observations o;
  specd::log::Logger& log = specd::log::get("test");
  o.record("hits", 1, log);
  o.record("hits", 2.5, log);
  for (const char* bad : {"", "Hits", "a-b", "x y", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}) o.record(bad, 1, log);
  o.record(nullptr, 1, log);
  o.record("neg", -1, log);
  o.record("nan", std::nan(""), log);
  for (int i = 0; i < 20; ++i) {
    std::string name = "s";  // built with += (g++ 12 warns -Wrestrict on "s" + std::to_string(i))
    name += std::to_string(i);
    o.record(name.c_str(), 1, log);
  }
  const auto s = o.snapshot();
  ASSERT_EQ(s.size(), specd::plugin::Observations::kMaxSeries);
  EXPECT_EQ(s[0].name, "hits");
  EXPECT_EQ(s[0].count, 2u);
  EXPECT_DOUBLE_EQ(s[0].sum, 3.5);
  for (const auto& x : s) EXPECT_TRUE(specd::plugin::valid_series_name(x.name)) << x.name;
  EXPECT_EQ(s.back().name, "s14");
}

TEST(PluginLoader, ThrowingFactoryIsALoadErrorNotACrash) {
  Registry reg;
  reg.load(plugin_file("throwing", "test_throwing"));
  try {
    reg.create_proposer("throwing", Params());
    FAIL() << "expected an error";
  } catch (const specd::Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.code(), specd::ErrorCode::kPluginLoad);
    EXPECT_NE(msg.find("proposer 'throwing'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("test_throwing.so"), std::string::npos) << msg;
    EXPECT_NE(msg.find("failed to create"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cannot open draft weights: boom"), std::string::npos) << msg;
  }
}

TEST(PluginLoader, ParameterErrorsAreAllReportedWithLines) {
  Registry reg;
  reg.load(plugin_file("good", "test_good"));
  const std::string yaml = "name: test_repeat\nwindow: 500\nbogus: 1\nfail_on_propose: maybe\n";
  try {
    reg.create_proposer("test_repeat", yaml_params(yaml));
    FAIL() << "expected an error";
  } catch (const specd::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("test.yaml:2: speculative.proposer.window: expected integer in [1, 64], got \"500\""),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("test.yaml:3: speculative.proposer.bogus: unknown key"), std::string::npos) << msg;
    EXPECT_NE(msg.find("test.yaml:4: speculative.proposer.fail_on_propose: expected boolean, got \"maybe\""),
              std::string::npos)
        << msg;
  }
  // validate() reports the same errors without a validate entry point (create + destroy).
  EXPECT_THROW(reg.validate(ComponentKind::kProposer, "test_repeat", yaml_params(yaml)), specd::Error);
  EXPECT_NO_THROW(reg.validate(ComponentKind::kProposer, "test_repeat", yaml_params("window: 8")));
}

TEST(PluginLoader, FailingCallBecomesPluginCallError) {
  Registry reg;
  reg.load(plugin_file("good", "test_good"));
  auto p = reg.create_proposer("test_repeat", yaml_params("fail_on_propose: true"));
  try {
    propose_one(*p, {1, 2}, 2);
    FAIL() << "expected an error";
  } catch (const specd::Error& e) {
    EXPECT_EQ(e.code(), specd::ErrorCode::kPluginCall);
    EXPECT_STREQ(e.what(), "proposer 'test_repeat' propose failed (invalid argument): told to fail");
  }
}

TEST(PluginLoader, UnknownComponentListsWhatExists) {
  Registry reg;
  reg.scan({kPlugins / "good", kPlugins / "no_entry"});
  try {
    reg.create_proposer("nope", Params());
    FAIL();
  } catch (const specd::Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.code(), specd::ErrorCode::kNotFound);
    EXPECT_NE(msg.find("no proposer named 'nope'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("available: test_repeat"), std::string::npos) << msg;
    EXPECT_NE(msg.find("test_no_entry.so"), std::string::npos) << "refusals should be listed: " << msg;
  }
}

TEST(PluginLoader, SearchPathOrderIsYamlThenEnvThenBuiltin) {
  setenv("SPECD_PLUGIN_PATH", "/env/a:/env/b", 1);
  const auto path = Registry::search_path({"/yaml/x"});
  unsetenv("SPECD_PLUGIN_PATH");
  ASSERT_EQ(path.size(), 4u);
  EXPECT_EQ(path[0], "/yaml/x");
  EXPECT_EQ(path[1], "/env/a");
  EXPECT_EQ(path[2], "/env/b");
  EXPECT_EQ(path[3], Registry::builtin_dir());
  EXPECT_EQ(path[3].filename(), "plugins");
}

TEST(PluginLoader, MissingFileIsRefusedByName) {
  const std::string msg = load_error("/nonexistent/dir/x.so");
  EXPECT_EQ(msg, "plugin /nonexistent/dir/x.so: no such file");
}

std::string run_command(const std::string& cmd, int* status) {
  std::string out;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  *status = pclose(pipe);
  return out;
}

TEST(PluginsListCli, JsonListsPluginsComponentsAndRefusals) {
  int status = 0;
  const std::string out =
      run_command(std::string(SPECD_CLI_PATH) + " plugins list --json --plugin-path " + (kPlugins / "good").string() +
                      " --plugin-path " + (kPlugins / "newer_minor").string() + " 2>/dev/null",
                  &status);
  ASSERT_EQ(status, 0) << out;
  const auto j = nlohmann::json::parse(out);
  bool found = false;
  for (const auto& p : j["plugins"]) {
    if (p["name"] != "test_good") continue;
    found = true;
    EXPECT_EQ(p["version"], "2.3.4");
    EXPECT_EQ(p["abi"], std::to_string(SPECD_ABI_MAJOR) + "." + std::to_string(SPECD_ABI_MINOR));
    EXPECT_NE(p["path"].get<std::string>().find("test_good.so"), std::string::npos);
    ASSERT_EQ(p["components"].size(), 1u);
    EXPECT_EQ(p["components"][0]["kind"], "proposer");
    EXPECT_EQ(p["components"][0]["name"], "test_repeat");
  }
  EXPECT_TRUE(found) << out;
  ASSERT_EQ(j["refused"].size(), 1u) << out;
  EXPECT_NE(j["refused"][0]["reason"].get<std::string>().find("newer than this host"), std::string::npos);
}

TEST(PluginsListCli, HumanOutputShowsNameVersionAbiAndPath) {
  int status = 0;
  const std::string out = run_command(
      std::string(SPECD_CLI_PATH) + " plugins list --plugin-path " + (kPlugins / "good").string() + " 2>/dev/null",
      &status);
  ASSERT_EQ(status, 0) << out;
  const std::string abi = "(ABI " + std::to_string(SPECD_ABI_MAJOR) + "." + std::to_string(SPECD_ABI_MINOR) + ")";
  EXPECT_NE(out.find("test_good 2.3.4  " + abi), std::string::npos) << out;
  EXPECT_NE(out.find("proposer test_repeat — Repeats the last token"), std::string::npos) << out;
  EXPECT_NE(out.find((kPlugins / "good" / "test_good.so").string()), std::string::npos) << out;
}

}  // namespace

namespace {
TEST(PluginBuild, PluginsExportOnlyTheEntrySymbol) {
  int status = 0;
  const std::string out =
      run_command("nm -D --defined-only " + plugin_file("good", "test_good").string() + " | awk '{print $3}'", &status);
  ASSERT_EQ(status, 0);
  EXPECT_EQ(out, "specd_plugin_entry_v1\n");
}
}  // namespace
