#include "plugin/registry.hpp"

#include <dlfcn.h>

#include <boost/dll/library_info.hpp>
#include <boost/dll/shared_library.hpp>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <set>
#include <system_error>

#include "plugin/elf_check.hpp"
#include "plugin/probe.hpp"
#include "specd/error.hpp"
#include "specd/log.hpp"

namespace specd::plugin {

namespace fs = std::filesystem;

std::string_view kind_name(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::kProposer:
      return "proposer";
    case ComponentKind::kScorer:
      return "scorer";
    case ComponentKind::kVerifier:
      return "verifier";
  }
  return "component";
}

class LoadedLibrary {
 public:
  explicit LoadedLibrary(boost::dll::shared_library lib) : lib_(std::move(lib)) {}
  boost::dll::shared_library& lib() { return lib_; }

 private:
  boost::dll::shared_library lib_;
};

namespace {

const log::Logger& plugin_log() {
  return log::get("plugin");
}

// Error buffer for one factory or validate call (not a per-step path).
struct ErrorBuffer {
  char text[4096];
  specd_error err{sizeof(specd_error), sizeof(text), text};
  ErrorBuffer() { text[0] = '\0'; }
  std::string message() const { return text[0] != '\0' ? std::string(text) : std::string("(no message)"); }
};

bool valid_component_name(const char* name) {
  if (name == nullptr || *name == '\0') return false;
  for (const char* c = name; *c; ++c)
    if (!(std::isalnum(static_cast<unsigned char>(*c)) || *c == '_' || *c == '-' || *c == '.')) return false;
  return true;
}

// Other ABI majors this file exports, e.g. {2} for specd_plugin_entry_v2.
std::vector<std::string> other_entry_symbols(const fs::path& file) {
  std::vector<std::string> found;
  try {
    boost::dll::library_info info(boost::dll::fs::path(file.string()));
    for (const auto& sym : info.symbols())
      if (sym.rfind(SPECD_PLUGIN_ENTRY_PREFIX, 0) == 0) found.push_back(sym);
  } catch (const std::exception&) {
    // Not an ELF file we can read: the caller reports the missing entry symbol.
  }
  return found;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Search path

fs::path Registry::builtin_dir() {
  std::error_code ec;
  // Inside libspecd.so (an application embedding the engine): the plugins installed beside the
  // library, <libdir>/specd/plugins.
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&Registry::builtin_dir), &self) != 0 && self.dli_fname != nullptr) {
    const fs::path lib(self.dli_fname);
    if (lib.filename().string().rfind("libspecd.so", 0) == 0)
      return (fs::absolute(lib, ec).parent_path() / "specd" / "plugins").lexically_normal();
  }
  // Linked into a program (bin/specd): the plugins relative to it, in the build and install trees.
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return (exe.parent_path() / SPECD_PLUGIN_REL_DIR).lexically_normal();
}

std::vector<fs::path> Registry::search_path(const std::vector<std::string>& yaml_paths) {
  std::vector<fs::path> dirs;
  for (const auto& p : yaml_paths) dirs.emplace_back(p);
  if (const char* env = std::getenv("SPECD_PLUGIN_PATH"); env != nullptr) {
    std::string_view rest(env);
    while (!rest.empty()) {
      const size_t colon = rest.find(':');
      const std::string_view item = rest.substr(0, colon);
      if (!item.empty()) dirs.emplace_back(std::string(item));
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  if (auto builtin = builtin_dir(); !builtin.empty()) dirs.push_back(builtin);
  return dirs;
}

// ---------------------------------------------------------------------------------------------
// Loading

Registry::Registry() = default;
Registry::~Registry() = default;

void Registry::scan(const std::vector<fs::path>& dirs) {
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      plugin_log().debug("plugin directory {} does not exist; skipped", dir.string());
      continue;
    }
    // Every entry is judged on its own: one that cannot be stat'ed (a symlink loop, no
    // permission), or is not a regular file (a FIFO, a directory) named *.so, is refused and
    // the scan goes on.
    std::vector<fs::path> files;
    fs::directory_iterator it(dir, ec);
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
      const fs::path& path = it->path();
      if (path.extension() != ".so") continue;
      std::error_code stat_ec;
      const fs::file_status st = it->status(stat_ec);
      if (stat_ec) {
        refuse_file(path, "cannot be read: " + stat_ec.message());
      } else if (!fs::is_regular_file(st)) {
        refuse_file(path, "not a regular file");
      } else {
        files.push_back(path);
      }
    }
    if (ec) throw Error(ErrorCode::kPluginLoad, "cannot read plugin directory " + dir.string() + ": " + ec.message());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      try {
        load(file);
      } catch (const Error& e) {
        refusals_.push_back({file, e.what()});
        plugin_log().warn("{}", e.what());
      }
    }
  }
}

void Registry::refuse_file(const fs::path& file, const std::string& reason) {
  const std::string message = "plugin " + file.string() + ": " + reason;
  refusals_.push_back({file, message});
  plugin_log().warn("{}", message);
}

namespace {

Error refusal(const fs::path& file, const std::string& reason) {
  return Error(ErrorCode::kPluginLoad, "plugin " + file.string() + ": " + reason);
}

boost::dll::shared_library open_library(const fs::path& file, const fs::path& name) {
  boost::dll::shared_library lib;
  try {
    lib.load(boost::dll::fs::path(file.string()), boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    throw refusal(name, std::string("cannot be loaded: ") + e.what());
  }
  return lib;
}

// The library's descriptor, from its entry point; throws a refusal naming what is missing.
const specd_plugin_descriptor* entry_descriptor(const boost::dll::shared_library& lib, const fs::path& file,
                                                const fs::path& name) {
  if (!lib.has(SPECD_PLUGIN_ENTRY_SYMBOL)) {
    const auto others = other_entry_symbols(file);
    if (!others.empty()) {
      const std::string major = others.front().substr(std::strlen(SPECD_PLUGIN_ENTRY_PREFIX));
      throw refusal(name, "built for plugin ABI major " + major + " (exports " + others.front() +
                              "), this host supports ABI major " + std::to_string(SPECD_ABI_MAJOR));
    }
    throw refusal(name, std::string("no entry symbol ") + SPECD_PLUGIN_ENTRY_SYMBOL +
                            " (not a specd plugin, or not exported with SPECD_PLUGIN / BOOST_DLL_ALIAS)");
  }
  // BOOST_DLL_ALIAS exports a data symbol holding the address of the entry function.
  const void* alias = lib.get<const void*>(SPECD_PLUGIN_ENTRY_SYMBOL);
  if (alias == nullptr) throw refusal(name, "entry symbol is null");
  auto entry = reinterpret_cast<specd_plugin_entry_fn>(const_cast<void*>(alias));
  const specd_plugin_descriptor* desc = entry();
  if (desc == nullptr) throw refusal(name, "entry point returned no descriptor");
  return desc;
}

// The ABI version, name, CUDA runtime and component list of a descriptor.
void check_descriptor(const specd_plugin_descriptor& desc, const fs::path& name) {
  if (desc.struct_size < offsetof(specd_plugin_descriptor, components) + sizeof(const specd_component_desc*))
    throw refusal(name, "descriptor struct_size " + std::to_string(desc.struct_size) + " is too small");
  if (desc.abi_major != SPECD_ABI_MAJOR)
    throw refusal(name, "declares plugin ABI major " + std::to_string(desc.abi_major) + ", this host supports " +
                            std::to_string(SPECD_ABI_MAJOR));
  if (desc.abi_minor > SPECD_ABI_MINOR)
    throw refusal(name, "built for plugin ABI " + std::to_string(desc.abi_major) + "." +
                            std::to_string(desc.abi_minor) + ", newer than this host's " +
                            std::to_string(SPECD_ABI_MAJOR) + "." + std::to_string(SPECD_ABI_MINOR) +
                            "; upgrade specd or rebuild the plugin against this SDK");
  if (desc.name == nullptr || *desc.name == '\0') throw refusal(name, "descriptor has no plugin name");
  if (desc.cuda_runtime_major != 0) {
    const int host_cuda = host_cuda_runtime_major();
    if (host_cuda != 0 && host_cuda != desc.cuda_runtime_major)
      throw refusal(name, "device code built for CUDA runtime " + std::to_string(desc.cuda_runtime_major) +
                              ", this host uses CUDA runtime " + std::to_string(host_cuda));
  }
  if (desc.num_components < 0 || (desc.num_components > 0 && desc.components == nullptr))
    throw refusal(name, "descriptor has an invalid component list");
}

}  // namespace

const PluginInfo& Registry::load(const fs::path& file_in) {
  std::error_code ec;
  const fs::path file = fs::weakly_canonical(file_in, ec);
  if (ec) throw refusal(file_in, "cannot be resolved: " + ec.message());  // e.g. a symlink loop
  for (const auto* p : plugin_list_)
    if (p->path == file) return *p;
  if (!fs::exists(file, ec)) throw refusal(file_in, "no such file");
  // dlopen trusts the ELF headers; a truncated file would crash the process (SIGBUS).
  if (const std::string bad = check_elf_shared_object(file); !bad.empty()) throw refusal(file_in, bad);
  // A file whose loading crashes (corrupt dynamic section or symbol table, faulting constructor,
  // entry point or destructor, the dynamic loader's own assertions) is found out in a child
  // process that goes through the same steps and unloads the file again, so that it cannot
  // take this one down.
  if (probing_enabled()) {
    // In a fresh process where the helper is installed (it can exit the way this process
    // will); else in a forked child.
    std::optional<std::string> bad = probe_in_fresh_process(file);
    if (!bad) {
      bad = probe_in_child([&] {
        boost::dll::shared_library lib = open_library(file, file_in);
        const specd_plugin_descriptor* desc = entry_descriptor(lib, file, file_in);
        check_descriptor(*desc, file_in);
        check_components(*desc, file, file_in);
        lib.unload();                        // runs its destructors, as this process's exit would
        run_exit_destructors_left_by(file);  // and those dlclose leaves for the exit
        return true;
      });
    }
    if (!bad->empty()) throw refusal(file_in, *bad);
  }
  boost::dll::shared_library lib = open_library(file, file_in);
  const specd_plugin_descriptor* desc = entry_descriptor(lib, file, file_in);
  check_descriptor(*desc, file_in);
  check_components(*desc, file, file_in);
  return add(*desc, file, std::make_unique<LoadedLibrary>(std::move(lib)));
}

// Every component, before any is registered, so that a refused plugin leaves no trace.
void Registry::check_components(const specd_plugin_descriptor& desc, const fs::path& file, const fs::path& name) const {
  std::set<std::pair<int, std::string>> own;
  for (int32_t i = 0; i < desc.num_components; ++i) {
    const specd_component_desc& c = desc.components[i];
    const std::string where = "component #" + std::to_string(i);
    if (c.struct_size < offsetof(specd_component_desc, create) + sizeof(c.create))
      throw refusal(name, where + " has struct_size " + std::to_string(c.struct_size) + ", too small");
    if (c.kind < SPECD_COMPONENT_PROPOSER || c.kind > SPECD_COMPONENT_VERIFIER)
      throw refusal(name, where + " has unknown kind " + std::to_string(c.kind));
    if (!valid_component_name(c.name))
      throw refusal(name, where + " has an invalid name (letters, digits, '_', '-', '.' only)");
    if (c.create == nullptr) throw refusal(name, std::string("component '") + c.name + "' has no factory");
    const std::string kname(kind_name(static_cast<ComponentKind>(c.kind)));
    if (!own.emplace(c.kind, c.name).second) throw refusal(name, "declares " + kname + " '" + c.name + "' twice");
    if (auto it = by_name_.find(std::make_pair(c.kind, std::string(c.name))); it != by_name_.end()) {
      const fs::path& other = it->second->plugin->path;
      if (other.parent_path() == file.parent_path())
        throw refusal(name, "duplicate " + kname + " name '" + c.name + "': already provided by " + other.string());
    }
  }
}

// Registers a checked plugin's components; a name already taken earlier on the path shadows it.
const PluginInfo& Registry::add(const specd_plugin_descriptor& desc, const fs::path& file,
                                std::unique_ptr<LoadedLibrary> lib) {
  auto info = std::make_unique<PluginInfo>();
  info->path = file;
  info->name = desc.name;
  info->version = desc.version != nullptr ? desc.version : "";
  info->abi_major = desc.abi_major;
  info->abi_minor = desc.abi_minor;
  info->cuda_runtime_major = desc.cuda_runtime_major;
  for (int32_t i = 0; i < desc.num_components; ++i) {
    const specd_component_desc& c = desc.components[i];
    auto comp = std::make_unique<ComponentInfo>();
    comp->name = c.name;
    comp->kind = static_cast<ComponentKind>(c.kind);
    comp->description = c.description != nullptr ? c.description : "";
    comp->plugin = info.get();
    comp->desc = &c;
    auto key = std::make_pair(static_cast<int>(c.kind), comp->name);
    if (auto it = by_name_.find(key); it != by_name_.end()) {
      shadowed_.push_back({comp->name, comp->kind, it->second->plugin->path, file});
      plugin_log().warn("{} '{}' in {} is shadowed by {} earlier on the plugin path", kind_name(comp->kind), comp->name,
                        file.string(), it->second->plugin->path.string());
    } else {
      by_name_.emplace(key, comp.get());
    }
    component_store_.push_back(std::move(comp));
  }
  plugin_log().debug("loaded plugin {} {} from {}", info->name, info->version, file.string());
  libraries_.push_back(std::move(lib));
  plugin_list_.push_back(info.get());
  plugin_store_.push_back(std::move(info));
  return *plugin_list_.back();
}

std::vector<const ComponentInfo*> Registry::components() const {
  std::vector<const ComponentInfo*> out;
  for (const auto& c : component_store_) out.push_back(c.get());
  return out;
}

const ComponentInfo* Registry::find(ComponentKind kind, std::string_view name) const {
  auto it = by_name_.find(std::make_pair(static_cast<int>(kind), std::string(name)));
  return it == by_name_.end() ? nullptr : it->second;
}

const ComponentInfo& Registry::require(ComponentKind kind, std::string_view name) const {
  if (const ComponentInfo* c = find(kind, name)) return *c;
  std::string known;
  for (const auto& [key, comp] : by_name_)
    if (key.first == static_cast<int>(kind)) known += (known.empty() ? "" : ", ") + comp->name;
  std::string message = "no " + std::string(kind_name(kind)) + " named '" + std::string(name) +
                        "' on the plugin path (available: " + (known.empty() ? "none" : known) + ")";
  if (!refusals_.empty()) {
    message += "; refused plugin files:";
    for (const auto& r : refusals_) message += "\n  " + r.reason;
  }
  throw Error(ErrorCode::kNotFound, message);
}

// ---------------------------------------------------------------------------------------------
// Creating components

CreatedComponent Registry::create(ComponentKind kind, std::string_view name, const Params& params,
                                  ModelBinding models) const {
  const ComponentInfo& info = require(kind, name);
  CreatedComponent out;
  out.name = info.name;
  out.abi_minor = info.plugin->abi_minor;
  out.ctx = std::make_unique<HostContext>(info.plugin->name, models, kind == ComponentKind::kProposer);
  ErrorBuffer eb;
  out.component = {sizeof(specd_component), nullptr, nullptr};
  const int32_t status = info.desc->create(out.ctx->services(), params.raw(), &out.component, &eb.err);
  const std::string who = std::string(kind_name(info.kind)) + " '" + info.name + "' (plugin " + info.plugin->name +
                          ", " + info.plugin->path.string() + ")";
  if (status != SPECD_OK)
    throw Error(ErrorCode::kPluginLoad, who + " failed to create (" + status_name(status) + "): " + eb.message());
  if (out.component.self == nullptr || out.component.vtable == nullptr)
    throw Error(ErrorCode::kPluginLoad, who + " factory returned no instance");
  // Every vtable starts with struct_size and destroy.
  if (*static_cast<const uint32_t*>(out.component.vtable) < offsetof(specd_scorer_vtable, destroy) + sizeof(void*))
    throw Error(ErrorCode::kPluginLoad, who + " factory returned a vtable with struct_size " +
                                            std::to_string(*static_cast<const uint32_t*>(out.component.vtable)));
  return out;
}

void Registry::validate(ComponentKind kind, std::string_view name, const Params& params) const {
  const ComponentInfo& info = require(kind, name);
  if (info.desc->validate != nullptr) {
    ErrorBuffer eb;
    if (info.desc->validate(params.raw(), &eb.err) != SPECD_OK) throw Error(ErrorCode::kConfig, eb.message());
    return;
  }
  // No validate entry: creating an instance is the validation.
  switch (kind) {
    case ComponentKind::kProposer:
      create_proposer(name, params);
      break;
    case ComponentKind::kVerifier:
      create_verifier(name, params);
      break;
    case ComponentKind::kScorer:
      create_scorer(name, params);
      break;
  }
}

}  // namespace specd::plugin
