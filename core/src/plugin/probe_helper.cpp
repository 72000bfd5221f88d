// specd-plugin-probe FILE: loads a plugin candidate as the registry does (ELF check, load, entry,
// descriptor and component checks), unloads it and exits the normal way, running every exit
// handler as a host process does when it ends (plugin/probe.hpp, docs/hardening.md). The host
// runs it in a fresh process before it loads FILE itself: a crash here is reported by name
// instead of taking the host down. Exit status 0: loaded and unloaded; 3: refused (the host's own
// attempt says why); 2: usage. Nothing is printed on success.
#include <cstdlib>
#include <exception>

#include "plugin/registry.hpp"
#include "specd/log.hpp"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  ::setenv("SPECD_PLUGIN_PROBE", "0", 1);          // no probing in turn
  specd::log::set_level(specd::log::Level::kOff);  // the host logs what it makes of the file
  try {
    specd::plugin::Registry registry;
    registry.load(argv[1]);
  } catch (const std::exception&) {
    return 3;
  }
  return 0;  // the registry unloaded FILE; exit() now runs what is left, as the host's exit would
}
