#include "server/chat_template.hpp"

#include <optional>

#include "common/untrusted.hpp"
#include "specd/error.hpp"
#include "specd/log.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::server {
namespace {

std::string normalized_role(const std::string& role) {
  if (role == "developer") return "system";
  if (role == "system" || role == "user" || role == "assistant") return role;
  throw Error(ErrorCode::kInvalidArgument,
              "messages: unsupported role '" + clip(role) + "' (expected system, developer, user or assistant)");
}

std::string render_chatml(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += "<|im_start|>" + normalized_role(m.role) + "\n" + m.content + "<|im_end|>\n";
  }
  out += "<|im_start|>assistant\n";
  return out;
}

std::string render_llama3(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += "<|start_header_id|>" + normalized_role(m.role) + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
  }
  out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Meta's Llama 2 chat format: [INST] turns, the system prompt folded into the first one. Each
// later turn starts with its own <s> (the first BOS comes from tokenize_chat).
std::string render_llama2(const std::vector<ChatMessage>& messages) {
  size_t i = 0;
  std::string system;
  if (normalized_role(messages[0].role) == "system") {
    system = messages[0].content;
    i = 1;
  }
  if (i == messages.size()) {
    throw Error(ErrorCode::kInvalidArgument, "messages: the llama2 chat template needs at least one user message");
  }
  std::string out;
  bool first = true;
  for (size_t turn = 0; i < messages.size(); ++turn, ++i) {
    const std::string role = normalized_role(messages[i].role);
    const std::string expected = turn % 2 == 0 ? "user" : "assistant";
    if (role != expected) {
      throw Error(ErrorCode::kInvalidArgument,
                  "messages[" + std::to_string(i) + "]: the llama2 chat template needs user and assistant turns "
                  "alternating after an optional system message, got role '" + messages[i].role + "'");
    }
    if (role == "user") {
      if (!first) out += "<s>";
      std::string content = messages[i].content;
      if (first && !system.empty()) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
      out += "[INST] " + content + " [/INST]";
      first = false;
    } else {
      out += " " + messages[i].content + " </s>";
    }
  }
  if (normalized_role(messages.back().role) != "user") {
    throw Error(ErrorCode::kInvalidArgument, "messages: the llama2 chat template needs the last message from the user");
  }
  return out;
}

// The BOS a template starts with, as the tokenizer names it.
std::optional<int32_t> template_bos(ChatTemplateKind kind, const tokenizer::Tokenizer& tok) {
  switch (kind) {
    case ChatTemplateKind::kChatML: return std::nullopt;
    case ChatTemplateKind::kLlama2: return tok.bos_id() ? tok.bos_id() : tok.token_to_id("<s>");
    case ChatTemplateKind::kLlama3: return tok.token_to_id("<|begin_of_text|>");
  }
  return std::nullopt;
}

}  // namespace

std::string_view chat_template_name(ChatTemplateKind kind) noexcept {
  switch (kind) {
    case ChatTemplateKind::kChatML: return "chatml";
    case ChatTemplateKind::kLlama2: return "llama2";
    case ChatTemplateKind::kLlama3: return "llama3";
  }
  return "chatml";
}

ChatTemplateKind resolve_chat_template(std::string_view setting, const tokenizer::Tokenizer& tok) {
  if (setting == "chatml") return ChatTemplateKind::kChatML;
  if (setting == "llama2") return ChatTemplateKind::kLlama2;
  if (setting == "llama3") return ChatTemplateKind::kLlama3;
  if (setting != "auto") {
    throw Error(ErrorCode::kInvalidArgument, "server.chat_template: expected auto, chatml, llama2 or llama3, got '" +
                                                 std::string(setting) + "'");
  }
  // The model's own template (tokenizer_config.json or a GGUF file's tokenizer.chat_template)
  // decides, by the markers it writes; the tokenizer's special tokens where it has none.
  if (const std::optional<std::string>& own = tok.chat_template()) {
    if (own->find("<|im_start|>") != std::string::npos) return ChatTemplateKind::kChatML;
    if (own->find("<|start_header_id|>") != std::string::npos) return ChatTemplateKind::kLlama3;
    if (own->find("[INST]") != std::string::npos) return ChatTemplateKind::kLlama2;
    log::get("server").warn(
        "{}: the model's chat template matches none of the built-in ones (chatml, llama2, llama3); choosing by the "
        "tokenizer's special tokens (set server.chat_template to choose)",
        tok.source().string());
  }
  if (tok.token_to_id("<|im_start|>")) return ChatTemplateKind::kChatML;
  if (tok.token_to_id("<|begin_of_text|>") || tok.token_to_id("<|start_header_id|>")) return ChatTemplateKind::kLlama3;
  return ChatTemplateKind::kLlama2;
}

std::string render_chat(ChatTemplateKind kind, const std::vector<ChatMessage>& messages) {
  if (messages.empty()) throw Error(ErrorCode::kInvalidArgument, "messages: must contain at least one message");
  switch (kind) {
    case ChatTemplateKind::kChatML: return render_chatml(messages);
    case ChatTemplateKind::kLlama2: return render_llama2(messages);
    case ChatTemplateKind::kLlama3: return render_llama3(messages);
  }
  return render_chatml(messages);
}

std::vector<int32_t> tokenize_chat(ChatTemplateKind kind, const tokenizer::Tokenizer& tok,
                                   const std::vector<ChatMessage>& messages) {
  tokenizer::EncodeOptions opts;
  opts.add_special_tokens = true;  // the post-processor adds BOS where the model wants one
  opts.parse_special = true;       // the template's own markers are special tokens
  std::vector<int32_t> ids = tok.encode(render_chat(kind, messages), opts);
  if (const std::optional<int32_t> bos = template_bos(kind, tok)) {
    size_t leading = 0;
    while (leading < ids.size() && ids[leading] == *bos) ++leading;
    if (leading == 0) {
      ids.insert(ids.begin(), *bos);
    } else if (leading > 1) {
      ids.erase(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(leading - 1));
    }
  }
  return ids;
}

std::vector<int32_t> chat_stop_token_ids(ChatTemplateKind kind, const tokenizer::Tokenizer& tok) {
  std::optional<int32_t> id;
  switch (kind) {
    case ChatTemplateKind::kChatML: id = tok.token_to_id("<|im_end|>"); break;
    case ChatTemplateKind::kLlama3: id = tok.token_to_id("<|eot_id|>"); break;
    case ChatTemplateKind::kLlama2: break;
  }
  return id ? std::vector<int32_t>{*id} : std::vector<int32_t>{};
}

}  // namespace specd::server
