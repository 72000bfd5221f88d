/*
 * specd plugin ABI, major 1.
 *
 * This is the only contract between the specd host and a plugin shared library. It is plain
 * C: no C++ library types, no exceptions and no RTTI cross it, so a plugin built with another
 * compiler or C++ standard library loads fine. Plugin authors normally use the C++ helpers in
 * <specd/sdk/plugin.hpp>, which implement this ABI for them.
 *
 * Versioning (docs/plugin-abi.md):
 *  - SPECD_ABI_MAJOR changes on any incompatible change; the entry symbol's name carries it
 *    (specd_plugin_entry_v1). The host refuses any other major.
 *  - SPECD_ABI_MINOR grows when something is appended. The host refuses a plugin whose minor is
 *    newer than its own. Structs are append-only within a major and start with struct_size, so
 *    each side reads only the fields that the other side's struct_size covers; an optional
 *    vtable entry that lies past a plugin's struct_size is treated as absent (NULL).
 *  - Minor history:
 *      1.0  first release.
 *      1.1  model services: load takes block-quantized weights (SPECD_DTYPE_Q8_0, Q4_0) and
 *           specd_model_info.dtype reports them; a sequence may appear in several rows of
 *           one forward batch (batch expansion); the engine's target model is reachable
 *           through specd_score_batch.target and scorer plugins are called. Proposers built
 *           against 1.1 or later get on_accept / on_release only when they declare
 *           keeps_state (1.0 proposers get them always); supports_variable_k and the
 *           verifier's lossless are honoured.
 *      1.2  model services: load takes and specd_model_info.dtype reports K-quant weights
 *           (SPECD_DTYPE_Q4_K, Q5_K, Q6_K: GGUF's block layouts, computed natively).
 *      1.3  draft trees: a proposer that declares drafts_trees fills draft_parents (each draft
 *           node's parent; a chain is the special case); the score and verify batches carry
 *           them, a verifier declares supports_trees and reports the accepted nodes
 *           (out_nodes), a scorer plugin declares scores_trees through its new optional
 *           capabilities entry. The host refuses a tree proposer with a chain-only verifier
 *           or scorer at load. Model services forward takes tree attention (tree_sizes,
 *           tree_parents) so that a proposer can draft a tree level by level. A proposer may
 *           ask for the target's hidden states of named layers (aux_hidden_layers, EAGLE-3).
 *           Model services load EAGLE-3 heads (specd_model_info.kind, input_hidden_width,
 *           aux_layers; specd_forward_batch.input_hidden_width).
 *      1.4  finished outputs and tenants (suffix decoding): a proposer's optional on_finish gets
 *           every sequence that finished (a stop or the length limit) with its whole text;
 *           specd_sequence.tenant says whose text it is (0: a request nobody else may see); the
 *           host's record service takes a proposer's own observations, which /metrics
 *           publishes (docs/plugin-abi.md "Observations").
 *      1.5  structured output: the host's allowed_tokens service tells a proposer, during
 *           propose, which tokens a sequence's grammar allows after a draft prefix, so that it
 *           drafts only those (the host cuts a draft at the first forbidden token anyway).
 *      1.6  proposer confidence: a chain proposer that declares reports_confidence fills
 *           draft_confidence (its estimate that each draft is accepted); under dynamic k the
 *           host then asks for each sequence's whole budget and cuts the draft itself.
 *      1.7  model services forward: hidden_all, and logits may be NULL (KV and hidden only).
 *      1.8  model services load: Q3_K and Q2_K weights.
 *      1.9  tree depth: a tree proposer declares max_tree_depth, the deepest tree it drafts;
 *           under dynamic speculation the host values node budgets up to that depth.
 *
 * Ownership, unless a comment says otherwise: pointers passed into a plugin call are owned by
 * the host and valid only for the duration of that call; output buffers are allocated by the
 * host and sized as documented; pointers a plugin returns (names, descriptors) must stay
 * valid until the library is unloaded.
 *
 * Threading: the host calls one component instance from one thread at a time. Distinct
 * instances may be called concurrently.
 */
#ifndef SPECD_SDK_ABI_H_
#define SPECD_SDK_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPECD_ABI_MAJOR 1
#define SPECD_ABI_MINOR 9
/* The exported entry symbol. A plugin exports exactly this one symbol. */
#define SPECD_PLUGIN_ENTRY_SYMBOL "specd_plugin_entry_v1"
#define SPECD_PLUGIN_ENTRY_PREFIX "specd_plugin_entry_v"

/* ------------------------------------------------------------------------------------------ */
/* Status                                                                                       */

typedef enum specd_status_code {
  SPECD_OK = 0,
  SPECD_ERR_INVALID_ARGUMENT = 1, /* bad parameters or inputs (names the field/sequence) */
  SPECD_ERR_UNSUPPORTED = 2,      /* asked for something this component cannot do */
  SPECD_ERR_OUT_OF_MEMORY = 3,
  SPECD_ERR_NOT_FOUND = 4,
  SPECD_ERR_INTERNAL = 5 /* anything else, including a C++ exception caught at the boundary */
} specd_status_code;

/* Every fallible call returns a specd_status_code and, on failure, writes a NUL-terminated
 * message into the host-provided error buffer (truncated to capacity). */
typedef struct specd_error {
  uint32_t struct_size;
  uint32_t capacity; /* bytes available in message, including the NUL */
  char* message;
} specd_error;

/* ------------------------------------------------------------------------------------------ */
/* Data views                                                                                   */

typedef enum specd_dtype {
  SPECD_DTYPE_F32 = 0,
  SPECD_DTYPE_F16 = 1,
  SPECD_DTYPE_BF16 = 2,
  SPECD_DTYPE_I32 = 3,
  SPECD_DTYPE_I64 = 4,
  /* Since 1.1: block-quantized weights (GGUF layouts; model services `load` only). */
  SPECD_DTYPE_Q8_0 = 5,
  SPECD_DTYPE_Q4_0 = 6,
  /* Since 1.2: K-quant weights (GGUF layouts; model services `load` only). */
  SPECD_DTYPE_Q4_K = 7,
  SPECD_DTYPE_Q5_K = 8,
  SPECD_DTYPE_Q6_K = 9,
  /* Since 1.8: Q3_K and Q2_K weights (GGUF's layouts; model services `load` only). */
  SPECD_DTYPE_Q3_K = 10,
  SPECD_DTYPE_Q2_K = 11
} specd_dtype;

typedef enum specd_device_type { SPECD_DEVICE_CPU = 0, SPECD_DEVICE_CUDA = 1 } specd_device_type;

typedef struct specd_device {
  int32_t type;  /* specd_device_type */
  int32_t index; /* CUDA ordinal; 0 for CPU */
} specd_device;

#define SPECD_MAX_DIMS 4

/* A dense, row-major tensor. data == NULL means "absent". */
typedef struct specd_tensor_view {
  uint32_t struct_size;
  void* data;
  int32_t dtype; /* specd_dtype */
  specd_device device;
  int32_t ndim;
  int64_t shape[SPECD_MAX_DIMS];
} specd_tensor_view;

/* A read-only run of token ids. */
typedef struct specd_token_view {
  const int32_t* data;
  int64_t size;
} specd_token_view;

/* ------------------------------------------------------------------------------------------ */
/* Parameters: a component's YAML subtree, flattened by the host.                              */

typedef enum specd_param_kind {
  SPECD_PARAM_SCALAR = 0, /* text holds the scalar as written in YAML */
  SPECD_PARAM_NULL = 1,
  SPECD_PARAM_SEQUENCE = 2, /* children follow as "key[0]", "key[1]", ... */
  SPECD_PARAM_MAP = 3       /* children follow as "key.child" */
} specd_param_kind;

typedef struct specd_param {
  const char* key;  /* path relative to the component node: "k", "draft.path", "ids[2]" */
  int32_t kind;     /* specd_param_kind */
  const char* text; /* scalar text; "" for other kinds */
  int32_t line;     /* 1-based line in source_file, 0 if unknown */
} specd_param;

typedef struct specd_params {
  uint32_t struct_size;
  const char* source_file; /* the YAML file, or "<cli>" / "<default>" */
  const char* path;        /* the component node's path, e.g. "speculative.proposer" */
  int32_t line;            /* line of the component node */
  int64_t count;
  const specd_param* entries; /* every node below the component, pre-order; "name" excluded */
} specd_params;

/* ------------------------------------------------------------------------------------------ */
/* Host services handed to every component factory.                                           */

typedef enum specd_log_level {
  SPECD_LOG_TRACE = 0,
  SPECD_LOG_DEBUG = 1,
  SPECD_LOG_INFO = 2,
  SPECD_LOG_WARN = 3,
  SPECD_LOG_ERROR = 4
} specd_log_level;

struct specd_model_services;

typedef struct specd_host_services {
  uint32_t struct_size;
  uint32_t host_abi_minor;
  void* host_ctx; /* pass back to every function below */

  /* Logging into the host's sink as logger "plugin.<plugin name>". */
  int32_t (*log_enabled)(void* host_ctx, int32_t level);
  void (*log)(void* host_ctx, int32_t level, const char* message, size_t length);

  /* Memory on a device. CPU memory is ordinary aligned host memory; CUDA memory is device
   * memory. alignment is a power of two (0 = default 64). Returns NULL on failure. */
  void* (*alloc)(void* host_ctx, specd_device device, size_t bytes, size_t alignment);
  void (*free)(void* host_ctx, specd_device device, void* ptr);
  /* The stream (cudaStream_t) a component must use on a CUDA device; NULL on CPU. */
  void* (*device_stream)(void* host_ctx, specd_device device);

  /* Model services, or NULL when the host has no model runtime (e.g. `specd plugins list`). */
  const struct specd_model_services* models;

  /* Since 1.4, proposers only (NULL for other components): adds one observation `value` (finite,
   * >= 0) to the series `name` (1 to 32 characters of [a-z0-9_]; at most 16 names per instance).
   * Anything else is dropped, with one warning in the log per reason. /metrics publishes each
   * series' count and sum as specd_spec_proposer_observations_total and
   * specd_spec_proposer_observation_sum{proposer, verifier, name}. Thread-safe. */
  void (*record)(void* host_ctx, const char* name, double value);

  /* Since 1.5, proposers only (NULL for other components), from inside propose: structured
   * output (docs/structured-output.md). For sequence seq_id of the propose batch, after its
   * tokens and then the n_prefix drafts in prefix, sets bit t of mask (bit t % 64 of word
   * t / 64; mask_words >= (vocab_size + 63) / 64) for every token t the request's grammar
   * allows next (stop tokens where the text may end; none if the prefix itself is forbidden)
   * and returns 1. Returns 0, mask untouched, for a sequence without a constraint or outside a
   * propose call; -1 for bad arguments or a sequence not in the batch. The host cuts every
   * draft at its first forbidden token before scoring: drafting only allowed tokens keeps the
   * draft whole. */
  int32_t (*allowed_tokens)(void* host_ctx, uint64_t seq_id, const int32_t* prefix, int32_t n_prefix, uint64_t* mask,
                            int64_t mask_words);
} specd_host_services;

/* ------------------------------------------------------------------------------------------ */
/* Model services: let plugins run causal LMs with host-managed paged KV.                      */

typedef struct specd_model specd_model; /* opaque, owned by the host */

typedef struct specd_model_info {
  uint32_t struct_size;
  int32_t vocab_size;
  int32_t hidden_size;
  int32_t num_layers;
  int32_t max_context;
  int32_t num_mtp_modules; /* MTP heads found with the model; 0 if none */
  specd_device device;
  int32_t dtype; /* since 1.1: the weights' compute dtype (specd_dtype) */
  /* Since 1.3: what was loaded (specd_model_kind). An EAGLE-3 head (load of a directory whose
   * config.json names LlamaForCausalLMEagle3; docs/model-formats.md) takes input_hidden: rows of
   * input_hidden_width (the target's three fused states: 3 x its hidden size) or of hidden_size
   * (its own previous hidden output, which is its state before the final norm); its logits are
   * over the target's vocabulary, -inf outside the head's draft vocabulary. aux_layers: the target
   * layers it was trained on, in the aux_hidden_layers convention (num_aux_layers 0: not given;
   * the public default is 2, L/2 and L-3). */
  int32_t kind;
  int32_t input_hidden_width;
  int32_t num_aux_layers;
  int32_t aux_layers[4];
} specd_model_info;

typedef enum specd_model_kind {
  SPECD_MODEL_CAUSAL_LM = 0,
  SPECD_MODEL_MTP = 1,
  SPECD_MODEL_EAGLE3 = 2
} specd_model_kind;

typedef struct specd_model_load_options {
  uint32_t struct_size;
  const char* path;   /* model directory; NULL or "" = the engine's target model */
  int32_t num_layers; /* > 0: use only the first num_layers decoder layers (self-draft) */
  int32_t dtype;      /* weights' compute dtype: F32, F16, BF16, Q8_0 (1.1), Q4_0 (1.1), Q4_K,
                         Q5_K, Q6_K (1.2), or -1 for the checkpoint's own (a self-draft: the
                         target's) */
} specd_model_load_options;

/* One batched forward over new tokens of several sequences. Sequence KV lives in the host's
 * paged cache, keyed by (model, seq_id); tokens are appended after the cached ones.
 * Since 1.1 a sequence may appear in several rows (check host_abi_minor >= 1): its rows then
 * continue each other in row order (a row's tokens follow the previous row's), and each row
 * attends over every position before its own, including those the earlier rows of the same
 * call write. k+1 one-token rows of one sequence are batch expansion's k+1 single-token
 * sequences; one row of k+1 tokens is the multi-query layout. Both leave the same KV. */
typedef struct specd_forward_batch {
  uint32_t struct_size;
  int32_t num_seqs;
  const uint64_t* seq_ids;   /* [num_seqs] */
  const int32_t* num_new;    /* [num_seqs] new tokens per sequence, >= 1 */
  const int32_t* tokens;     /* [sum(num_new)] concatenated */
  int32_t all_logits;        /* 0: logits of each sequence's last new token; 1: of every new token */
  float* logits;             /* out: [rows, vocab] where rows = num_seqs or sum(num_new); since
                                1.7 NULL with all_logits 0: no logits (KV and hidden only) */
  float* hidden;             /* out, optional (NULL): final hidden states, same rows, [rows, hidden] */
  const float* input_hidden; /* MTP only: [rows, hidden] previous hidden states, else NULL */
  /* Since 1.3 (host_abi_minor >= 3): tree attention for drafting trees, or both NULL (causal).
   * Row i's sequence ends, after this call, in a tree region of its last tree_sizes[i]
   * positions (0: none; cached nodes of earlier calls, then this row's tokens), whose parents
   * follow each other in tree_parents (row by row): an index into the region below its own, or
   * -1 for a node that follows the linear prefix. A node attends to the prefix, its ancestors
   * and itself, at position prefix + depth. A sequence with a tree appears in one row. */
  const int32_t* tree_sizes;
  const int32_t* tree_parents;
  /* Since 1.3: the width of input_hidden's rows (0: hidden_size); an EAGLE-3 head also takes
   * specd_model_info.input_hidden_width. */
  int32_t input_hidden_width;
  /* Since 1.7: 1 = `hidden` has a row for every new token (rows in token order) whatever
   * all_logits says, so a caller that needs every hidden state but only the last logits (an MTP
   * module feeding the next one) does not pay for the LM head on every row. */
  int32_t hidden_all;
} specd_forward_batch;

typedef struct specd_model_services {
  uint32_t struct_size;
  int32_t (*load)(void* host_ctx, const specd_model_load_options* options, specd_model** out, specd_error* err);
  /* Loads MTP module `module` (0-based) of `target` (NULL = the engine's target model) as a
   * model whose forward takes input_hidden. */
  int32_t (*load_mtp)(void* host_ctx, specd_model* target, int32_t module, specd_model** out, specd_error* err);
  void (*release)(void* host_ctx, specd_model* model);
  /* model == NULL describes the engine's target model (as does the handle in
   * specd_score_batch.target). */
  int32_t (*info)(void* host_ctx, const specd_model* model, specd_model_info* out);
  int32_t (*forward)(void* host_ctx, specd_model* model, const specd_forward_batch* batch, specd_error* err);
  /* Cached length of a sequence (0 if unknown). */
  int64_t (*seq_length)(void* host_ctx, const specd_model* model, uint64_t seq_id);
  /* Keep only the first new_length cached tokens (rollback). Refused on the engine's target,
   * whose KV the host's scheduler owns. */
  int32_t (*truncate)(void* host_ctx, specd_model* model, uint64_t seq_id, int64_t new_length, specd_error* err);
  /* Frees a sequence's KV blocks in this model (no-op on the engine's target). The host also
   * caps every hosted model's KV of a sequence at the target's committed length after each
   * verification and frees it when the sequence ends or is preempted. */
  void (*drop_sequence)(void* host_ctx, specd_model* model, uint64_t seq_id);
} specd_model_services;

/* ------------------------------------------------------------------------------------------ */
/* Sequences as components see them.                                                           */

typedef struct specd_sequence {
  uint32_t struct_size;
  uint64_t seq_id;         /* unique for the life of the engine */
  specd_token_view tokens; /* prompt + every emitted token so far */
  int64_t num_prompt;      /* tokens[0:num_prompt] is the prompt */
  uint64_t seed;           /* the request's seed */
  uint64_t step;           /* decode steps taken by this sequence so far */
  float temperature;       /* the request's sampling temperature (0 = greedy) */
  /* Since 1.4 (read it only when struct_size covers it): who may see this sequence's text in
   * drafts for other requests. Requests with the same non-zero tenant share one owner (the
   * server derives it from the API key and the `user` field); 0: a request that shares with
   * nobody. */
  uint64_t tenant;
} specd_sequence;

/* ------------------------------------------------------------------------------------------ */
/* Proposer                                                                                     */

typedef struct specd_proposer_caps {
  uint32_t struct_size;
  int32_t produces_draft_probs; /* fills draft_probs in propose (else treated as one-hot) */
  int32_t needs_target_hidden;  /* wants the target's last hidden states */
  /* Keeps per-sequence state (an index, KV in a hosted model, ...): the host then calls
   * on_prefill, on_accept and on_release for its sequences. 0: the proposer reads what it needs
   * from each propose batch and the host skips those calls (ABI 1.0 plugins get on_accept and
   * on_release regardless). */
  int32_t keeps_state;
  /* Accepts a different k per sequence in one propose. 0: every sequence that proposes gets
   * the same max_draft (the step's smallest k_i), as in vLLM's "k or nothing". */
  int32_t supports_variable_k;
  int32_t max_k; /* largest k it can propose; 0 = no limit */
  /* Since 1.3: may draft trees (fills draft_parents in propose). max_draft is then a node
   * budget. The host refuses the proposer at load unless every verifier declares
   * supports_trees and the scorer scores trees. */
  int32_t drafts_trees;
  /* Since 1.3: the target's hidden states of these layers for every committed position, next
   * to (or instead of) the final ones: layer l in [0, num_layers] is the residual stream entering
   * decoder layer l, before its norm (0: the token embeddings; num_layers: the last layer's
   * output before the final norm). vLLM's eagle_aux_hidden_state_layer_ids count the same way;
   * SGLang / SpecForge's eagle_config ids count layer outputs (theirs + 1). They come in
   * target_aux_hidden with the rows target_hidden has. The array lives as long as the instance;
   * the host refuses a layer outside the target at load. */
  int32_t num_aux_hidden_layers;
  const int32_t* aux_hidden_layers;
  /* Since 1.6: fills draft_confidence in propose. A host with dynamic speculation then gives
   * every sequence it plans its whole lookahead as max_draft, calibrates the confidences
   * against the drafts' measured acceptance and cuts each chain to the length it chooses
   * (docs/speculative.md "Proposer confidence"); on_accept reports the accepted drafts of the
   * cut chain. Ignored for a proposer that declares drafts_trees. Asking for the whole budget
   * every step suits proposers whose call is cheap next to a step (lookups, not a model). */
  int32_t reports_confidence;
  /* Since 1.9, with drafts_trees: the most levels (tokens below the committed one) any tree it
   * drafts has, whatever the node budget; 0 = unknown. Dynamic speculation values a budget of n
   * nodes by at most min(n, max_tree_depth) levels. Unknown, it can only bound a tree by the
   * deepest one verified so far, and the small trees of the first steps would hold it there. */
  int32_t max_tree_depth;
} specd_proposer_caps;

/* Prefill: a chunk of each sequence's prompt has been run through the target. The chunk is the
 * last num_new[i] tokens of seqs[i].tokens (tokens holds the prompt processed so far). */
typedef struct specd_prefill_batch {
  uint32_t struct_size;
  int32_t num_seqs;
  const specd_sequence* seqs; /* [num_seqs] */
  const int32_t* num_new;     /* [num_seqs] tokens in this chunk */
  /* Target final hidden states (after the final norm) of every chunk position, rows of each
   * sequence contiguous: [sum(num_new), hidden]. Only when needs_target_hidden; else absent. */
  specd_tensor_view target_hidden;
  /* Since 1.3, with aux_hidden_layers: [sum(num_new), num_aux_hidden_layers, hidden], rows as
   * target_hidden's. */
  specd_tensor_view target_aux_hidden;
} specd_prefill_batch;

typedef struct specd_propose_batch {
  uint32_t struct_size;
  int32_t num_seqs;
  const specd_sequence* seqs; /* [num_seqs] */
  const int32_t* max_draft;   /* [num_seqs] k_i in 0..k_max; 0 means "do not propose" */
  int32_t k_max;
  int32_t vocab_size;
  /* When needs_target_hidden: the target's final hidden states of the positions committed
   * since the previous call for this sequence that now have one. A sequence of length L has
   * hidden states for positions 0..L-2 (the last token has not been through the target yet);
   * num_hidden[i] rows cover positions [L-1-num_hidden[i], L-1), rows of each sequence
   * contiguous: [sum(num_hidden), hidden]. Else num_hidden is NULL and target_hidden absent. */
  const int32_t* num_hidden;
  specd_tensor_view target_hidden;
  /* Outputs, allocated by the host: */
  int32_t* draft_tokens; /* [num_seqs, k_max], pre-filled with -1 */
  int32_t* num_drafted;  /* [num_seqs] in 0..max_draft[i], pre-filled with 0 */
  float* draft_probs;    /* [num_seqs, k_max, vocab] when produces_draft_probs, else NULL.
                            Rows past num_drafted[i] are ignored. */
  /* Since 1.3, when drafts_trees (else NULL): [num_seqs, k_max], pre-filled with a chain
   * (node j's parent j - 1). Node j's parent is a node below j, or -1 for a child of the last
   * committed token; the host checks this and fails the sequence otherwise. With draft probs,
   * row j is the distribution node j was drawn from: siblings drawn independently from one
   * distribution each carry it, a deterministic choice (top-k) is one-hot (leave it to the
   * host: do not declare produces_draft_probs). Siblings are tried in node order. */
  int32_t* draft_parents;
  /* Since 1.3, with aux_hidden_layers: [sum(num_hidden), num_aux_hidden_layers, hidden], the
   * positions target_hidden covers (num_hidden is then given even without needs_target_hidden,
   * and target_hidden is absent unless asked for). */
  specd_tensor_view target_aux_hidden;
  /* Since 1.6, when the proposer declares reports_confidence and this call's drafts may be cut
   * (else NULL): [num_seqs, k_max], pre-filled with -1 ("none"). Entry j of sequence i: the
   * proposer's estimate, in [0, 1], that draft j is accepted given drafts 0..j-1 were. */
  float* draft_confidence;
} specd_propose_batch;

typedef struct specd_proposer_vtable {
  uint32_t struct_size;
  void (*destroy)(void* self);
  int32_t (*capabilities)(void* self, specd_proposer_caps* out);
  /* Optional (NULL): a chunk of each sequence's prompt went through the target (sequences of
   * proposers that keep state or need target hidden states). */
  int32_t (*on_prefill)(void* self, const specd_prefill_batch* batch, specd_error* err);
  int32_t (*propose)(void* self, specd_propose_batch* batch, specd_error* err);
  /* Optional: after verification. num_accepted drafts were accepted; emitted (accepted drafts
   * plus the target's token, num_accepted + 1 tokens) were appended to the sequence. State
   * built from rejected drafts must be rolled back. Called for every sequence that was given
   * max_draft > 0 and goes on, before the next propose (see keeps_state). A failure fails
   * that sequence only. */
  int32_t (*on_accept)(void* self, uint64_t seq_id, int32_t num_accepted, specd_token_view emitted, specd_error* err);
  /* Optional: the sequence ended (finished, cancelled, failed or preempted); free its state.
   * Always called once per sequence the component has seen. Never fails. */
  void (*on_release)(void* self, uint64_t seq_id);
  /* Optional, since 1.4: the sequence finished (a stop token, stop string or the length limit;
   * not a failure, cancellation or preemption). seq->tokens is its prompt and every generated
   * token (past a stop string too). Called on every proposer that has it, whatever keeps_state
   * says, before on_release. Never fails. */
  void (*on_finish)(void* self, const specd_sequence* seq);
} specd_proposer_vtable;

/* ------------------------------------------------------------------------------------------ */
/* Scorer: runs the target over each decoding sequence's last token and drafts. The default,
 * multi-query scoring (one row of num_drafted + 1 tokens per sequence), is built into the core;
 * `speculative.scorer: <name>` replaces it with a plugin for the decoding sequences (prefill
 * chunks still go through the core's forward). Since 1.1.                                    */

typedef struct specd_score_batch {
  uint32_t struct_size;
  int32_t num_seqs;
  /* seqs[i].tokens = prompt + emitted (L tokens). On entry the target's KV of seqs[i] holds
   * tokens [0, L-1) and has room reserved for num_drafted[i] + 1 more positions. */
  const specd_sequence* seqs;
  const int32_t* draft_tokens; /* [num_seqs, k_max] */
  const int32_t* num_drafted;  /* [num_seqs] 0..k_max (0: score the last token alone) */
  int32_t k_max;
  int32_t vocab_size;
  /* The engine's target model and its KV cache, for model services forward/info/seq_length.
   * On success the scorer has run tokens[L-1] followed by the drafts through it, so that the
   * target's KV holds [0, L + num_drafted[i]) exactly as one multi-query forward leaves it;
   * the host checks the length and rolls back rejected drafts itself. */
  specd_model* target;
  /* Outputs, allocated by the host: */
  float* target_logits; /* [num_seqs, k_max + 1, vocab]: raw logits of tokens[L-1] and each draft;
                           rows past num_drafted[i] + 1 unused */
  float* target_hidden; /* [num_seqs, k_max + 1, hidden] final hidden states of the same
                           positions, or NULL when not wanted */
  /* Since 1.3: [num_seqs, k_max] draft trees (specd_propose_batch.draft_parents), or NULL when
   * every draft is a chain. Only scorers that declare scores_trees get trees. Node j is scored
   * at position L - 1 + depth(j) (roots depth 1) over the prefix and its ancestors; its row is
   * j + 1 and its K/V ends at cache position L + j, as the core's tree forward leaves it. */
  const int32_t* draft_parents;
} specd_score_batch;

/* Since 1.3. */
typedef struct specd_scorer_caps {
  uint32_t struct_size;
  int32_t scores_trees; /* handles specd_score_batch.draft_parents */
} specd_scorer_caps;

typedef struct specd_scorer_vtable {
  uint32_t struct_size;
  void (*destroy)(void* self);
  int32_t (*score)(void* self, specd_score_batch* batch, specd_error* err);
  /* Optional (since 1.3; absent: scores chains only). */
  int32_t (*capabilities)(void* self, specd_scorer_caps* out);
} specd_scorer_vtable;

/* ------------------------------------------------------------------------------------------ */
/* Verifier                                                                                     */

typedef struct specd_verifier_caps {
  uint32_t struct_size;
  int32_t needs_draft_probs; /* uses q; without it the host passes NULL (one-hot q) */
  int32_t lossless;          /* output distribution equals the target's (the host reports it:
                                EngineInfo and the start-up log) */
  int32_t supports_cuda;     /* can verify tensors on a CUDA device */
  int32_t supports_trees;    /* since 1.3: verifies draft trees (specd_verify_batch.draft_parents) */
} specd_verifier_caps;

/* All pointers live on `device`. Probabilities are after each request's sampling transforms
 * (temperature, top-k, top-p, min-p); rows sum to 1. */
typedef struct specd_verify_batch {
  uint32_t struct_size;
  specd_device device;
  void* stream; /* cudaStream_t on CUDA, NULL on CPU */
  int32_t num_seqs;
  int32_t k_max;
  int32_t vocab_size;
  const int32_t* num_drafted;  /* [num_seqs] 0..k_max */
  const int32_t* draft_tokens; /* [num_seqs, k_max]; entries past num_drafted are ignored */
  const float* target_probs;   /* [num_seqs, k_max + 1, vocab] */
  const float* draft_probs;    /* [num_seqs, k_max, vocab] or NULL (one-hot q) */
  const uint64_t* seeds;       /* [num_seqs] per-request seed */
  const uint64_t* steps;       /* [num_seqs] per-sequence step counter */
  /* Outputs, allocated by the host on `device`: */
  int32_t* out_tokens;   /* [num_seqs, k_max + 1], -1 padded */
  int32_t* num_accepted; /* [num_seqs] accepted drafts; emitted = num_accepted + 1 */
  /* Since 1.3, only for verifiers that declare supports_trees: the drafts as trees, or NULL
   * when every draft is a chain. [num_seqs, k_max]: node j's parent, below j, or -1 for a
   * child of the last committed token. Target row 0 is the distribution after the last
   * committed token, row j + 1 the one after node j; draft row j is the distribution node j
   * was drawn from. The accepted drafts are a root-to-node path; out_tokens holds their
   * tokens, then the emitted one. */
  const int32_t* draft_parents;
  int32_t* out_nodes; /* with draft_parents: [num_seqs, k_max] the accepted path's node
                         indices, root first (num_accepted of them), -1 padded */
} specd_verify_batch;

typedef struct specd_verifier_vtable {
  uint32_t struct_size;
  void (*destroy)(void* self);
  int32_t (*capabilities)(void* self, specd_verifier_caps* out);
  int32_t (*verify)(void* self, const specd_verify_batch* batch, specd_error* err);
} specd_verifier_vtable;

/* ------------------------------------------------------------------------------------------ */
/* Components and the plugin descriptor                                                         */

typedef enum specd_component_kind {
  SPECD_COMPONENT_PROPOSER = 0,
  SPECD_COMPONENT_SCORER = 1,
  SPECD_COMPONENT_VERIFIER = 2
} specd_component_kind;

/* A created component: self is the plugin's object, vtable points at the kind's vtable. */
typedef struct specd_component {
  uint32_t struct_size;
  void* self;
  const void* vtable;
} specd_component;

typedef struct specd_component_desc {
  uint32_t struct_size;
  int32_t kind; /* specd_component_kind */
  const char* name;
  const char* description;
  /* Validates params without creating anything. Optional (NULL): the host then validates by
   * creating and destroying an instance. */
  int32_t (*validate)(const specd_params* params, specd_error* err);
  /* Creates an instance. host outlives the instance. */
  int32_t (*create)(const specd_host_services* host, const specd_params* params, specd_component* out,
                    specd_error* err);
} specd_component_desc;

typedef struct specd_plugin_descriptor {
  uint32_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* name;
  const char* version;
  int32_t cuda_runtime_major; /* CUDA runtime major the device code was built for; 0 if none */
  int32_t num_components;
  const specd_component_desc* components;
} specd_plugin_descriptor;

/* The entry point, exported as SPECD_PLUGIN_ENTRY_SYMBOL (through BOOST_DLL_ALIAS in the C++
 * helpers). Called once after the library is loaded; never fails. */
typedef const specd_plugin_descriptor* (*specd_plugin_entry_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SPECD_SDK_ABI_H_ */
