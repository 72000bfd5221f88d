#include "plugin/elf_check.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace specd::plugin {

static_assert(sizeof(void*) == 8, "plugins are checked as 64-bit ELF files");

namespace {

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#else
constexpr uint16_t kHostMachine = EM_NONE;  // not checked
#endif

std::string machine_name(uint16_t m) {
  switch (m) {
    case EM_X86_64:
      return "x86-64";
    case EM_AARCH64:
      return "AArch64";
    case EM_386:
      return "i386";
    case EM_ARM:
      return "ARM";
    case EM_RISCV:
      return "RISC-V";
    case EM_PPC64:
      return "PowerPC64";
    default:
      return "machine " + std::to_string(m);
  }
}

class File {
 public:
  explicit File(const std::filesystem::path& path) : fd_(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)) {}
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  int fd() const { return fd_; }
  bool read_at(uint64_t offset, void* out, size_t n) const {
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd_, static_cast<char*>(out) + got, n - got, static_cast<off_t>(offset + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  }

 private:
  int fd_;
};

// [offset, offset + count * entry) inside a file of `size` bytes, without overflow.
bool within(uint64_t offset, uint64_t count, uint64_t entry, uint64_t size) {
  if (entry != 0 && count > size / entry) return false;
  return offset <= size && count * entry <= size - offset;
}

std::string truncated(const std::string& what, uint64_t offset, uint64_t length, uint64_t size) {
  return "truncated or corrupt: " + what + " at bytes [" + std::to_string(offset) + ", +" + std::to_string(length) +
         ") is not within the " + std::to_string(size) + "-byte file";
}

// Reads the `count` entries of a header table at `offset` once they are known to lie within the
// file. Returns "" or the reason.
template <typename T>
std::string read_table(const File& file, uint64_t offset, uint64_t count, uint64_t size, const char* what,
                       std::vector<T>& out) {
  if (!within(offset, count, sizeof(T), size)) {
    return truncated(std::string("the ") + what + " table", offset, count * sizeof(T), size);
  }
  out.resize(count);
  if (!file.read_at(offset, out.data(), out.size() * sizeof(T)))
    return std::string("cannot read the ") + what + " table";
  return "";
}

std::string check_header(const Elf64_Ehdr& h) {
  if (std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0) return "not an ELF file";
  if (h.e_ident[EI_CLASS] != ELFCLASS64) return "not a 64-bit ELF file";
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (h.e_ident[EI_DATA] != ELFDATA2LSB) return "a big-endian ELF file on a little-endian host";
#else
  if (h.e_ident[EI_DATA] != ELFDATA2MSB) return "a little-endian ELF file on a big-endian host";
#endif
  if (h.e_ident[EI_VERSION] != EV_CURRENT || h.e_version != EV_CURRENT) return "unknown ELF version";
  if (h.e_type != ET_DYN) return "not a shared object (ELF type " + std::to_string(h.e_type) + ")";
  if (kHostMachine != EM_NONE && h.e_machine != kHostMachine) {
    return "built for " + machine_name(h.e_machine) + ", this host is " + machine_name(kHostMachine);
  }
  if (h.e_phentsize != sizeof(Elf64_Phdr) || h.e_phnum == 0 || h.e_phnum == PN_XNUM) {
    return "corrupt program header table (" + std::to_string(h.e_phnum) + " entries of " +
           std::to_string(h.e_phentsize) + " bytes)";
  }
  if (h.e_shnum != 0 && (h.e_shentsize != sizeof(Elf64_Shdr) || h.e_shstrndx >= h.e_shnum)) {
    return "corrupt section header table";
  }
  return "";
}

// [vaddr, vaddr + len) inside one loadable segment's file-backed bytes (file_backed) or memory.
bool mapped(uint64_t vaddr, uint64_t len, const std::vector<Elf64_Phdr>& segments, bool file_backed) {
  for (const Elf64_Phdr& p : segments) {
    if (p.p_type != PT_LOAD) continue;
    const uint64_t extent = file_backed ? p.p_filesz : p.p_memsz;
    if (vaddr >= p.p_vaddr && vaddr - p.p_vaddr <= extent && len <= extent - (vaddr - p.p_vaddr)) return true;
  }
  return false;
}

// The file offset of [vaddr, vaddr + len) when it lies in one loadable segment's file bytes.
std::optional<uint64_t> file_offset(uint64_t vaddr, uint64_t len, const std::vector<Elf64_Phdr>& segments) {
  for (const Elf64_Phdr& p : segments) {
    if (p.p_type != PT_LOAD || vaddr < p.p_vaddr) continue;
    const uint64_t at = vaddr - p.p_vaddr;
    if (at <= p.p_filesz && len <= p.p_filesz - at) return p.p_offset + at;
  }
  return std::nullopt;
}

// The relocations the loader applies before any code of the file runs (DT_RELA and the PLT's):
// each writes 8 bytes or fewer at r_offset, which must lie in a loadable segment, and has a type
// the loader knows; the first DT_RELACOUNT are R_X86_64_RELATIVE (ld.so asserts it). A flipped
// byte there made the loader write at an address that depends on where the file was mapped, so
// the probe in a fresh process could pass and the host still crash. x86-64 hosts only.
std::string check_relocations(const File& file, const std::vector<Elf64_Phdr>& segments, uint64_t size,
                              const std::vector<Elf64_Dyn>& dyn) {
  if (kHostMachine != EM_X86_64) return "";
  auto value = [&](int64_t tag) -> std::optional<uint64_t> {
    for (const Elf64_Dyn& d : dyn) {
      if (d.d_tag == DT_NULL) break;
      if (d.d_tag == tag) return d.d_un.d_val;
    }
    return std::nullopt;
  };
  constexpr uint32_t kKnown[] = {R_X86_64_NONE,     R_X86_64_64,        R_X86_64_PC32,      R_X86_64_COPY,
                                 R_X86_64_GLOB_DAT, R_X86_64_JUMP_SLOT, R_X86_64_RELATIVE,  R_X86_64_32,
                                 R_X86_64_32S,      R_X86_64_DTPMOD64,  R_X86_64_DTPOFF64,  R_X86_64_TPOFF64,
                                 R_X86_64_PC64,     R_X86_64_IRELATIVE, R_X86_64_RELATIVE64};
  const uint64_t relative_count = value(DT_RELACOUNT).value_or(0);
  const std::pair<int64_t, int64_t> tables[] = {{DT_RELA, DT_RELASZ}, {DT_JMPREL, DT_PLTRELSZ}};
  for (const auto& [addr_tag, size_tag] : tables) {
    const auto addr = value(addr_tag);
    if (!addr) continue;
    const uint64_t bytes = value(size_tag).value_or(0);
    const auto at = file_offset(*addr, bytes, segments);
    if (!at) return "corrupt dynamic section: tag " + std::to_string(addr_tag) + " is not in the file's bytes";
    std::vector<Elf64_Rela> relocs;
    if (std::string bad = read_table(file, *at, bytes / sizeof(Elf64_Rela), size, "relocation", relocs); !bad.empty())
      return bad;
    for (size_t i = 0; i < relocs.size(); ++i) {
      const Elf64_Rela& r = relocs[i];
      const auto type = static_cast<uint32_t>(ELF64_R_TYPE(r.r_info));
      const std::string which = "relocation " + std::to_string(i) + " of tag " + std::to_string(addr_tag);
      if (std::find(std::begin(kKnown), std::end(kKnown), type) == std::end(kKnown))
        return "corrupt " + which + ": unknown type " + std::to_string(type);
      if (addr_tag == DT_RELA && i < relative_count && type != R_X86_64_RELATIVE)
        return "corrupt " + which + ": one of the first " + std::to_string(relative_count) +
               " (DT_RELACOUNT) is not R_X86_64_RELATIVE";
      if (type != R_X86_64_NONE && !mapped(r.r_offset, 8, segments, false))
        return "corrupt " + which + ": it writes at address " + std::to_string(r.r_offset) +
               ", outside the loadable segments";
    }
  }
  return "";
}

// The dynamic section's entries that the loader dereferences: the tables it points at must lie in
// loadable segments (the string table in file-backed bytes, with its size), the names in it must
// be offsets inside it, and the entry sizes must be the ELF64 ones. Returns "" or the reason.
std::string check_dynamic(const File& file, const std::vector<Elf64_Phdr>& segments, uint64_t size) {
  for (const Elf64_Phdr& p : segments) {
    if (p.p_type != PT_DYNAMIC) continue;
    std::vector<Elf64_Dyn> dyn;
    if (std::string bad = read_table(file, p.p_offset, p.p_filesz / sizeof(Elf64_Dyn), size, "dynamic", dyn);
        !bad.empty())
      return bad;
    uint64_t strtab = 0, strsz = 0;
    bool has_strtab = false;
    const std::pair<int64_t, int64_t> sized[] = {{DT_RELA, DT_RELASZ},
                                                 {DT_JMPREL, DT_PLTRELSZ},
                                                 {DT_INIT_ARRAY, DT_INIT_ARRAYSZ},
                                                 {DT_FINI_ARRAY, DT_FINI_ARRAYSZ}};
    auto value = [&](int64_t tag) -> std::optional<uint64_t> {
      for (const Elf64_Dyn& d : dyn) {
        if (d.d_tag == DT_NULL) break;
        if (d.d_tag == tag) return d.d_un.d_val;
      }
      return std::nullopt;
    };
    if (const auto s = value(DT_STRTAB)) strtab = *s, has_strtab = true;
    if (const auto s = value(DT_STRSZ)) strsz = *s;
    if (has_strtab && !mapped(strtab, strsz, segments, true))
      return "corrupt dynamic section: the string table (" + std::to_string(strsz) + " bytes at address " +
             std::to_string(strtab) + ") is not inside a loadable segment";
    for (const auto& [addr_tag, size_tag] : sized) {
      const auto addr = value(addr_tag);
      if (addr && !mapped(*addr, value(size_tag).value_or(0), segments, false))
        return "corrupt dynamic section: tag " + std::to_string(addr_tag) + " points outside the loadable segments";
    }
    for (const int64_t tag : {DT_SYMTAB, DT_HASH, DT_GNU_HASH, DT_VERSYM, DT_VERNEED, DT_VERDEF, DT_INIT, DT_FINI}) {
      const auto addr = value(tag);
      if (addr && !mapped(*addr, 1, segments, false))
        return "corrupt dynamic section: tag " + std::to_string(tag) + " points outside the loadable segments";
    }
    if (const auto e = value(DT_SYMENT); e && *e != sizeof(Elf64_Sym))
      return "corrupt dynamic section: symbol entries of " + std::to_string(*e) + " bytes";
    if (const auto e = value(DT_RELAENT); e && *e != sizeof(Elf64_Rela))
      return "corrupt dynamic section: relocation entries of " + std::to_string(*e) + " bytes";
    for (const Elf64_Dyn& d : dyn) {
      if (d.d_tag == DT_NULL) break;
      const bool name = d.d_tag == DT_NEEDED || d.d_tag == DT_SONAME || d.d_tag == DT_RPATH || d.d_tag == DT_RUNPATH;
      if (name && (!has_strtab || d.d_un.d_val >= strsz))
        return "corrupt dynamic section: a library name at offset " + std::to_string(d.d_un.d_val) +
               " is outside the " + std::to_string(strsz) + "-byte string table";
    }
    if (std::string bad = check_relocations(file, segments, size, dyn); !bad.empty()) return bad;
  }
  return "";
}

}  // namespace

std::string check_elf_shared_object(const std::filesystem::path& path) {
  const File file(path);
  if (file.fd() < 0) return std::string("cannot open: ") + std::strerror(errno);
  struct stat st {};
  if (::fstat(file.fd(), &st) != 0) return std::string("cannot stat: ") + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  const auto size = static_cast<uint64_t>(st.st_size);

  Elf64_Ehdr h{};
  if (size < sizeof(h) || !file.read_at(0, &h, sizeof(h))) {
    return "not an ELF file (" + std::to_string(size) + " bytes, shorter than an ELF header)";
  }
  if (std::string bad = check_header(h); !bad.empty()) return bad;

  std::vector<Elf64_Phdr> segments;
  if (std::string bad = read_table(file, h.e_phoff, h.e_phnum, size, "program header", segments); !bad.empty())
    return bad;
  for (size_t i = 0; i < segments.size(); ++i) {
    const Elf64_Phdr& p = segments[i];
    if ((p.p_type == PT_LOAD || p.p_type == PT_DYNAMIC) && !within(p.p_offset, 1, p.p_filesz, size)) {
      return truncated("segment " + std::to_string(i), p.p_offset, p.p_filesz, size);
    }
    if (p.p_type == PT_LOAD && p.p_filesz > p.p_memsz) return "corrupt segment " + std::to_string(i);
  }
  if (std::string bad = check_dynamic(file, segments, size); !bad.empty()) return bad;

  if (h.e_shnum == 0) return "";
  std::vector<Elf64_Shdr> sections;
  if (std::string bad = read_table(file, h.e_shoff, h.e_shnum, size, "section header", sections); !bad.empty())
    return bad;
  for (size_t i = 0; i < sections.size(); ++i) {
    const Elf64_Shdr& s = sections[i];
    if (s.sh_type != SHT_NOBITS && s.sh_type != SHT_NULL && !within(s.sh_offset, 1, s.sh_size, size)) {
      return truncated("section " + std::to_string(i), s.sh_offset, s.sh_size, size);
    }
  }
  return "";
}

}  // namespace specd::plugin
