// A plugin file is checked before dlopen() maps it: the dynamic loader trusts the ELF headers,
// so a truncated or corrupt .so whose segments reach past the end of the file makes it touch
// unmapped pages and the process dies of SIGBUS. Checking the headers against the file's size
// first turns that into a refusal naming the file.
#pragma once

#include <filesystem>
#include <string>

namespace specd::plugin {

// Reads only the ELF, program and section headers of `file` (opened without blocking, so a FIFO
// cannot hang the scan). Returns "" when `file` is a regular file holding an ELF shared object
// for this host (class, byte order, machine) whose program and section header tables, loadable
// segments and sections all lie within the file; otherwise the reason, e.g. "truncated: segment
// 2 ends at byte 16384 of a 4096-byte file" or "built for AArch64, this host is x86-64".
std::string check_elf_shared_object(const std::filesystem::path& file);

}  // namespace specd::plugin
