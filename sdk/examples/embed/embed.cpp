// Embeds the specd engine in an application: loads a model, serves one request with n-gram
// speculation (greedy, so the text equals plain decoding's), streams its text to stdout and
// prints the speculative counters to stderr.
//
//   embed MODEL "PROMPT" [MAX_TOKENS]
//
// MODEL is a model directory or a GGUF file. Only the installed headers under <specd/...> are
// used, and the only library linked is specd::engine (libspecd.so).
#include <specd/config.hpp>
#include <specd/engine.hpp>
#include <specd/error.hpp>
#include <specd/log.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL PROMPT [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  // Logging is the application's (logging.level is the specd command's setting).
  specd::log::set_level(specd::log::Level::kWarn);
  try {
    const specd::Config config = specd::ConfigBuilder::for_model(argv[1])
                                     .set("speculative.proposer.name", "ngram")
                                     .set("speculative.num_speculative_tokens", "3")
                                     .build();
    specd::Engine engine(config);

    specd::Request request;
    request.prompt = argv[2];
    request.sampling.temperature = 0.0;
    request.sampling.max_tokens = argc > 3 ? std::atoi(argv[3]) : 32;
    engine.add_request(/*id=*/1, request);

    while (engine.has_unfinished()) {
      for (const specd::RequestOutput& out : engine.step()) {
        std::cout << out.text_delta << std::flush;
        if (!out.finished) continue;
        if (out.finish_reason == specd::FinishReason::kError) {
          std::cerr << "\nrequest failed: " << out.error << "\n";
          return 1;
        }
        std::cerr << "\n"
                  << out.num_generated_tokens << " tokens (" << specd::finish_reason_name(out.finish_reason) << "), "
                  << out.num_accepted_tokens << " of " << out.num_draft_tokens << " drafts accepted; specd "
                  << specd::library_version() << ", proposer " << engine.info().proposer << "\n";
      }
    }
  } catch (const specd::Error& e) {
    std::cerr << "specd: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
