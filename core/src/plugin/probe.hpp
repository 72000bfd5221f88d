// Loading a plugin candidate in a child process first (docs/hardening.md): a file that passes
// the ELF check but whose loading crashes (a corrupt dynamic section or symbol table, a
// constructor, entry point or destructor that faults, the dynamic loader's own consistency
// assertions) takes down the child, not the caller, and is reported by name; the rest of the
// directory loads. A plugin is code and trusted once loaded: this is about corrupt files, not
// sandboxing.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace specd::plugin {

// Runs `attempt` in a forked child, which then exits at once (_exit: no exit handlers of the
// parent's copy run). "" when the child came back (attempt returned, true or false, or threw),
// so the caller's own attempt decides; else why not: "crashed the loader (signal 11,
// Segmentation fault)", "stopped the loader (exit status 127; the dynamic loader prints why)" or
// "did not finish loading within 10 s". The attempt should do everything the caller will do
// with the file, and undo it (dlclose runs the library's destructors).
std::string probe_in_child(const std::function<bool()>& attempt,
                           std::chrono::milliseconds timeout = std::chrono::seconds(10));

// In the child, after the attempt unloaded `file`: if the dynamic loader still holds it (a
// NODELETE object, or one whose relocations left a reference behind), its destructors and
// DT_FINI_ARRAY / DT_FINI would run at this process's exit, which the child skips (_exit). Runs
// them now, as the loader would at exit, so that a file whose exit-time code faults crashes the
// child, not the host when it exits. Nothing when the file was unloaded.
void run_exit_destructors_left_by(const std::filesystem::path& file);

// The probe in a fresh process: the helper executable specd-plugin-probe (built beside specd, and
// found beside this process's executable) loads `file` as the registry would, unloads it and
// exits the normal way, running every exit handler, as the host does when it exits. A forked
// copy of a multi-threaded host cannot safely do that last step, and a file whose destructors
// stay registered after its library is unmapped (a broken fini array or relocations: dlclose
// never calls __cxa_finalize for it) crashes only there. Answers as probe_in_child; results are
// kept per file (path, size, modification time) for the life of this process, since every
// engine scans the plugin path. nullopt when there is no helper (probe_helper()): probe in a
// forked child instead.
std::optional<std::string> probe_in_fresh_process(const std::filesystem::path& file,
                                                  std::chrono::milliseconds timeout = std::chrono::seconds(10));
std::filesystem::path probe_helper();

// Probing is on unless SPECD_PLUGIN_PROBE=0, and off inside an MPI job (OpenMPI warns about
// fork() in its ranks; rank 0 reports a crashing file when the job starts anyway).
bool probing_enabled();

}  // namespace specd::plugin
