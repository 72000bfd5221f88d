// Loading a plugin candidate in a child process first (docs/hardening.md): a file that passes
// the ELF check but whose loading crashes (a corrupt dynamic section, a constructor that faults)
// takes down the child, not the caller, and is reported by name; the rest of the directory loads.
// A plugin is code and trusted once loaded: this is about corrupt files, not sandboxing.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

namespace specd::plugin {

// dlopen(file) in a forked child, which exits at once. "" when the child loaded the file or
// dlopen refused it (the caller's own load then reports dlerror); else why not: "crashed the
// loader (signal 11, Segmentation fault)" or "did not finish loading within 10 s".
std::string probe_load(const std::filesystem::path& file, std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Probing is on unless SPECD_PLUGIN_PROBE=0, and off inside an MPI job (OpenMPI warns about
// fork() in its ranks; rank 0 reports a crashing file when the job starts anyway).
bool probing_enabled();

}  // namespace specd::plugin
