// Built-in chat templates (docs/server.md "Chat templates"): ChatML, Llama 2 and Llama 3,
// chosen by `server.chat_template` or, for `auto`, by the model's own chat template (from
// tokenizer_config.json or a GGUF file) and the tokenizer's special tokens.
//
// BOS is handled once: templates render without a leading BOS, the rendered text is tokenized
// with the tokenizer's post-processor (add_special_tokens, which adds BOS where the model
// wants one) and special-token text recognised, and tokenize_chat() then makes sure exactly one
// BOS starts the ids: it adds the template's BOS when the post-processor did not, and drops
// a repeated one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specd::tokenizer {
class Tokenizer;
}

namespace specd::server {

enum class ChatTemplateKind { kChatML, kLlama2, kLlama3 };

struct ChatMessage {
  std::string role;  // system | user | assistant ("developer" is read as system)
  std::string content;
};

std::string_view chat_template_name(ChatTemplateKind kind) noexcept;

// setting: auto | chatml | llama2 | llama3. auto: the built-in template the model's own chat
// template is (Tokenizer::chat_template(): <|im_start|> → chatml, <|start_header_id|> →
// llama3, [INST] → llama2); without one, or when it is none of these (logged), by the
// tokenizer's special tokens: <|im_start|> → chatml; <|begin_of_text|> or <|start_header_id|>
// → llama3; else llama2. Throws specd::Error on an unknown setting.
ChatTemplateKind resolve_chat_template(std::string_view setting, const tokenizer::Tokenizer& tok);

// The prompt text for `messages` followed by the assistant's generation prompt, without BOS.
// Throws specd::Error(kInvalidArgument) when the messages do not fit the template (empty list,
// unknown role, Llama 2 turns that do not alternate user/assistant).
std::string render_chat(ChatTemplateKind kind, const std::vector<ChatMessage>& messages);

// render_chat, tokenized as described above.
std::vector<int32_t> tokenize_chat(ChatTemplateKind kind, const tokenizer::Tokenizer& tok,
                                   const std::vector<ChatMessage>& messages);

// Tokens that end an assistant turn in this template (<|im_end|>, <|eot_id|>) when the
// tokenizer has them; the model's EOS ids stop generation anyway.
std::vector<int32_t> chat_stop_token_ids(ChatTemplateKind kind, const tokenizer::Tokenizer& tok);

}  // namespace specd::server
